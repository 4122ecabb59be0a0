/* Find + run for backward data and backward weights (padded, strided), checked against
 * references computed here; beta = 1 accumulates. */
#include "common.h"

int main(void)
{
    conv_geom g = geom(2, 3, 6, 5, 2, 3, 2, 1, 2, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc;
    miopenConvolutionDescriptor_t conv;
    miopenConvAlgoPerf_t perf[4];
    int returned = 0;
    size_t ws_size = 0, i;
    void* ws = NULL;
    float one = 1.0f, zero = 0.0f;
    float *x = alloc_floats(x_count(g)), *w = alloc_floats(w_count(g)), *dy = alloc_floats(y_count(g));
    float *dx = alloc_floats(x_count(g)), *want_dx = alloc_floats(x_count(g));
    float *dw = alloc_floats(w_count(g)), *want_dw = alloc_floats(w_count(g));

    fill_ints(x, x_count(g), 41u, 3);
    fill_ints(w, w_count(g), 42u, 2);
    fill_ints(dy, y_count(g), 43u, 2);
    ref_conv_bwd_data(g, dy, w, want_dx);
    ref_conv_bwd_weights(g, x, dy, want_dw);
    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv);

    CHECK(miopenConvolutionBackwardDataGetWorkSpaceSize(handle, y_desc, w_desc, conv, x_desc, &ws_size));
    if(ws_size > 0) ws = malloc(ws_size);
    CHECK(miopenFindConvolutionBackwardDataAlgorithm(handle, y_desc, dy, w_desc, w, conv, x_desc, dx, 4,
                                                     &returned, perf, ws, ws_size, false));
    REQUIRE(returned >= 1);
    EXPECT_CLOSE(dx, want_dx, x_count(g), 0.0);
    memset(dx, 0, sizeof(float) * x_count(g));
    CHECK(miopenConvolutionBackwardData(handle, &one, y_desc, dy, w_desc, w, conv, perf[0].bwd_data_algo,
                                        &zero, x_desc, dx, ws, ws_size));
    EXPECT_CLOSE(dx, want_dx, x_count(g), 0.0);
    CHECK(miopenConvolutionBackwardData(handle, &one, y_desc, dy, w_desc, w, conv, perf[0].bwd_data_algo,
                                        &one, x_desc, dx, ws, ws_size));
    for(i = 0; i < x_count(g); i++) want_dx[i] *= 2.0f;
    EXPECT_CLOSE(dx, want_dx, x_count(g), 0.0);
    free(ws); ws = NULL;

    CHECK(miopenConvolutionBackwardWeightsGetWorkSpaceSize(handle, y_desc, x_desc, conv, w_desc, &ws_size));
    if(ws_size > 0) ws = malloc(ws_size);
    CHECK(miopenFindConvolutionBackwardWeightsAlgorithm(handle, y_desc, dy, x_desc, x, conv, w_desc, dw,
                                                        4, &returned, perf, ws, ws_size, false));
    REQUIRE(returned >= 1);
    EXPECT_CLOSE(dw, want_dw, w_count(g), 0.0);
    memset(dw, 0, sizeof(float) * w_count(g));
    CHECK(miopenConvolutionBackwardWeights(handle, &one, y_desc, dy, x_desc, x, conv,
                                           perf[0].bwd_weights_algo, &zero, w_desc, dw, ws, ws_size));
    EXPECT_CLOSE(dw, want_dw, w_count(g), 0.0);
    free(ws);

    /* Mismatched descriptors: dy with the wrong channel count. */
    {
        miopenTensorDescriptor_t bad;
        CHECK(miopenCreateTensorDescriptor(&bad));
        CHECK(miopenSet4dTensorDescriptor(bad, miopenFloat, g.n, g.k + 1, g.oh, g.ow));
        EXPECT_STATUS(miopenStatusBadParm,
                      miopenConvolutionBackwardData(handle, &one, bad, dy, w_desc, w, conv,
                                                    miopenConvolutionBwdDataAlgoDirect, &zero, x_desc, dx,
                                                    NULL, 0));
        CHECK(miopenDestroyTensorDescriptor(bad));
    }

    CHECK(miopenDestroyConvolutionDescriptor(conv));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(w); free(dy); free(dx); free(want_dx); free(dw); free(want_dw);
    printf("conv_backward: ok\n");
    return 0;
}
