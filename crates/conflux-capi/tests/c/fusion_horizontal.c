/* Horizontal fusion (miopenHorizontalFusion): two branches over the same x, a 1x1 conv +
 * bias + ReLU and a 3x3 conv, their outputs concatenated along channels in one output
 * tensor; compiled once, executed with small integers (exact) and checked against reference
 * loops. Also: a branch whose output differs in size is refused at op creation (BadParm),
 * and a plan that starts with a pointwise op is refused at compile (UnsupportedOp). */
#include "common.h"

int main(void)
{
    conv_geom g1 = geom(2, 3, 6, 7, 4, 1, 1, 0, 1, 1), g2 = geom(2, 3, 6, 7, 3, 3, 3, 1, 1, 1);
    conv_geom g3 = geom(2, 3, 6, 7, 2, 3, 3, 0, 1, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w1_desc, w2_desc, w3_desc, y1_desc, y2_desc, y3_desc, y_desc, b_desc;
    miopenConvolutionDescriptor_t c1, c2, c3;
    miopenFusionPlanDescriptor_t plan, bad;
    miopenFusionOpDescriptor_t conv1, bias1, relu1, conv2, conv3, op;
    miopenOperatorArgs_t args;
    float alpha = 1.0f, beta = 0.0f;
    size_t i, plane = (size_t)g1.oh * g1.ow;
    int n, k, ktot = g1.k + g2.k;
    float *x = alloc_floats(x_count(g1)), *w1 = alloc_floats(w_count(g1)), *w2 = alloc_floats(w_count(g2));
    float *b = alloc_floats(g1.k), *r1 = alloc_floats(y_count(g1)), *r2 = alloc_floats(y_count(g2));
    float *y = alloc_floats((size_t)g1.n * ktot * plane), *want = alloc_floats((size_t)g1.n * ktot * plane);

    CHECK(miopenCreate(&handle));
    make_descs(g1, &x_desc, &w1_desc, &y1_desc, &c1);
    {
        miopenTensorDescriptor_t x2;
        make_descs(g2, &x2, &w2_desc, &y2_desc, &c2);
        CHECK(miopenDestroyTensorDescriptor(x2));
        make_descs(g3, &x2, &w3_desc, &y3_desc, &c3);
        CHECK(miopenDestroyTensorDescriptor(x2));
    }
    CHECK(miopenCreateTensorDescriptor(&b_desc));
    CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, g1.k, 1, 1));
    CHECK(miopenCreateTensorDescriptor(&y_desc));
    CHECK(miopenSet4dTensorDescriptor(y_desc, miopenFloat, g1.n, ktot, g1.oh, g1.ow));

    CHECK(miopenCreateFusionPlan(&plan, miopenHorizontalFusion, x_desc));
    CHECK(miopenCreateOpConvForward(plan, &conv1, c1, w1_desc));
    CHECK(miopenCreateOpBiasForward(plan, &bias1, b_desc));
    CHECK(miopenCreateOpActivationForward(plan, &relu1, miopenActivationRELU));
    CHECK(miopenCreateOpConvForward(plan, &conv2, c2, w2_desc));
    /* A 3x3 without padding would give 4x5 outputs beside 6x7 ones. */
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateOpConvForward(plan, &conv3, c3, w3_desc));
    CHECK(miopenFusionPlanGetOp(plan, 3, &op));
    REQUIRE(op == conv2);
    CHECK(miopenCompileFusionPlan(handle, plan));

    fill_ints(x, x_count(g1), 5u, 3);
    fill_ints(w1, w_count(g1), 7u, 2);
    fill_ints(w2, w_count(g2), 9u, 2);
    fill_ints(b, (size_t)g1.k, 13u, 4);
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenSetOpArgsConvForward(args, conv1, &alpha, &beta, w1));
    CHECK(miopenSetOpArgsBiasForward(args, bias1, &alpha, &beta, b));
    CHECK(miopenSetOpArgsActivForward(args, relu1, &alpha, &beta, 0.0, 0.0, 0.0));
    CHECK(miopenSetOpArgsConvForward(args, conv2, &alpha, &beta, w2));
    CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, y_desc, y, args));

    ref_conv_fwd(g1, x, w1, r1);
    ref_conv_fwd(g2, x, w2, r2);
    for(n = 0; n < g1.n; n++) {
        for(k = 0; k < g1.k; k++)
            for(i = 0; i < plane; i++) {
                float v = r1[((size_t)n * g1.k + k) * plane + i] + b[k];
                want[((size_t)n * ktot + k) * plane + i] = v > 0.0f ? v : 0.0f;
            }
        for(k = 0; k < g2.k; k++)
            memcpy(&want[((size_t)n * ktot + g1.k + k) * plane], &r2[((size_t)n * g2.k + k) * plane], plane * sizeof(float));
    }
    EXPECT_CLOSE(y, want, (size_t)g1.n * ktot * plane, 0.0);

    /* Every convolution starts a branch: a plan may not begin with a pointwise op. */
    CHECK(miopenCreateFusionPlan(&bad, miopenHorizontalFusion, x_desc));
    CHECK(miopenCreateOpActivationForward(bad, &op, miopenActivationRELU));
    CHECK(miopenCreateOpConvForward(bad, &op, c1, w1_desc));
    EXPECT_STATUS(miopenStatusUnsupportedOp, miopenCompileFusionPlan(handle, bad));
    CHECK(miopenDestroyFusionPlan(bad));

    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(plan));
    CHECK(miopenDestroyConvolutionDescriptor(c1));
    CHECK(miopenDestroyConvolutionDescriptor(c2));
    CHECK(miopenDestroyConvolutionDescriptor(c3));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w1_desc));
    CHECK(miopenDestroyTensorDescriptor(w2_desc));
    CHECK(miopenDestroyTensorDescriptor(w3_desc));
    CHECK(miopenDestroyTensorDescriptor(y1_desc));
    CHECK(miopenDestroyTensorDescriptor(y2_desc));
    CHECK(miopenDestroyTensorDescriptor(y3_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroyTensorDescriptor(b_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(w1); free(w2); free(b); free(r1); free(r2); free(y); free(want);
    printf("fusion_horizontal: ok\n");
    return 0;
}
