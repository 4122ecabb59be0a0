/* Conv + bias + BN inference (spatial) + activation (LEAKYRELU) in one plan, and a
 * standalone BN-inference + activation (NA) plan on the conv output, each checked against
 * a reference computed here. */
#include "common.h"

int main(void)
{
    conv_geom g = geom(2, 2, 5, 5, 3, 1, 1, 0, 1, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc, b_desc, bn_desc;
    miopenConvolutionDescriptor_t conv_desc;
    miopenFusionPlanDescriptor_t plan, na_plan;
    miopenFusionOpDescriptor_t conv_op, bias_op, bn_op, activ_op, na_bn, na_act;
    miopenOperatorArgs_t args, na_args;
    const double slope = 0.25, eps = 1.0;
    size_t i, per = (size_t)g.oh * g.ow;
    float *x = alloc_floats(x_count(g)), *wt = alloc_floats(w_count(g));
    float *y = alloc_floats(y_count(g)), *want = alloc_floats(y_count(g)), *conv_out = alloc_floats(y_count(g));
    float b[3] = {1.0f, -2.0f, 0.5f}, scale[3] = {2.0f, 1.0f, -1.0f}, shift[3] = {0.0f, 1.0f, 2.0f};
    float mean[3] = {1.0f, -1.0f, 0.0f}, var[3] = {3.0f, 0.0f, 15.0f}; /* var + eps: 4, 1, 16 */
    int dt, nd;

    fill_ints(x, x_count(g), 5u, 3);
    fill_ints(wt, w_count(g), 7u, 2);
    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv_desc);
    CHECK(miopenCreateTensorDescriptor(&b_desc));
    CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, g.k, 1, 1));
    CHECK(miopenCreateTensorDescriptor(&bn_desc));
    CHECK(miopenDeriveBNTensorDescriptor(bn_desc, y_desc, miopenBNSpatial));
    CHECK(miopenGetTensorDescriptorSize(bn_desc, &nd));
    REQUIRE(nd == 4);
    {
        int dims[4], strides[4];
        CHECK(miopenGetTensorDescriptor(bn_desc, (miopenDataType_t*)&dt, dims, strides));
        REQUIRE(dt == miopenFloat && dims[0] == 1 && dims[1] == g.k && dims[2] == 1 && dims[3] == 1);
    }

    CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOpConvForward(plan, &conv_op, conv_desc, w_desc));
    CHECK(miopenCreateOpBiasForward(plan, &bias_op, b_desc));
    CHECK(miopenCreateOpBatchNormInference(plan, &bn_op, miopenBNSpatial, bn_desc));
    CHECK(miopenCreateOpActivationForward(plan, &activ_op, miopenActivationLEAKYRELU));
    CHECK(miopenCompileFusionPlan(handle, plan));
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenSetOpArgsConvForward(args, conv_op, NULL, NULL, wt));
    CHECK(miopenSetOpArgsBiasForward(args, bias_op, NULL, NULL, b));
    CHECK(miopenSetOpArgsBatchNormInference(args, bn_op, NULL, NULL, scale, shift, mean, var, eps));
    CHECK(miopenSetOpArgsActivForward(args, activ_op, NULL, NULL, slope, 0.0, 0.0));
    CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, y_desc, y, args));

    ref_conv_fwd(g, x, wt, conv_out);
    for(i = 0; i < y_count(g); i++) {
        size_t k = (i / per) % (size_t)g.k;
        double v = conv_out[i] + b[k];
        v = scale[k] * (v - mean[k]) / sqrt(var[k] + eps) + shift[k];
        want[i] = (float)(v > 0 ? v : slope * v);
    }
    EXPECT_CLOSE(y, want, y_count(g), 1e-5);

    /* NA on the conv output (no convolution in the plan). */
    CHECK(miopenCreateFusionPlan(&na_plan, miopenVerticalFusion, y_desc));
    CHECK(miopenCreateOpBatchNormInference(na_plan, &na_bn, miopenBNSpatial, bn_desc));
    CHECK(miopenCreateOpActivationForward(na_plan, &na_act, miopenActivationLEAKYRELU));
    CHECK(miopenCompileFusionPlan(handle, na_plan));
    CHECK(miopenCreateOperatorArgs(&na_args));
    CHECK(miopenSetOpArgsBatchNormInference(na_args, na_bn, NULL, NULL, scale, shift, mean, var, eps));
    CHECK(miopenSetOpArgsActivForward(na_args, na_act, NULL, NULL, slope, 0.0, 0.0));
    for(i = 0; i < y_count(g); i++)
        conv_out[i] += b[(i / per) % (size_t)g.k];
    CHECK(miopenExecuteFusionPlan(handle, na_plan, y_desc, conv_out, y_desc, y, na_args));
    EXPECT_CLOSE(y, want, y_count(g), 1e-5);

    CHECK(miopenDestroyOperatorArgs(na_args));
    CHECK(miopenDestroyFusionPlan(na_plan));
    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(plan));
    CHECK(miopenDestroyConvolutionDescriptor(conv_desc));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroyTensorDescriptor(b_desc));
    CHECK(miopenDestroyTensorDescriptor(bn_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(wt); free(y); free(want); free(conv_out);
    printf("fusion_cbna: ok\n");
    return 0;
}
