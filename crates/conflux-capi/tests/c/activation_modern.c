/* conflux's activation modes of modern networks (CONFLUX_ACTIVATION_*, values 100-105)
 * through miopen.h: the descriptor round trip, miopenActivationForward / Backward and a
 * one-op fusion plan, against the header's formulas evaluated here in double. */
#include "common.h"

#define CNT 40

/* The formulas as miopen.h states them (textbook form, not conflux's arrangement). */
static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ramp(double x) { return fmin(fmax(x + 3.0, 0.0), 6.0); }
static double gelu_tanh_u(double x) { return 0.7978845608028654 * (x + 0.044715 * x * x * x); }

static double forward(int m, double x)
{
    switch(m) {
    case 100: return x * sig(x);
    case 101: return x * ramp(x) / 6.0;
    case 102: return ramp(x) / 6.0;
    case 103: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case 104: return 0.5 * x * (1.0 + tanh(gelu_tanh_u(x)));
    default: return x * tanh(log1p(exp(x)));
    }
}

/* Derivatives (PyTorch's values at the hard kinks, which the data below avoids anyway). */
static double deriv(int m, double x)
{
    double s, t, u;
    switch(m) {
    case 100: s = sig(x); return s * (1.0 + x * (1.0 - s));
    case 101: return x < -3.0 ? 0.0 : (x <= 3.0 ? x / 3.0 + 0.5 : 1.0);
    case 102: return (x > -3.0 && x < 3.0) ? 1.0 / 6.0 : 0.0;
    case 103: return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) * 0.3989422804014327;
    case 104:
        t = tanh(gelu_tanh_u(x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
    default:
        t = tanh(log1p(exp(x)));
        u = sig(x);
        return t + x * (1.0 - t * t) * u;
    }
}

int main(void)
{
    const miopenActivationMode_t modes[6] = {CONFLUX_ACTIVATION_SILU, CONFLUX_ACTIVATION_HARDSWISH,
                                             CONFLUX_ACTIVATION_HARDSIGMOID, CONFLUX_ACTIVATION_GELU,
                                             CONFLUX_ACTIVATION_GELU_TANH, CONFLUX_ACTIVATION_MISH};
    miopenHandle_t handle;
    miopenTensorDescriptor_t desc;
    miopenActivationDescriptor_t act;
    miopenFusionPlanDescriptor_t plan;
    miopenFusionOpDescriptor_t op;
    miopenOperatorArgs_t args;
    miopenActivationMode_t got_mode;
    float x[CNT], y[CNT], yf[CNT], dy[CNT], dx[CNT], want[CNT];
    float one = 1.0f, zero = 0.0f;
    double a, b, g;
    int i, k;

    /* -7.7 .. 7.9 in steps of 0.4: both tails, no point on a kink (±3). */
    for(i = 0; i < CNT; i++) {
        x[i] = -7.7f + 0.4f * (float)i;
        dy[i] = (float)((i % 5) - 2) * 0.5f + 0.25f;
    }
    CHECK(miopenCreate(&handle));
    CHECK(miopenCreateTensorDescriptor(&desc));
    CHECK(miopenSet4dTensorDescriptor(desc, miopenFloat, 2, 4, 1, 5));
    CHECK(miopenCreateActivationDescriptor(&act));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetActivationDescriptor(act, (miopenActivationMode_t)106, 0, 0, 0));
    for(k = 0; k < 6; k++) {
        int m = (int)modes[k];
        REQUIRE(m == 100 + k);
        /* The parameters are ignored: any values give the same results. */
        CHECK(miopenSetActivationDescriptor(act, modes[k], 2.5, -1.0, 7.0));
        CHECK(miopenGetActivationDescriptor(act, &got_mode, &a, &b, &g));
        REQUIRE(got_mode == modes[k] && a == 2.5 && b == -1.0 && g == 7.0);

        CHECK(miopenActivationForward(handle, act, &one, desc, x, &zero, desc, y));
        for(i = 0; i < CNT; i++) want[i] = (float)forward(m, x[i]);
        EXPECT_CLOSE(y, want, CNT, 2e-6);

        CHECK(miopenActivationBackward(handle, act, &one, desc, y, desc, dy, desc, x, &zero, desc, dx));
        for(i = 0; i < CNT; i++) want[i] = (float)(dy[i] * deriv(m, x[i]));
        EXPECT_CLOSE(dx, want, CNT, 2e-6);

        /* The same mode as a fusion op. */
        CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, desc));
        CHECK(miopenCreateOpActivationForward(plan, &op, modes[k]));
        CHECK(miopenCompileFusionPlan(handle, plan));
        CHECK(miopenCreateOperatorArgs(&args));
        CHECK(miopenSetOpArgsActivForward(args, op, NULL, NULL, 0.0, 0.0, 0.0));
        CHECK(miopenExecuteFusionPlan(handle, plan, desc, x, desc, yf, args));
        EXPECT_CLOSE(yf, y, CNT, 0.0);
        CHECK(miopenDestroyOperatorArgs(args));
        CHECK(miopenDestroyFusionPlan(plan));
    }
    CHECK(miopenDestroyActivationDescriptor(act));
    CHECK(miopenDestroyTensorDescriptor(desc));
    CHECK(miopenDestroy(handle));
    printf("activation_modern: ok\n");
    return 0;
}
