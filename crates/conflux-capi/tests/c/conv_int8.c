/* int8 and fp8 forward convolutions through miopen.h: Find + Forward with exact int32 output,
 * immediate mode with a requantized int8 output (round half to even, saturation), a fusion
 * plan conv + bias + ReLU on int8 x (float output, then int8 through
 * confluxFusionPlanSetOutputType), an e4m3 convolution with the FP8 rounding
 * attribute, and the refusals (int8 backward-data, mismatched types, cast types). */
#define MIOPEN_BETA_API
#include "common.h"

#define N 1
#define C 6
#define H 7
#define W 7
#define K 5
#define R 3
#define OH 7
#define OW 7

static long long sums[N * K * OH * OW];

/* Exact reference: 3x3, pad 1, stride 1, NCHW. */
static void ref_sums(const signed char* x, const signed char* w)
{
    int k, oh, ow, c, r, s;
    for(k = 0; k < K; k++)
        for(oh = 0; oh < OH; oh++)
            for(ow = 0; ow < OW; ow++) {
                long long acc = 0;
                for(c = 0; c < C; c++)
                    for(r = 0; r < R; r++)
                        for(s = 0; s < R; s++) {
                            int ih = oh - 1 + r, iw = ow - 1 + s;
                            if(ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            acc += (long long)x[(c * H + ih) * W + iw] * w[((k * C + c) * R + r) * R + s];
                        }
                sums[(k * OH + oh) * OW + ow] = acc;
            }
}

/* Round half to even, then saturate to int8. */
static int requant(double v)
{
    double f = floor(v), d = v - f;
    double r = d > 0.5 ? f + 1 : d < 0.5 ? f : (fmod(f, 2.0) == 0 ? f : f + 1);
    return r > 127 ? 127 : r < -128 ? -128 : (int)r;
}

/* e4m3fn code -> value (finite codes only). */
static float e4m3(unsigned char code)
{
    int e = (code >> 3) & 15, m = code & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
    return (code & 0x80) ? -v : v;
}

int main(void)
{
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc, y8_desc, yf_desc, h_desc, b_desc;
    miopenConvolutionDescriptor_t conv;
    signed char x[N * C * H * W], w[K * C * R * R], y8[N * K * OH * OW];
    int y32[N * K * OH * OW], n, c, h, wd, returned = 0;
    float yf[N * K * OH * OW], bias[K], alpha = 1.0f, beta = 0.0f, small = 1.0f / 1024.0f;
    miopenConvAlgoPerf_t perf;
    miopenConvSolution_t sol[16];
    size_t count = 0, i, ws = 0, nsol = 0;
    unsigned s = 12345u;
    uint64_t id = 0;

    for(i = 0; i < sizeof x; i++) { s = s * 1103515245u + 12345u; x[i] = (signed char)(s >> 16); }
    for(i = 0; i < sizeof w; i++) { s = s * 1103515245u + 12345u; w[i] = (signed char)(s >> 16); }
    x[0] = -128; w[0] = -128;
    ref_sums(x, w);
    CHECK(miopenCreate(&handle));
    CHECK(miopenCreateTensorDescriptor(&x_desc));
    CHECK(miopenCreateTensorDescriptor(&w_desc));
    CHECK(miopenCreateTensorDescriptor(&y_desc));
    CHECK(miopenCreateTensorDescriptor(&y8_desc));
    CHECK(miopenCreateTensorDescriptor(&yf_desc));
    CHECK(miopenCreateTensorDescriptor(&h_desc));
    CHECK(miopenCreateTensorDescriptor(&b_desc));
    CHECK(miopenSet4dTensorDescriptor(x_desc, miopenInt8, N, C, H, W));
    CHECK(miopenSet4dTensorDescriptor(w_desc, miopenInt8, K, C, R, R));
    CHECK(miopenSet4dTensorDescriptor(y_desc, miopenInt32, N, K, OH, OW));
    CHECK(miopenSet4dTensorDescriptor(y8_desc, miopenInt8, N, K, OH, OW));
    CHECK(miopenSet4dTensorDescriptor(yf_desc, miopenFloat, N, K, OH, OW));
    CHECK(miopenSet4dTensorDescriptor(h_desc, miopenHalf, K, C, R, R));
    CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, K, 1, 1));
    CHECK(miopenCreateConvolutionDescriptor(&conv));
    CHECK(miopenInitConvolutionDescriptor(conv, miopenConvolution, 1, 1, 1, 1, 1, 1));
    CHECK(miopenGetConvolutionForwardOutputDim(conv, x_desc, w_desc, &n, &c, &h, &wd));
    REQUIRE(n == N && c == K && h == OH && wd == OW);

    /* Find, then Forward with the algorithm found: exact int32. */
    CHECK(miopenFindConvolutionForwardAlgorithm(handle, x_desc, x, w_desc, w, conv, y_desc, y32, 1,
                                                &returned, &perf, NULL, 0, false));
    REQUIRE(returned == 1);
    memset(y32, 0x5a, sizeof y32);
    CHECK(miopenConvolutionForward(handle, &alpha, x_desc, x, w_desc, w, conv, perf.fwd_algo, &beta,
                                   y_desc, y32, NULL, 0));
    for(i = 0; i < sizeof y32 / sizeof y32[0]; i++) REQUIRE((long long)y32[i] == sums[i]);

    /* Immediate mode, int8 output requantized from alpha * sum. */
    CHECK(miopenConvolutionForwardGetSolutionCount(handle, w_desc, x_desc, conv, y8_desc, &count));
    REQUIRE(count >= 1);
    CHECK(miopenConvolutionForwardGetSolution(handle, w_desc, x_desc, conv, y8_desc, 16, &nsol, sol));
    for(i = 0; i < nsol; i++) if(sol[i].solution_id == 17) id = 17;
    REQUIRE(id == 17);
    CHECK(miopenConvolutionForwardGetSolutionWorkspaceSize(handle, w_desc, x_desc, conv, y8_desc, id, &ws));
    REQUIRE(ws == 0);
    CHECK(miopenConvolutionForward(handle, &small, x_desc, x, w_desc, w, conv, perf.fwd_algo, &beta,
                                   y8_desc, y8, NULL, 0));
    for(i = 0; i < sizeof y8; i++) REQUIRE(y8[i] == requant((double)sums[i] / 1024.0));
    CHECK(miopenConvolutionForwardImmediate(handle, w_desc, w, x_desc, x, conv, y8_desc, y8, NULL, 0, id));
    for(i = 0; i < sizeof y8; i++) REQUIRE(y8[i] == requant((double)sums[i]));

    /* Fusion plan: conv + bias + ReLU on int8 x; the plan's output is float. */
    {
        miopenFusionPlanDescriptor_t plan;
        miopenOperatorArgs_t args;
        miopenFusionOpDescriptor_t conv_op, bias_op, act_op;
        for(i = 0; i < K; i++) bias[i] = (float)i * 1000.0f - 2000.5f;
        CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
        CHECK(miopenCreateOperatorArgs(&args));
        CHECK(miopenCreateOpConvForward(plan, &conv_op, conv, w_desc));
        CHECK(miopenCreateOpBiasForward(plan, &bias_op, b_desc));
        CHECK(miopenCreateOpActivationForward(plan, &act_op, miopenActivationRELU));
        CHECK(miopenCompileFusionPlan(handle, plan));
        CHECK(miopenSetOpArgsConvForward(args, conv_op, &alpha, &beta, w));
        CHECK(miopenSetOpArgsBiasForward(args, bias_op, &alpha, &beta, bias));
        CHECK(miopenSetOpArgsActivForward(args, act_op, &alpha, &beta, 0.0, 0.0, 0.0));
        CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, yf_desc, yf, args));
        for(i = 0; i < sizeof yf / sizeof yf[0]; i++) {
            double want = (double)sums[i] + bias[i / (OH * OW)];
            want = want > 0 ? want : 0;
            REQUIRE(fabs(yf[i] - want) <= 1e-6 * (1 + fabs(want)));
        }
        /* The same plan with an int8 output (conflux extension): requantized after the
         * epilogue, ops added after the call keep the type, a float y is then refused. */
        CHECK(miopenDestroyOperatorArgs(args));
        CHECK(miopenDestroyFusionPlan(plan));
        CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
        CHECK(miopenCreateOperatorArgs(&args));
        EXPECT_STATUS(miopenStatusBadParm, confluxFusionPlanSetOutputType(plan, miopenInt8));
        CHECK(miopenCreateOpConvForward(plan, &conv_op, conv, w_desc));
        CHECK(miopenCreateOpBiasForward(plan, &bias_op, b_desc));
        EXPECT_STATUS(miopenStatusBadParm, confluxFusionPlanSetOutputType(plan, miopenFloat8));
        CHECK(confluxFusionPlanSetOutputType(plan, miopenInt8));
        CHECK(miopenCreateOpActivationForward(plan, &act_op, miopenActivationRELU));
        CHECK(miopenCompileFusionPlan(handle, plan));
        CHECK(miopenSetOpArgsConvForward(args, conv_op, &small, &beta, w));
        CHECK(miopenSetOpArgsBiasForward(args, bias_op, &alpha, &beta, bias));
        CHECK(miopenSetOpArgsActivForward(args, act_op, &alpha, &beta, 0.0, 0.0, 0.0));
        EXPECT_STATUS(miopenStatusBadParm, miopenExecuteFusionPlan(handle, plan, x_desc, x, yf_desc, yf, args));
        CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, y8_desc, y8, args));
        for(i = 0; i < sizeof y8; i++) {
            double want = (double)sums[i] / 1024.0 + bias[i / (OH * OW)];
            REQUIRE(y8[i] == requant(want > 0 ? want : 0));
        }
        CHECK(miopenDestroyOperatorArgs(args));
        CHECK(miopenDestroyFusionPlan(plan));
    }

    /* fp8: e4m3 codes of x and w (reusing the bytes, clearing the NaN codes), float output. */
    {
        unsigned char fx[sizeof x], fw[sizeof w];
        miopenTensorDescriptor_t f8x, f8w;
        int k, oh, ow, cc, r, t;
        for(i = 0; i < sizeof x; i++) fx[i] = (unsigned char)x[i] & 0xbf;
        for(i = 0; i < sizeof w; i++) fw[i] = (unsigned char)w[i] & 0xbf;
        CHECK(miopenCreateTensorDescriptor(&f8x));
        CHECK(miopenCreateTensorDescriptor(&f8w));
        CHECK(miopenSet4dTensorDescriptor(f8x, miopenFloat8, N, C, H, W));
        CHECK(miopenSet4dTensorDescriptor(f8w, miopenFloat8, K, C, R, R));
        EXPECT_STATUS(miopenStatusBadParm, miopenSetConvolutionAttribute(conv, MIOPEN_CONVOLUTION_ATTRIB_FP8_ROUNDING_MODE, 2));
        CHECK(miopenSetConvolutionAttribute(conv, MIOPEN_CONVOLUTION_ATTRIB_FP8_ROUNDING_MODE, miopenF8RoundingModeStandard));
        CHECK(miopenConvolutionForward(handle, &alpha, f8x, fx, f8w, fw, conv, perf.fwd_algo, &beta, yf_desc, yf, NULL, 0));
        for(k = 0; k < K; k++)
            for(oh = 0; oh < OH; oh++)
                for(ow = 0; ow < OW; ow++) {
                    double acc = 0;
                    for(cc = 0; cc < C; cc++)
                        for(r = 0; r < R; r++)
                            for(t = 0; t < R; t++) {
                                int ih = oh - 1 + r, iw = ow - 1 + t;
                                if(ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += (double)e4m3(fx[(cc * H + ih) * W + iw]) * e4m3(fw[((k * C + cc) * R + r) * R + t]);
                            }
                    REQUIRE(fabs(yf[(k * OH + oh) * OW + ow] - acc) <= 1e-5 * (1 + fabs(acc)));
                }
        /* A cast type is refused rather than ignored. */
        EXPECT_STATUS(miopenStatusNotImplemented, miopenSetTensorCastType(yf_desc, miopenFloat8));
        CHECK(miopenDestroyTensorDescriptor(f8x));
        CHECK(miopenDestroyTensorDescriptor(f8w));
    }

    /* Refusals: int8 backward-data, int8 x with half w. Nothing is written. */
    memset(y8, 7, sizeof y8);
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenConvolutionBackwardData(handle, &alpha, y8_desc, y8, w_desc, w, conv,
                                                miopenConvolutionBwdDataAlgoGEMM, &beta, x_desc, x, NULL, 0));
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenConvolutionForward(handle, &alpha, x_desc, x, h_desc, w, conv, perf.fwd_algo, &beta,
                                           y8_desc, y8, NULL, 0));
    for(i = 0; i < sizeof y8; i++) REQUIRE(y8[i] == 7);

    CHECK(miopenDestroyConvolutionDescriptor(conv));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroyTensorDescriptor(y8_desc));
    CHECK(miopenDestroyTensorDescriptor(yf_desc));
    CHECK(miopenDestroyTensorDescriptor(h_desc));
    CHECK(miopenDestroyTensorDescriptor(b_desc));
    CHECK(miopenDestroy(handle));
    printf("conv_int8: ok\n");
    return 0;
}
