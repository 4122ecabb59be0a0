/* Transpose convolution: output shape (with output padding), forward = backward data of
 * the normal convolution, backward data = normal forward, backward weights with x and dy
 * swapped — through Find and Forward / BackwardData / BackwardWeights. */
#include "common.h"

int main(void)
{
    /* The normal convolution N: x_n (2x4x5x5) -> y_n (2x3x3x3), w 3x4x2x2, stride 2, pad 1.
     * The transpose convolution T maps y_n-shaped input to x_n-shaped output with the same
     * w read as [C_in = 3, C_out = 4, 2, 2]. */
    conv_geom g = geom(2, 4, 5, 5, 3, 2, 2, 1, 2, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t in_desc, w_desc, out_desc;
    miopenConvolutionDescriptor_t conv;
    miopenConvAlgoPerf_t perf[4];
    int returned = 0, n, c, h, w, adj[2] = {1, 1};
    float one = 1.0f, zero = 0.0f;
    float *tin = alloc_floats(y_count(g)), *wt = alloc_floats(w_count(g));
    float *tout = alloc_floats(x_count(g)), *want = alloc_floats(x_count(g));
    float *dtin = alloc_floats(y_count(g)), *want_dtin = alloc_floats(y_count(g));
    float *dw = alloc_floats(w_count(g)), *want_dw = alloc_floats(w_count(g));

    REQUIRE(g.oh == 3 && g.ow == 3);
    fill_ints(tin, y_count(g), 51u, 3);
    fill_ints(wt, w_count(g), 52u, 2);
    fill_ints(tout, x_count(g), 53u, 2); /* used as the output gradient below */

    CHECK(miopenCreate(&handle));
    CHECK(miopenCreateTensorDescriptor(&in_desc));
    CHECK(miopenCreateTensorDescriptor(&w_desc));
    CHECK(miopenCreateTensorDescriptor(&out_desc));
    CHECK(miopenCreateConvolutionDescriptor(&conv));
    CHECK(miopenSet4dTensorDescriptor(in_desc, miopenFloat, g.n, g.k, g.oh, g.ow));
    CHECK(miopenSet4dTensorDescriptor(w_desc, miopenFloat, g.k, g.c, g.r, g.s));
    CHECK(miopenInitConvolutionNdDescriptor(conv, 2, (int[]){1, 1}, (int[]){2, 2}, (int[]){1, 1}, miopenTranspose));
    /* Output padding must come after Init (Init resets it). 2 (3 - 1) + 2 - 2 + 0 = 4; +1 = 5. */
    CHECK(miopenSetTransposeConvNdOutputPadding(conv, 2, adj));
    CHECK(miopenGetConvolutionForwardOutputDim(conv, in_desc, w_desc, &n, &c, &h, &w));
    REQUIRE(n == g.n && c == g.c && h == g.h && w == g.w);
    CHECK(miopenSet4dTensorDescriptor(out_desc, miopenFloat, n, c, h, w));
    {
        int mode, pad_h, pad_w, sh, sw, dh, dw_;
        CHECK(miopenGetConvolutionDescriptor(conv, (miopenConvolutionMode_t*)&mode, &pad_h, &pad_w, &sh, &sw, &dh, &dw_));
        REQUIRE(mode == miopenTranspose && pad_h == 1 && sh == 2 && dh == 1);
    }

    /* Forward of T = backward data of N. */
    ref_conv_bwd_data(g, tin, wt, want);
    {
        float* y = alloc_floats(x_count(g));
        CHECK(miopenFindConvolutionForwardAlgorithm(handle, in_desc, tin, w_desc, wt, conv, out_desc, y, 4,
                                                    &returned, perf, NULL, 0, false));
        REQUIRE(returned >= 1);
        EXPECT_CLOSE(y, want, x_count(g), 0.0);
        memset(y, 0, sizeof(float) * x_count(g));
        CHECK(miopenConvolutionForward(handle, &one, in_desc, tin, w_desc, wt, conv, perf[0].fwd_algo, &zero,
                                       out_desc, y, NULL, 0));
        EXPECT_CLOSE(y, want, x_count(g), 0.0);
        free(y);
    }

    /* Backward data of T (gradient tout of the output) = forward of N. */
    ref_conv_fwd(g, tout, wt, want_dtin);
    CHECK(miopenConvolutionBackwardData(handle, &one, out_desc, tout, w_desc, wt, conv,
                                        miopenConvolutionBwdDataAlgoDirect, &zero, in_desc, dtin, NULL, 0));
    EXPECT_CLOSE(dtin, want_dtin, y_count(g), 0.0);

    /* Backward weights of T: N's weight gradient with x = output gradient, dy = T's input. */
    ref_conv_bwd_weights(g, tout, tin, want_dw);
    CHECK(miopenConvolutionBackwardWeights(handle, &one, out_desc, tout, in_desc, tin, conv,
                                           miopenConvolutionBwdWeightsAlgoDirect, &zero, w_desc, dw, NULL, 0));
    EXPECT_CLOSE(dw, want_dw, w_count(g), 0.0);

    CHECK(miopenDestroyConvolutionDescriptor(conv));
    CHECK(miopenDestroyTensorDescriptor(in_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(out_desc));
    CHECK(miopenDestroy(handle));
    free(tin); free(wt); free(tout); free(want); free(dtin); free(want_dtin); free(dw); free(want_dw);
    printf("conv_transpose: ok\n");
    return 0;
}
