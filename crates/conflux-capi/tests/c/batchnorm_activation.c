/* Batch normalization and activation, fused and alone, against references computed here:
 * NA training plan (BN forward training with running stats + RELU), the standalone BN
 * training / inference / backward calls, activation forward / backward, and the fused
 * BN backward + activation backward plan (plan input dy, output dx). */
#include "common.h"

#define N 4
#define C 2
#define H 2
#define W 3
#define CNT (N * C * H * W)
#define M (N * H * W)

static int ch(int i) { return (i / (H * W)) % C; }

int main(void)
{
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, bn_desc;
    miopenActivationDescriptor_t relu;
    miopenFusionPlanDescriptor_t train_plan, bwd_plan;
    miopenFusionOpDescriptor_t bn_fwd, act_fwd, bn_bwd, act_bwd;
    miopenOperatorArgs_t args;
    float x[CNT], y[CNT], ybn[CNT], yact[CNT], dy[CNT], dx[CNT], want[CNT], xhat[CNT], dyp[CNT];
    float scale[C] = {2.0f, 0.5f}, bias[C] = {1.0f, -0.5f};
    float smean[C], sinv[C], rmean[C] = {1.0f, 2.0f}, rvar[C] = {1.0f, 1.0f};
    float smean2[C], sinv2[C], dscale[C], dbias[C];
    double mean[C], var[C], inv[C], eps = 1e-5, f = 0.25, wmean[C], winv[C], wrm[C], wrv[C];
    double ds[C], db[C];
    float one = 1.0f, zero = 0.0f, tmp[C];
    int i, c;

    fill_ints(x, CNT, 3u, 4);
    fill_ints(dy, CNT, 9u, 3);
    for(c = 0; c < C; c++) {
        double s = 0, s2 = 0;
        for(i = 0; i < CNT; i++)
            if(ch(i) == c) { s += x[i]; s2 += (double)x[i] * x[i]; }
        mean[c] = s / M;
        var[c] = s2 / M - mean[c] * mean[c];
        inv[c] = 1.0 / sqrt(var[c] + eps);
        wmean[c] = mean[c];
        winv[c] = inv[c];
        wrm[c] = (1 - f) * rmean[c] + f * mean[c];
        wrv[c] = (1 - f) * rvar[c] + f * var[c] * M / (M - 1);
    }
    for(i = 0; i < CNT; i++) {
        c = ch(i);
        xhat[i] = (float)((x[i] - mean[c]) * inv[c]);
        want[i] = (float)(scale[c] * (x[i] - mean[c]) * inv[c] + bias[c]);
    }

    CHECK(miopenCreate(&handle));
    CHECK(miopenCreateTensorDescriptor(&x_desc));
    CHECK(miopenSet4dTensorDescriptor(x_desc, miopenFloat, N, C, H, W));
    CHECK(miopenCreateTensorDescriptor(&bn_desc));
    CHECK(miopenDeriveBNTensorDescriptor(bn_desc, x_desc, miopenBNSpatial));
    CHECK(miopenCreateActivationDescriptor(&relu));
    CHECK(miopenSetActivationDescriptor(relu, miopenActivationRELU, 0.0, 0.0, 0.0));

    /* Standalone BN training: y, saved and running statistics. */
    CHECK(miopenBatchNormalizationForwardTraining(handle, miopenBNSpatial, &one, &zero, x_desc, x,
                                                  x_desc, ybn, bn_desc, scale, bias, f, rmean, rvar,
                                                  eps, smean, sinv));
    EXPECT_CLOSE(ybn, want, CNT, 1e-5);
    for(c = 0; c < C; c++) tmp[c] = (float)wmean[c];
    EXPECT_CLOSE(smean, tmp, C, 1e-6);
    for(c = 0; c < C; c++) tmp[c] = (float)winv[c];
    EXPECT_CLOSE(sinv, tmp, C, 1e-5);
    for(c = 0; c < C; c++) tmp[c] = (float)wrm[c];
    EXPECT_CLOSE(rmean, tmp, C, 1e-6);
    for(c = 0; c < C; c++) tmp[c] = (float)wrv[c];
    EXPECT_CLOSE(rvar, tmp, C, 1e-5);

    /* Inference with NULL estimates uses the batch statistics. */
    CHECK(miopenBatchNormalizationForwardInference(handle, miopenBNSpatial, &one, &zero, x_desc, x,
                                                   x_desc, y, bn_desc, scale, bias, NULL, NULL, eps));
    EXPECT_CLOSE(y, want, CNT, 1e-5);

    /* Activation forward on the BN output. */
    CHECK(miopenActivationForward(handle, relu, &one, x_desc, ybn, &zero, x_desc, yact));
    for(i = 0; i < CNT; i++) want[i] = ybn[i] > 0 ? ybn[i] : 0.0f;
    EXPECT_CLOSE(yact, want, CNT, 0.0);

    /* The fused NA training plan gives the same output and statistics. */
    rmean[0] = 1.0f; rmean[1] = 2.0f; rvar[0] = 1.0f; rvar[1] = 1.0f;
    CHECK(miopenCreateFusionPlan(&train_plan, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOpBatchNormForward(train_plan, &bn_fwd, miopenBNSpatial, true));
    CHECK(miopenCreateOpActivationForward(train_plan, &act_fwd, miopenActivationRELU));
    CHECK(miopenCompileFusionPlan(handle, train_plan));
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenSetOpArgsBatchNormForward(args, bn_fwd, NULL, NULL, scale, bias, smean2, sinv2,
                                          rmean, rvar, f, eps));
    CHECK(miopenSetOpArgsActivForward(args, act_fwd, NULL, NULL, 0.0, 0.0, 0.0));
    CHECK(miopenExecuteFusionPlan(handle, train_plan, x_desc, x, x_desc, y, args));
    EXPECT_CLOSE(y, yact, CNT, 1e-5);
    EXPECT_CLOSE(smean2, smean, C, 1e-6);
    EXPECT_CLOSE(sinv2, sinv, C, 1e-6);
    for(c = 0; c < C; c++) tmp[c] = (float)wrm[c];
    EXPECT_CLOSE(rmean, tmp, C, 1e-6);
    CHECK(miopenDestroyOperatorArgs(args));

    /* Standalone BN backward with the saved statistics. */
    for(c = 0; c < C; c++) {
        ds[c] = 0; db[c] = 0;
        for(i = 0; i < CNT; i++)
            if(ch(i) == c) { db[c] += dy[i]; ds[c] += (double)dy[i] * xhat[i]; }
    }
    for(i = 0; i < CNT; i++) {
        c = ch(i);
        want[i] = (float)(scale[c] * inv[c] / M * (M * dy[i] - db[c] - xhat[i] * ds[c]));
    }
    CHECK(miopenBatchNormalizationBackward(handle, miopenBNSpatial, &one, &zero, &one, &zero, x_desc,
                                           x, x_desc, dy, x_desc, dx, bn_desc, scale, dscale, dbias,
                                           eps, smean, sinv));
    EXPECT_CLOSE(dx, want, CNT, 1e-4);
    for(c = 0; c < C; c++) tmp[c] = (float)ds[c];
    EXPECT_CLOSE(dscale, tmp, C, 1e-4);
    for(c = 0; c < C; c++) tmp[c] = (float)db[c];
    EXPECT_CLOSE(dbias, tmp, C, 1e-5);

    /* Activation backward alone: dx = dy where the forward input was > 0. */
    CHECK(miopenActivationBackward(handle, relu, &one, x_desc, yact, x_desc, dy, x_desc, ybn, &zero,
                                   x_desc, dx));
    for(i = 0; i < CNT; i++) dyp[i] = ybn[i] > 0 ? dy[i] : 0.0f;
    EXPECT_CLOSE(dx, dyp, CNT, 0.0);

    /* Fused BN backward + activation backward: the activation's input is recomputed from x. */
    for(c = 0; c < C; c++) {
        ds[c] = 0; db[c] = 0;
        for(i = 0; i < CNT; i++)
            if(ch(i) == c) { db[c] += dyp[i]; ds[c] += (double)dyp[i] * xhat[i]; }
    }
    for(i = 0; i < CNT; i++) {
        c = ch(i);
        want[i] = (float)(scale[c] * inv[c] / M * (M * dyp[i] - db[c] - xhat[i] * ds[c]));
    }
    CHECK(miopenCreateFusionPlan(&bwd_plan, miopenVerticalFusion, x_desc));
    CHECK(miopenCreateOpBatchNormBackward(bwd_plan, &bn_bwd, miopenBNSpatial));
    CHECK(miopenCreateOpActivationBackward(bwd_plan, &act_bwd, miopenActivationRELU));
    CHECK(miopenCompileFusionPlan(handle, bwd_plan));
    CHECK(miopenCreateOperatorArgs(&args));
    CHECK(miopenSetOpArgsBatchNormBackward(args, bn_bwd, NULL, NULL, x, scale, bias, dscale, dbias,
                                           smean, sinv));
    CHECK(miopenSetOpArgsActivBackward(args, act_bwd, NULL, NULL, yact, NULL, 0.0, 0.0, 0.0));
    CHECK(miopenExecuteFusionPlan(handle, bwd_plan, x_desc, dy, x_desc, dx, args));
    EXPECT_CLOSE(dx, want, CNT, 1e-4);
    for(c = 0; c < C; c++) tmp[c] = (float)db[c];
    EXPECT_CLOSE(dbias, tmp, C, 1e-5);

    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(bwd_plan));
    CHECK(miopenDestroyFusionPlan(train_plan));
    CHECK(miopenDestroyActivationDescriptor(relu));
    CHECK(miopenDestroyTensorDescriptor(bn_desc));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroy(handle));
    printf("batchnorm_activation: ok\n");
    return 0;
}
