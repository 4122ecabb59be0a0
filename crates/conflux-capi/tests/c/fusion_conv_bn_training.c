/* A convolution followed by batch-norm training and ReLU in one vertical plan (MIOpen refuses
 * it): the batch statistics of the convolution's output, the normalised and rectified output,
 * the saved mean, checked against reference loops here. */
#include "common.h"

int main(void)
{
    conv_geom g = geom(2, 3, 6, 7, 4, 3, 3, 1, 1, 1);
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc;
    miopenConvolutionDescriptor_t conv_desc;
    miopenFusionPlanDescriptor_t plan;
    miopenFusionOpDescriptor_t conv_op, bn_op, relu_op;
    miopenOperatorArgs_t args;
    float alpha = 1.0f, beta = 0.0f;
    double eps = 1e-5, factor = 0.5;
    size_t i, plane = (size_t)g.oh * g.ow, per = (size_t)g.n * plane;
    int n, k;
    float *x = alloc_floats(x_count(g)), *wt = alloc_floats(w_count(g)), *t = alloc_floats(y_count(g));
    float *y = alloc_floats(y_count(g)), *want = alloc_floats(y_count(g));
    float scale[4] = {1.0f, 0.5f, 2.0f, 1.5f}, bias[4] = {0.0f, 1.0f, -1.0f, 0.5f};
    float rmean[4] = {0}, rvar[4] = {1, 1, 1, 1}, smean[4], sinv[4], want_mean[4];

    CHECK(miopenCreate(&handle));
    make_descs(g, &x_desc, &w_desc, &y_desc, &conv_desc);
    CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOpConvForward(plan, &conv_op, conv_desc, w_desc));
    CHECK(miopenCreateOpBatchNormForward(plan, &bn_op, miopenBNSpatial, 1));
    CHECK(miopenCreateOpActivationForward(plan, &relu_op, miopenActivationRELU));
    CHECK(miopenCompileFusionPlan(handle, plan));

    fill_ints(x, x_count(g), 7u, 3);
    fill_ints(wt, w_count(g), 11u, 2);
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenSetOpArgsConvForward(args, conv_op, &alpha, &beta, wt));
    CHECK(miopenSetOpArgsBatchNormForward(args, bn_op, NULL, NULL, scale, bias, smean, sinv, rmean, rvar, factor, eps));
    CHECK(miopenSetOpArgsActivForward(args, relu_op, &alpha, &beta, 0.0, 0.0, 0.0));
    CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, x, y_desc, y, args));

    ref_conv_fwd(g, x, wt, t);
    for(k = 0; k < g.k; k++) {
        double sum = 0.0, sq = 0.0, mean, var;
        for(n = 0; n < g.n; n++)
            for(i = 0; i < plane; i++) {
                double v = t[((size_t)n * g.k + k) * plane + i];
                sum += v;
                sq += v * v;
            }
        mean = sum / (double)per;
        var = sq / (double)per - mean * mean;
        want_mean[k] = (float)mean;
        for(n = 0; n < g.n; n++)
            for(i = 0; i < plane; i++) {
                size_t at = ((size_t)n * g.k + k) * plane + i;
                double v = scale[k] * (t[at] - mean) / sqrt(var + eps) + bias[k];
                want[at] = (float)(v > 0.0 ? v : 0.0);
            }
    }
    EXPECT_CLOSE(y, want, y_count(g), 1e-4);
    EXPECT_CLOSE(smean, want_mean, 4, 1e-5);

    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(plan));
    CHECK(miopenDestroyConvolutionDescriptor(conv_desc));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroy(handle));
    free(x); free(wt); free(t); free(y); free(want);
    printf("fusion_conv_bn_training: ok\n");
    return 0;
}
