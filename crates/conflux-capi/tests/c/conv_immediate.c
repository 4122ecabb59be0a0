/* Immediate mode in all three directions: solution count and list, workspace of a
 * solution, compile, run by id; an unknown id is BadParm. Dilated, strided, padded. */
#include "common.h"

#define MAXS 8

int main(void)
{
    conv_geom g = geom(2, 2, 7, 7, 3, 3, 3, 2, 2, 2);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc;
    miopenConvolutionDescriptor_t conv;
    miopenConvSolution_t sol[MAXS];
    size_t count = 0, listed = 0, ws_size = 0, i;
    void* ws = NULL;
    float *x = alloc_floats(x_count(g)), *w = alloc_floats(w_count(g)), *y = alloc_floats(y_count(g));
    float *want_y = alloc_floats(y_count(g)), *dx = alloc_floats(x_count(g)), *want_dx = alloc_floats(x_count(g));
    float *dw = alloc_floats(w_count(g)), *want_dw = alloc_floats(w_count(g));

    fill_ints(x, x_count(g), 31u, 3);
    fill_ints(w, w_count(g), 32u, 2);
    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv);

    /* Forward. */
    CHECK(miopenConvolutionForwardGetSolutionCount(handle, w_desc, x_desc, conv, y_desc, &count));
    REQUIRE(count >= 1);
    CHECK(miopenConvolutionForwardGetSolution(handle, w_desc, x_desc, conv, y_desc, MAXS, &listed, sol));
    REQUIRE(listed >= 1 && listed <= count);
    for(i = 0; i < listed; i++) REQUIRE(sol[i].solution_id != 0);
    CHECK(miopenConvolutionForwardGetSolutionWorkspaceSize(handle, w_desc, x_desc, conv, y_desc,
                                                           sol[0].solution_id, &ws_size));
    REQUIRE(ws_size == sol[0].workspace_size);
    if(ws_size > 0) ws = malloc(ws_size);
    CHECK(miopenConvolutionForwardCompileSolution(handle, w_desc, x_desc, conv, y_desc, sol[0].solution_id));
    CHECK(miopenConvolutionForwardImmediate(handle, w_desc, w, x_desc, x, conv, y_desc, y, ws, ws_size,
                                            sol[0].solution_id));
    ref_conv_fwd(g, x, w, want_y);
    EXPECT_CLOSE(y, want_y, y_count(g), 0.0);
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenConvolutionForwardImmediate(handle, w_desc, w, x_desc, x, conv, y_desc, y, ws,
                                                    ws_size, 999999));
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenConvolutionForwardGetSolutionWorkspaceSize(handle, w_desc, x_desc, conv, y_desc,
                                                                   999999, &ws_size));
    free(ws); ws = NULL;

    /* Backward data: dy = y. */
    CHECK(miopenConvolutionBackwardDataGetSolution(handle, y_desc, w_desc, conv, x_desc, MAXS, &listed, sol));
    REQUIRE(listed >= 1);
    CHECK(miopenConvolutionBackwardDataGetSolutionCount(handle, y_desc, w_desc, conv, x_desc, &count));
    REQUIRE(count >= listed);
    CHECK(miopenConvolutionBackwardDataGetSolutionWorkspaceSize(handle, y_desc, w_desc, conv, x_desc,
                                                                sol[0].solution_id, &ws_size));
    if(ws_size > 0) ws = malloc(ws_size);
    CHECK(miopenConvolutionBackwardDataCompileSolution(handle, y_desc, w_desc, conv, x_desc, sol[0].solution_id));
    CHECK(miopenConvolutionBackwardDataImmediate(handle, y_desc, y, w_desc, w, conv, x_desc, dx, ws,
                                                 ws_size, sol[0].solution_id));
    ref_conv_bwd_data(g, y, w, want_dx);
    EXPECT_CLOSE(dx, want_dx, x_count(g), 0.0);
    free(ws); ws = NULL;

    /* Backward weights. */
    CHECK(miopenConvolutionBackwardWeightsGetSolution(handle, y_desc, x_desc, conv, w_desc, MAXS, &listed, sol));
    REQUIRE(listed >= 1);
    CHECK(miopenConvolutionBackwardWeightsGetSolutionCount(handle, y_desc, x_desc, conv, w_desc, &count));
    CHECK(miopenConvolutionBackwardWeightsGetSolutionWorkspaceSize(handle, y_desc, x_desc, conv, w_desc,
                                                                   sol[0].solution_id, &ws_size));
    if(ws_size > 0) ws = malloc(ws_size);
    CHECK(miopenConvolutionBackwardWeightsCompileSolution(handle, y_desc, x_desc, conv, w_desc, sol[0].solution_id));
    CHECK(miopenConvolutionBackwardWeightsImmediate(handle, y_desc, y, x_desc, x, conv, w_desc, dw, ws,
                                                    ws_size, sol[0].solution_id));
    ref_conv_bwd_weights(g, x, y, want_dw);
    EXPECT_CLOSE(dw, want_dw, w_count(g), 0.0);
    free(ws);

    CHECK(miopenDestroyConvolutionDescriptor(conv));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(w); free(y); free(want_y); free(dx); free(want_dx); free(dw); free(want_dw);
    printf("conv_immediate: ok\n");
    return 0;
}
