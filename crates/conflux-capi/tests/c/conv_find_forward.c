/* Find + Forward: workspace query, Find (results sorted, y written, the progress callback
 * called once per timed solver), Forward with the found algorithm (alpha/beta honored),
 * forward/backward bias, and the one-call miopenConvolutionBiasActivationForward with a
 * residual z. */
#include "common.h"

/* What the Find progress callback saw. */
typedef struct {
    int calls, last_step, total, bad;
} progress_log;

static void on_progress(const char* solver, const char* config, int step, int total, float ms, void* user)
{
    progress_log* log = (progress_log*)user;
    /* Steps count 1..total in order; names are set; no configuration outside tuning. */
    if(solver == NULL || solver[0] == '\0' || config != NULL || step != log->last_step + 1 ||
       total < 1 || step > total || (log->total != 0 && total != log->total) || !(ms >= 0.0f))
        log->bad++;
    log->calls++;
    log->last_step = step;
    log->total = total;
}

int main(void)
{
    conv_geom g = geom(2, 3, 7, 6, 4, 3, 3, 1, 2, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc, b_desc;
    miopenConvolutionDescriptor_t conv;
    miopenActivationDescriptor_t relu;
    miopenConvAlgoPerf_t perf[4];
    int returned = -1, i;
    progress_log log = {0, 0, 0, 0};
    size_t ws_size = 123, j, per = (size_t)g.oh * g.ow;
    void* ws = NULL;
    float two = 2.0f, one = 1.0f, zero = 0.0f;
    float *x = alloc_floats(x_count(g)), *w = alloc_floats(w_count(g));
    float *y = alloc_floats(y_count(g)), *want = alloc_floats(y_count(g)), *ref = alloc_floats(y_count(g));
    float *z = alloc_floats(y_count(g));
    float b[4] = {1, -2, 3, 0}, db[4], dbw[4];

    fill_ints(x, x_count(g), 1u, 3);
    fill_ints(w, w_count(g), 2u, 2);
    fill_ints(z, y_count(g), 4u, 5);
    ref_conv_fwd(g, x, w, ref);

    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv);
    CHECK(miopenConvolutionForwardGetWorkSpaceSize(handle, w_desc, x_desc, conv, y_desc, &ws_size));
    if(ws_size > 0) ws = malloc(ws_size);

    EXPECT_STATUS(miopenStatusBadParm,
                  miopenFindConvolutionForwardAlgorithm(handle, x_desc, x, w_desc, w, conv, y_desc, y, 0,
                                                        &returned, perf, ws, ws_size, false));
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenFindConvolutionForwardAlgorithm(handle, x_desc, x, w_desc, w, conv, y_desc, y, 4,
                                                        &returned, NULL, ws, ws_size, false));
    EXPECT_STATUS(miopenStatusBadParm, confluxSetFindProgressCallback(NULL, on_progress, &log));
    CHECK(confluxSetFindProgressCallback(handle, on_progress, &log));
    CHECK(miopenFindConvolutionForwardAlgorithm(handle, x_desc, x, w_desc, w, conv, y_desc, y, 4,
                                                &returned, perf, ws, ws_size, false));
    REQUIRE(returned >= 1 && returned <= 4);
    /* One call per timed solver: at least one per returned algorithm, the last one total. */
    REQUIRE(log.bad == 0 && log.calls >= returned && log.calls == log.total && log.last_step == log.total);
    /* Removed: the next Find calls nothing. */
    CHECK(confluxSetFindProgressCallback(handle, NULL, NULL));
    log.calls = 0;
    CHECK(miopenFindConvolutionForwardAlgorithm(handle, x_desc, x, w_desc, w, conv, y_desc, y, 4,
                                                &returned, perf, ws, ws_size, false));
    REQUIRE(log.calls == 0);
    for(i = 0; i < returned; i++) {
        REQUIRE(perf[i].time >= 0.0f && perf[i].memory <= ws_size);
        REQUIRE(i == 0 || perf[i].time >= perf[i - 1].time);
    }
    EXPECT_CLOSE(y, ref, y_count(g), 0.0);

    /* Forward with the best algorithm; then y = 2 * conv + 1 * y. */
    memset(y, 0, sizeof(float) * y_count(g));
    CHECK(miopenConvolutionForward(handle, &one, x_desc, x, w_desc, w, conv, perf[0].fwd_algo, &zero,
                                   y_desc, y, ws, ws_size));
    EXPECT_CLOSE(y, ref, y_count(g), 0.0);
    CHECK(miopenConvolutionForward(handle, &two, x_desc, x, w_desc, w, conv, perf[0].fwd_algo, &one,
                                   y_desc, y, ws, ws_size));
    for(j = 0; j < y_count(g); j++) want[j] = 3.0f * ref[j];
    EXPECT_CLOSE(y, want, y_count(g), 0.0);
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenConvolutionForward(handle, &one, x_desc, x, w_desc, w, conv,
                                           (miopenConvFwdAlgorithm_t)4, &zero, y_desc, y, ws, ws_size));

    /* Bias: y += b, then db = sum over n, h, w of y. */
    CHECK(miopenCreateTensorDescriptor(&b_desc));
    CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, g.k, 1, 1));
    memcpy(y, ref, sizeof(float) * y_count(g));
    CHECK(miopenConvolutionForwardBias(handle, &one, b_desc, b, &zero, y_desc, y));
    for(j = 0; j < y_count(g); j++) want[j] = ref[j] + b[(j / per) % (size_t)g.k];
    EXPECT_CLOSE(y, want, y_count(g), 0.0);
    CHECK(miopenConvolutionBackwardBias(handle, &one, y_desc, y, &zero, b_desc, db));
    memset(dbw, 0, sizeof dbw);
    for(j = 0; j < y_count(g); j++) dbw[(j / per) % (size_t)g.k] += want[j];
    EXPECT_CLOSE(db, dbw, 4, 0.0);

    /* One call: y = relu(2 * conv + 1 * z + b). */
    CHECK(miopenCreateActivationDescriptor(&relu));
    CHECK(miopenSetActivationDescriptor(relu, miopenActivationRELU, 0, 0, 0));
    CHECK(miopenConvolutionBiasActivationForward(handle, &two, x_desc, x, w_desc, w, conv,
                                                 miopenConvolutionFwdAlgoDirect, NULL, 0, &one, y_desc,
                                                 z, b_desc, b, relu, y_desc, y));
    for(j = 0; j < y_count(g); j++) {
        float v = 2.0f * ref[j] + z[j] + b[(j / per) % (size_t)g.k];
        want[j] = v > 0 ? v : 0.0f;
    }
    EXPECT_CLOSE(y, want, y_count(g), 0.0);

    CHECK(miopenDestroyActivationDescriptor(relu));
    CHECK(miopenDestroyTensorDescriptor(b_desc));
    CHECK(miopenDestroyConvolutionDescriptor(conv));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroy(handle));
    free(ws); free(x); free(w); free(y); free(want); free(ref); free(z);
    printf("conv_find_forward: ok\n");
    return 0;
}
