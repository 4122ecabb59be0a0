/* Pooling and softmax the way a training framework calls them: output size from the
 * descriptor, workspace query, forward with do_backward, backward from the saved indices;
 * softmax forward and backward (plain and _V2); refusals with their statuses; the LRN
 * descriptor round trip and LRN's NotImplemented. Small-integer data keeps max pooling and
 * its backward exact; the checks are plain loops written here. */
#include "common.h"

#define N 2
#define C 3
#define H 9
#define W 9

static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

int main(void)
{
    miopenHandle_t handle;
    miopenPoolingDescriptor_t pool;
    miopenTensorDescriptor_t xd, yd, sd;
    int n, c, h, w, oh, ow, i, dims[4];
    int k = 3, pad = 1, stride = 2;
    size_t ws_size = 0, ws_v1 = 0, ny;
    float *x, *y, *dy, *dx, *want, *sx, *sy, *sdy, *sdx;
    unsigned short* idx;
    miopenPoolingMode_t mode;
    miopenIndexType_t itype;
    miopenPoolingWorkspaceIndexMode_t imode;
    int wh, ww, ph, pw, sh, sw;
    float alpha = 1.0f, beta = 0.0f;

    CHECK(miopenCreate(&handle));
    CHECK(miopenCreatePoolingDescriptor(&pool));
    CHECK(miopenSet2dPoolingDescriptor(pool, miopenPoolingMax, k, k, pad, pad, stride, stride));
    CHECK(miopenGet2dPoolingDescriptor(pool, &mode, &wh, &ww, &ph, &pw, &sh, &sw));
    REQUIRE(mode == miopenPoolingMax && wh == 3 && ww == 3 && ph == 1 && pw == 1 && sh == 2 && sw == 2);
    CHECK(miopenGetPoolingIndexType(pool, &itype));
    CHECK(miopenGetPoolingWorkSpaceIndexMode(pool, &imode));
    REQUIRE(itype == miopenIndexUint8 && imode == miopenPoolingWorkspaceIndexMask);
    CHECK(miopenSetPoolingIndexType(pool, miopenIndexUint16));
    CHECK(miopenGetPoolingIndexType(pool, &itype));
    REQUIRE(itype == miopenIndexUint16);

    CHECK(miopenCreateTensorDescriptor(&xd));
    CHECK(miopenCreateTensorDescriptor(&yd));
    CHECK(miopenSet4dTensorDescriptor(xd, miopenFloat, N, C, H, W));
    CHECK(miopenGetPoolingForwardOutputDim(pool, xd, &n, &c, &oh, &ow));
    REQUIRE(n == N && c == C && oh == 5 && ow == 5);
    CHECK(miopenGetPoolingNdForwardOutputDim(pool, xd, 4, dims));
    REQUIRE(dims[0] == N && dims[1] == C && dims[2] == 5 && dims[3] == 5);
    CHECK(miopenSet4dTensorDescriptor(yd, miopenFloat, n, c, oh, ow));
    ny = (size_t)N * C * oh * ow;
    CHECK(miopenPoolingGetWorkSpaceSize(yd, &ws_v1));
    CHECK(miopenPoolingGetWorkSpaceSizeV2(pool, yd, &ws_size));
    REQUIRE(ws_v1 == ny && ws_size == ny * sizeof(unsigned short));

    x = alloc_floats((size_t)N * C * H * W);
    y = alloc_floats(ny);
    dy = alloc_floats(ny);
    dx = alloc_floats((size_t)N * C * H * W);
    want = alloc_floats((size_t)N * C * H * W);
    idx = (unsigned short*)malloc(ws_size);
    REQUIRE(idx != NULL);
    fill_ints(x, (size_t)N * C * H * W, 11, 6);
    fill_ints(dy, ny, 12, 4);

    /* Too little workspace: refused, y untouched. */
    for(i = 0; i < (int)ny; i++)
        y[i] = 77.0f;
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenPoolingForward(handle, pool, &alpha, xd, x, &beta, yd, y, true, idx, ws_size - 1));
    REQUIRE(strstr(confluxGetLastErrorMessage(), "workspace") != NULL);
    for(i = 0; i < (int)ny; i++)
        REQUIRE(y[i] == 77.0f);

    CHECK(miopenPoolingForward(handle, pool, &alpha, xd, x, &beta, yd, y, true, idx, ws_size));
    /* Each output: the first maximum of its clipped window; its index inside the window. */
    for(n = 0; n < N; n++)
        for(c = 0; c < C; c++)
            for(h = 0; h < oh; h++)
                for(w = 0; w < ow; w++) {
                    size_t o = (((size_t)n * C + c) * oh + h) * ow + w;
                    int h0 = h * stride - pad, w0 = w * stride - pad, a, b, best_at = 0;
                    float best = -INFINITY;
                    for(a = imax(h0, 0); a < imin(h0 + k, H); a++)
                        for(b = imax(w0, 0); b < imin(w0 + k, W); b++) {
                            float v = x[(((size_t)n * C + c) * H + a) * W + b];
                            if(v > best) {
                                best = v;
                                best_at = (a - h0) * k + (b - w0);
                            }
                        }
                    REQUIRE(y[o] == best);
                    REQUIRE(idx[o] == best_at);
                }

    /* Backward: every dy goes to its window's maximum. */
    memset(want, 0, sizeof(float) * N * C * H * W);
    for(n = 0; n < N; n++)
        for(c = 0; c < C; c++)
            for(h = 0; h < oh; h++)
                for(w = 0; w < ow; w++) {
                    size_t o = (((size_t)n * C + c) * oh + h) * ow + w;
                    int a = h * stride - pad + idx[o] / k, b = w * stride - pad + idx[o] % k;
                    want[(((size_t)n * C + c) * H + a) * W + b] += dy[o];
                }
    for(i = 0; i < N * C * H * W; i++)
        dx[i] = NAN;
    CHECK(miopenPoolingBackward(handle, pool, &alpha, yd, y, yd, dy, xd, x, &beta, xd, dx, idx));
    EXPECT_CLOSE(dx, want, (size_t)N * C * H * W, 0.0);
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenPoolingBackward(handle, pool, &alpha, yd, y, yd, dy, xd, x, &beta, xd, dx, NULL));

    /* The same descriptor reset as an N-D average (padding excluded), no workspace needed. */
    {
        int win[2] = {2, 2}, pads[2] = {0, 0}, strides[2] = {2, 2}, got_w[2], got_n = 0;
        CHECK(miopenSetNdPoolingDescriptor(pool, miopenPoolingAverage, 2, win, pads, strides));
        CHECK(miopenGetNdPoolingDescriptor(pool, 2, &mode, &got_n, got_w, NULL, NULL));
        REQUIRE(mode == miopenPoolingAverage && got_n == 2 && got_w[0] == 2 && got_w[1] == 2);
        CHECK(miopenGetPoolingIndexType(pool, &itype));
        REQUIRE(itype == miopenIndexUint8); /* reset with the window, as MIOpen does */
        CHECK(miopenGetPoolingNdForwardOutputDim(pool, xd, 4, dims));
        REQUIRE(dims[2] == 4 && dims[3] == 4);
        CHECK(miopenSet4dTensorDescriptor(yd, miopenFloat, N, C, 4, 4));
        CHECK(miopenPoolingGetWorkSpaceSizeV2(pool, yd, &ws_size));
        REQUIRE(ws_size == 0);
        CHECK(miopenPoolingForward(handle, pool, &alpha, xd, x, &beta, yd, y, false, NULL, 0));
        /* First output of image 1, channel 2: the mean of four inputs (a quarter: exact). */
        {
            const float* p = x + ((size_t)1 * C + 2) * H * W;
            float m = (p[0] + p[1] + p[W] + p[W + 1]) / 4.0f;
            REQUIRE(y[((size_t)1 * C + 2) * 16] == m);
        }
    }
    EXPECT_STATUS(miopenStatusBadParm, miopenSet2dPoolingDescriptor(pool, miopenPoolingMax, 0, 2, 0, 0, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetPoolingIndexType(pool, (miopenIndexType_t)7));

    /* Softmax over 10 classes of a 4×10×1×1 batch: forward, then backward of the
     * cross-entropy-like gradient. */
    CHECK(miopenCreateTensorDescriptor(&sd));
    CHECK(miopenSet4dTensorDescriptor(sd, miopenFloat, 4, 10, 1, 1));
    sx = alloc_floats(40);
    sy = alloc_floats(40);
    sdy = alloc_floats(40);
    sdx = alloc_floats(40);
    fill_ints(sx, 40, 5, 3);
    fill_ints(sdy, 40, 6, 2);
    CHECK(miopenSoftmaxForward(handle, &alpha, sd, sx, &beta, sd, sy));
    for(n = 0; n < 4; n++) {
        double sum = 0.0, mx = -1e30, z = 0.0;
        for(i = 0; i < 10; i++)
            mx = sx[n * 10 + i] > mx ? sx[n * 10 + i] : mx;
        for(i = 0; i < 10; i++)
            z += exp(sx[n * 10 + i] - mx);
        for(i = 0; i < 10; i++) {
            REQUIRE(fabs(sy[n * 10 + i] - exp(sx[n * 10 + i] - mx) / z) < 1e-6);
            sum += sy[n * 10 + i];
        }
        REQUIRE(fabs(sum - 1.0) < 1e-5);
    }
    CHECK(miopenSoftmaxBackward(handle, &alpha, sd, sy, sd, sdy, &beta, sd, sdx));
    for(n = 0; n < 4; n++) {
        double dot = 0.0;
        for(i = 0; i < 10; i++)
            dot += sdy[n * 10 + i] * sy[n * 10 + i];
        for(i = 0; i < 10; i++)
            REQUIRE(fabs(sdx[n * 10 + i] - sy[n * 10 + i] * (sdy[n * 10 + i] - dot)) < 1e-5);
    }
    /* Log-softmax over each whole image, and its backward. */
    CHECK(miopenSoftmaxForward_V2(handle, &alpha, sd, sx, &beta, sd, sy, MIOPEN_SOFTMAX_LOG, MIOPEN_SOFTMAX_MODE_INSTANCE));
    for(n = 0; n < 4; n++) {
        double z = 0.0;
        for(i = 0; i < 10; i++)
            z += exp(sy[n * 10 + i]);
        REQUIRE(fabs(z - 1.0) < 1e-5);
    }
    CHECK(miopenSoftmaxBackward_V2(handle, &alpha, sd, sy, sd, sdy, &beta, sd, sdx, MIOPEN_SOFTMAX_LOG, MIOPEN_SOFTMAX_MODE_INSTANCE));
    for(n = 0; n < 4; n++) {
        double s = 0.0;
        for(i = 0; i < 10; i++)
            s += sdy[n * 10 + i];
        for(i = 0; i < 10; i++)
            REQUIRE(fabs(sdx[n * 10 + i] - (sdy[n * 10 + i] - exp(sy[n * 10 + i]) * s)) < 1e-5);
    }
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenSoftmaxForward_V2(handle, &alpha, sd, sx, &beta, sd, sy, (miopenSoftmaxAlgorithm_t)3, MIOPEN_SOFTMAX_MODE_CHANNEL));
    EXPECT_STATUS(miopenStatusBadParm, miopenSoftmaxForward(handle, &alpha, sd, sx, &beta, xd, sy));

    /* LRN: the descriptor round-trips; the computation is not implemented and says so. */
    {
        miopenLRNDescriptor_t lrn;
        miopenLRNMode_t lm;
        unsigned int ln;
        double la, lb, lk;
        size_t lws = 12345;
        CHECK(miopenCreateLRNDescriptor(&lrn));
        CHECK(miopenSetLRNDescriptor(lrn, miopenLRNCrossChannel, 5, 1e-4, 0.75, 2.0));
        CHECK(miopenGetLRNDescriptor(lrn, &lm, &ln, &la, &lb, &lk));
        REQUIRE(lm == miopenLRNCrossChannel && ln == 5 && la == 1e-4 && lb == 0.75 && lk == 2.0);
        EXPECT_STATUS(miopenStatusBadParm, miopenSetLRNDescriptor(lrn, miopenLRNCrossChannel, 4, 1e-4, 0.75, 2.0));
        EXPECT_STATUS(miopenStatusNotImplemented, miopenLRNGetWorkSpaceSize(sd, &lws));
        REQUIRE(lws == 12345);
        EXPECT_STATUS(miopenStatusNotImplemented,
                      miopenLRNForward(handle, lrn, &alpha, sd, sx, &beta, sd, sy, false, NULL));
        REQUIRE(strstr(confluxGetLastErrorMessage(), "miopenLRNForward") != NULL);
        EXPECT_STATUS(miopenStatusNotImplemented,
                      miopenLRNBackward(handle, lrn, &alpha, sd, sy, sd, sdy, sd, sx, &beta, sd, sdx, NULL));
        CHECK(miopenDestroyLRNDescriptor(lrn));
    }

    CHECK(miopenDestroyTensorDescriptor(sd));
    CHECK(miopenDestroyTensorDescriptor(xd));
    CHECK(miopenDestroyTensorDescriptor(yd));
    CHECK(miopenDestroyPoolingDescriptor(pool));
    CHECK(miopenDestroy(handle));
    free(x); free(y); free(dy); free(dx); free(want); free(idx);
    free(sx); free(sy); free(sdy); free(sdx);
    printf("pooling_softmax: ok\n");
    return 0;
}
