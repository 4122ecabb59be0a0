/* The Fusion API example flow (MIOpen's "Fusion API: Getting Started"): conv + bias + ReLU
 * fused in one plan, compiled once, executed twice with new arguments; output checked
 * against a reference computed here (small integers: exact). Also checks that the plan's
 * op handles and GetOp agree, and that the seeds' call order works unchanged. */
#include "common.h"

static void reference(conv_geom g, const float* x, const float* w, const float* b, float* y)
{
    size_t i, per = (size_t)g.oh * g.ow;
    ref_conv_fwd(g, x, w, y);
    for(i = 0; i < y_count(g); i++) {
        float v = y[i] + b[(i / per) % (size_t)g.k];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

int main(void)
{
    conv_geom g = geom(2, 3, 6, 7, 4, 3, 3, 1, 1, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc, b_desc;
    miopenConvolutionDescriptor_t conv_desc;
    miopenFusionPlanDescriptor_t plan;
    miopenFusionOpDescriptor_t conv_op, bias_op, activ_op, got_op;
    miopenOperatorArgs_t args;
    float alpha = 1.0f, beta = 0.0f;
    int n, c, h, w, round;
    float *x = alloc_floats(x_count(g)), *wt = alloc_floats(w_count(g)), *b = alloc_floats(g.k);
    float *y = alloc_floats(y_count(g)), *want = alloc_floats(y_count(g));

    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv_desc);
    CHECK(miopenCreateTensorDescriptor(&b_desc));
    CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, g.k, 1, 1));

    /* The output shape comes from the library, as in the example. */
    CHECK(miopenGetConvolutionForwardOutputDim(conv_desc, x_desc, w_desc, &n, &c, &h, &w));
    REQUIRE(n == g.n && c == g.k && h == g.oh && w == g.ow);

    CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenCreateOpConvForward(plan, &conv_op, conv_desc, w_desc));
    CHECK(miopenCreateOpBiasForward(plan, &bias_op, b_desc));
    CHECK(miopenCreateOpActivationForward(plan, &activ_op, miopenActivationRELU));
    CHECK(miopenFusionPlanGetOp(plan, 1, &got_op));
    REQUIRE(got_op == bias_op);
    CHECK(miopenCompileFusionPlan(handle, plan));

    /* Compile once, execute with new weights, bias and data each round. */
    for(round = 0; round < 2; round++) {
        fill_ints(x, x_count(g), 11u + round, 3);
        fill_ints(wt, w_count(g), 23u + round, 2);
        fill_ints(b, g.k, 37u + round, 4);
        CHECK(miopenSetOpArgsConvForward(args, conv_op, &alpha, &beta, wt));
        CHECK(miopenSetOpArgsActivForward(args, activ_op, &alpha, &beta, 0.0, 0.0, 0.0));
        CHECK(miopenSetOpArgsBiasForward(args, bias_op, &alpha, &beta, b));
        CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, y_desc, y, args));
        reference(g, x, wt, b, want);
        EXPECT_CLOSE(y, want, y_count(g), 0.0);
    }

    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(plan));
    CHECK(miopenDestroyConvolutionDescriptor(conv_desc));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroyTensorDescriptor(b_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(wt); free(b); free(y); free(want);
    printf("fusion_cba: ok\n");
    return 0;
}
