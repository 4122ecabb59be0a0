/* A prologue plan (per-channel ops before the convolution): bias -> ReLU -> 3x3 conv with
 * padding 1 -> ReLU, compiled once and executed with small integers (exact); the padding the
 * convolution reads is zeros of the transformed tensor. Also: batch-norm training before a
 * convolution is refused at compile (UnsupportedOp). */
#include "common.h"

int main(void)
{
    conv_geom g = geom(2, 3, 6, 7, 4, 3, 3, 1, 1, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc, b_desc;
    miopenConvolutionDescriptor_t conv_desc;
    miopenFusionPlanDescriptor_t plan, bad;
    miopenFusionOpDescriptor_t bias_op, relu_op, conv_op, relu2_op, op;
    miopenOperatorArgs_t args;
    float alpha = 1.0f, beta = 0.0f;
    size_t i, plane = (size_t)g.h * g.w;
    float *x = alloc_floats(x_count(g)), *t = alloc_floats(x_count(g)), *wt = alloc_floats(w_count(g));
    float *b = alloc_floats(g.c), *y = alloc_floats(y_count(g)), *want = alloc_floats(y_count(g));

    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv_desc);
    CHECK(miopenCreateTensorDescriptor(&b_desc));
    CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, g.c, 1, 1));

    CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOpBiasForward(plan, &bias_op, b_desc));
    CHECK(miopenCreateOpActivationForward(plan, &relu_op, miopenActivationRELU));
    CHECK(miopenCreateOpConvForward(plan, &conv_op, conv_desc, w_desc));
    CHECK(miopenCreateOpActivationForward(plan, &relu2_op, miopenActivationRELU));
    CHECK(miopenCompileFusionPlan(handle, plan));

    fill_ints(x, x_count(g), 3u, 3);
    fill_ints(wt, w_count(g), 5u, 2);
    for(i = 0; i < (size_t)g.c; i++)
        b[i] = (float)(i % 2 ? 2 : -1);
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenSetOpArgsBiasForward(args, bias_op, &alpha, &beta, b));
    CHECK(miopenSetOpArgsActivForward(args, relu_op, &alpha, &beta, 0.0, 0.0, 0.0));
    CHECK(miopenSetOpArgsConvForward(args, conv_op, &alpha, &beta, wt));
    CHECK(miopenSetOpArgsActivForward(args, relu2_op, &alpha, &beta, 0.0, 0.0, 0.0));
    CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, y_desc, y, args));

    for(i = 0; i < x_count(g); i++) {
        float v = x[i] + b[(i / plane) % (size_t)g.c];
        t[i] = v > 0.0f ? v : 0.0f;
    }
    ref_conv_fwd(g, t, wt, want);
    for(i = 0; i < y_count(g); i++)
        want[i] = want[i] > 0.0f ? want[i] : 0.0f;
    EXPECT_CLOSE(y, want, y_count(g), 0.0);

    CHECK(miopenCreateFusionPlan(&bad, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOpBatchNormForward(bad, &op, miopenBNSpatial, 0));
    CHECK(miopenCreateOpConvForward(bad, &op, conv_desc, w_desc));
    EXPECT_STATUS(miopenStatusUnsupportedOp, miopenCompileFusionPlan(handle, bad));
    CHECK(miopenDestroyFusionPlan(bad));

    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(plan));
    CHECK(miopenDestroyConvolutionDescriptor(conv_desc));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroyTensorDescriptor(b_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(t); free(wt); free(b); free(y); free(want);
    printf("fusion_prologue: ok\n");
    return 0;
}
