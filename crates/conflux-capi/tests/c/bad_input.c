/* Bad input from C: NULL handles, descriptors and outputs; out-of-range enums; mismatched
 * descriptors; SetOpArgs on an op of another kind; executing an uncompiled plan. Each call
 * returns the documented status, leaves a reason, and never crashes. */
#include "common.h"

int main(void)
{
    miopenHandle_t handle;
    miopenTensorDescriptor_t x_desc, w_desc, y_desc, other;
    miopenConvolutionDescriptor_t conv;
    miopenActivationDescriptor_t act;
    miopenFusionPlanDescriptor_t plan;
    miopenFusionOpDescriptor_t conv_op, act_op, op;
    miopenOperatorArgs_t args;
    float data[64] = {0}, out[64] = {0};
    int dims[2] = {2, 2}, n, c, h, w, count;
    size_t bytes;
    miopenConvFwdAlgorithm_t algos[4];

    /* Status names and destroy(NULL). */
    REQUIRE(strcmp(miopenGetErrorString(miopenStatusBadParm), "miopenStatusBadParm") == 0);
    REQUIRE(strcmp(miopenGetErrorString(miopenStatusUnsupportedOp), "miopenStatusUnsupportedOp") == 0);
    REQUIRE(strcmp(miopenGetErrorString((miopenStatus_t)42), "Unknown error status") == 0);
    REQUIRE(strcmp(confluxGetLastErrorMessage(), "") == 0);
    CHECK(miopenDestroy(NULL));
    CHECK(miopenDestroyTensorDescriptor(NULL));
    CHECK(miopenDestroyConvolutionDescriptor(NULL));
    CHECK(miopenDestroyActivationDescriptor(NULL));
    CHECK(miopenDestroyFusionPlan(NULL));
    CHECK(miopenDestroyOperatorArgs(NULL));
    {
        size_t major = 0, minor = 0;
        CHECK(miopenGetVersion(&major, &minor, NULL));
        REQUIRE(major == MIOPEN_VERSION_MAJOR && minor == MIOPEN_VERSION_MINOR);
    }

    /* NULL outputs and objects. */
    EXPECT_STATUS(miopenStatusBadParm, miopenCreate(NULL));
    REQUIRE(strstr(confluxGetLastErrorMessage(), "miopenCreate") != NULL);
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateTensorDescriptor(NULL));
    EXPECT_STATUS(miopenStatusBadParm, miopenSet4dTensorDescriptor(NULL, miopenFloat, 1, 1, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenGetKernelTime(NULL, NULL));
    CHECK(miopenCreate(&handle));
    EXPECT_STATUS(miopenStatusBadParm, miopenGetKernelTime(handle, NULL));
    EXPECT_STATUS(miopenStatusBadParm, miopenGetStream(handle, NULL));
    {
        miopenAcceleratorQueue_t q = (miopenAcceleratorQueue_t)1;
        CHECK(miopenGetStream(handle, &q));
        REQUIRE(q == NULL);
        float t = -1.0f;
        CHECK(miopenEnableProfiling(handle, true));
        CHECK(miopenGetKernelTime(handle, &t));
        REQUIRE(t >= 0.0f);
    }

    /* Tensor descriptors: unknown enum, bad lengths, array setters' InvalidValue. */
    CHECK(miopenCreateTensorDescriptor(&x_desc));
    EXPECT_STATUS(miopenStatusBadParm, miopenSet4dTensorDescriptor(x_desc, (miopenDataType_t)4, 1, 1, 1, 1));
    REQUIRE(strstr(confluxGetLastErrorMessage(), "DataType") != NULL);
    EXPECT_STATUS(miopenStatusBadParm, miopenSet4dTensorDescriptor(x_desc, (miopenDataType_t)99, 1, 1, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenSet4dTensorDescriptor(x_desc, miopenFloat, 1, 0, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenSet4dTensorDescriptor(x_desc, miopenFloat, 1, -3, 1, 1));
    EXPECT_STATUS(miopenStatusInvalidValue, miopenSetTensorDescriptor(x_desc, miopenFloat, 2, NULL, NULL));
    EXPECT_STATUS(miopenStatusInvalidValue, miopenSetTensorDescriptor(x_desc, miopenFloat, 0, dims, NULL));
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenSetNdTensorDescriptorWithLayout(x_desc, miopenFloat, (miopenTensorLayout_t)17, dims, 2));
    EXPECT_STATUS(miopenStatusBadParm, miopenGetTensorNumBytes(x_desc, NULL));
    CHECK(miopenGetTensorNumBytes(x_desc, &bytes)); /* empty descriptor */
    REQUIRE(bytes == 0);
    CHECK(miopenSet4dTensorDescriptor(x_desc, miopenFloat, 1, 2, 3, 3));
    EXPECT_STATUS(miopenStatusBadParm,
                  miopenGet4dTensorDescriptor(x_desc, NULL, &n, &c, &h, &w, &n, &c, &h, &w));

    /* Convolution descriptor. */
    CHECK(miopenCreateConvolutionDescriptor(&conv));
    EXPECT_STATUS(miopenStatusBadParm, miopenInitConvolutionDescriptor(conv, (miopenConvolutionMode_t)7, 0, 0, 1, 1, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenInitConvolutionDescriptor(conv, miopenConvolution, -1, 0, 1, 1, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenInitConvolutionDescriptor(conv, miopenConvolution, 0, 0, 0, 1, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetConvolutionAttribute(conv, (miopenConvolutionAttrib_t)9, 0));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetConvolutionAttribute(conv, MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC, 2));
    {
        /* conflux's TF32 switch: -1 (default) / 0 / 1, anything else refused. */
        int v = 7;
        CHECK(miopenGetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_ALLOW_TF32, &v));
        REQUIRE(v == -1);
        CHECK(miopenSetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_ALLOW_TF32, 1));
        CHECK(miopenGetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_ALLOW_TF32, &v));
        REQUIRE(v == 1);
        EXPECT_STATUS(miopenStatusBadParm, miopenSetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_ALLOW_TF32, 2));
        CHECK(miopenSetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_ALLOW_TF32, 0));
        /* conflux's constant-weights promise: 0 (default) / 1, anything else refused. */
        CHECK(miopenGetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_CONSTANT_WEIGHTS, &v));
        REQUIRE(v == 0);
        CHECK(miopenSetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_CONSTANT_WEIGHTS, 1));
        CHECK(miopenGetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_CONSTANT_WEIGHTS, &v));
        REQUIRE(v == 1);
        EXPECT_STATUS(miopenStatusBadParm, miopenSetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_CONSTANT_WEIGHTS, -1));
        CHECK(miopenSetConvolutionAttribute(conv, CONFLUX_CONVOLUTION_ATTRIB_CONSTANT_WEIGHTS, 0));
    }
    CHECK(miopenInitConvolutionDescriptor(conv, miopenConvolution, 0, 0, 1, 1, 1, 1));
    {
        int pads[3] = {0, 0, 0}, one3[3] = {1, 1, 1};
        miopenConvolutionDescriptor_t c3;
        CHECK(miopenCreateConvolutionDescriptor(&c3));
        CHECK(miopenInitConvolutionNdDescriptor(c3, 3, pads, one3, one3, miopenConvolution));
        EXPECT_STATUS(miopenStatusUnknownError, miopenGetConvolutionDescriptor(c3, NULL, &n, &n, &n, &n, &n, &n));
        EXPECT_STATUS(miopenStatusUnknownError, miopenSetTransposeConvOutputPadding(c3, 0, 0));
        CHECK(miopenDestroyConvolutionDescriptor(c3));
    }

    /* Mismatched descriptors: filter channels differ from the input's. */
    CHECK(miopenCreateTensorDescriptor(&w_desc));
    CHECK(miopenSet4dTensorDescriptor(w_desc, miopenFloat, 2, 5, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenGetConvolutionForwardOutputDim(conv, x_desc, w_desc, &n, &c, &h, &w));
    REQUIRE(strstr(confluxGetLastErrorMessage(), "channels") != NULL);
    CHECK(miopenSet4dTensorDescriptor(w_desc, miopenFloat, 2, 2, 1, 1));
    EXPECT_STATUS(miopenStatusBadParm, miopenGetConvolutionForwardOutputDim(conv, x_desc, w_desc, &n, &c, NULL, &w));
    CHECK(miopenGetConvolutionForwardOutputDim(conv, x_desc, w_desc, &n, &c, &h, &w));
    REQUIRE(n == 1 && c == 2 && h == 3 && w == 3);
    CHECK(miopenCreateTensorDescriptor(&y_desc));
    CHECK(miopenSet4dTensorDescriptor(y_desc, miopenFloat, n, c, h, w));
    CHECK(miopenCreateTensorDescriptor(&other));
    CHECK(miopenSet4dTensorDescriptor(other, miopenFloat, 1, 2, 4, 4));

    /* Activation. */
    CHECK(miopenCreateActivationDescriptor(&act));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetActivationDescriptor(act, (miopenActivationMode_t)10, 0, 0, 0));
    CHECK(miopenSetActivationDescriptor(act, miopenActivationRELU, 0, 0, 0));
    EXPECT_STATUS(miopenStatusBadParm, miopenActivationForward(NULL, act, NULL, x_desc, data, NULL, x_desc, out));
    EXPECT_STATUS(miopenStatusBadParm, miopenActivationForward(handle, act, NULL, x_desc, NULL, NULL, x_desc, out));
    EXPECT_STATUS(miopenStatusBadParm, miopenActivationForward(handle, act, NULL, x_desc, data, NULL, other, out));
    {
        float two = 2.0f;
        EXPECT_STATUS(miopenStatusUnknownError, miopenActivationForward(handle, act, &two, x_desc, data, NULL, x_desc, out));
    }

    /* Batch norm: unknown mode, scalars. */
    EXPECT_STATUS(miopenStatusBadParm, miopenDeriveBNTensorDescriptor(other, x_desc, (miopenBatchNormMode_t)2));

    /* Fusion. */
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateFusionPlan(&plan, (miopenFusionDirection_t)5, x_desc));
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateFusionPlan(&plan, miopenVerticalFusion, NULL));
    CHECK(miopenCreateFusionPlan(&plan, miopenVerticalFusion, x_desc));
    EXPECT_STATUS(miopenStatusUnknownError, miopenCompileFusionPlan(handle, plan)); /* empty plan */
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateOpConvForward(plan, NULL, conv, w_desc));
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateOpConvForward(NULL, &conv_op, conv, w_desc));
    EXPECT_STATUS(miopenStatusBadParm, miopenCreateOpActivationForward(plan, &act_op, (miopenActivationMode_t)-1));
    CHECK(miopenCreateOpConvForward(plan, &conv_op, conv, w_desc));
    CHECK(miopenCreateOpActivationForward(plan, &act_op, miopenActivationRELU));
    EXPECT_STATUS(miopenStatusBadParm, miopenFusionPlanGetOp(plan, 2, &op));
    EXPECT_STATUS(miopenStatusBadParm, miopenFusionPlanGetOp(plan, -1, &op));
    CHECK(miopenFusionPlanConvolutionGetAlgo(plan, 4, &count, algos));
    REQUIRE(count >= 1 && algos[0] == miopenConvolutionFwdAlgoDirect);
    CHECK(miopenCreateOperatorArgs(&args));
    /* Arguments of another op kind. */
    EXPECT_STATUS(miopenStatusBadParm, miopenSetOpArgsConvForward(args, act_op, NULL, NULL, data));
    REQUIRE(strstr(confluxGetLastErrorMessage(), "activation forward") != NULL);
    EXPECT_STATUS(miopenStatusBadParm, miopenSetOpArgsActivForward(args, conv_op, NULL, NULL, 0, 0, 0));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetOpArgsBiasForward(args, conv_op, NULL, NULL, data));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetOpArgsConvForward(args, NULL, NULL, NULL, data));
    CHECK(miopenSetOpArgsConvForward(args, conv_op, NULL, NULL, data));
    CHECK(miopenSetOpArgsActivForward(args, act_op, NULL, NULL, 0, 0, 0));
    /* Execute before compile. */
    EXPECT_STATUS(miopenStatusBadParm, miopenExecuteFusionPlan(handle, plan, x_desc, data, y_desc, out, args));
    REQUIRE(strstr(confluxGetLastErrorMessage(), "compile") != NULL);
    CHECK(miopenCompileFusionPlan(handle, plan));
    /* Wrong output descriptor, NULL data, NULL args. */
    EXPECT_STATUS(miopenStatusBadParm, miopenExecuteFusionPlan(handle, plan, x_desc, data, other, out, args));
    EXPECT_STATUS(miopenStatusBadParm, miopenExecuteFusionPlan(handle, plan, x_desc, NULL, y_desc, out, args));
    EXPECT_STATUS(miopenStatusBadParm, miopenExecuteFusionPlan(handle, plan, x_desc, data, y_desc, out, NULL));
    EXPECT_STATUS(miopenStatusBadParm, miopenExecuteFusionPlan(NULL, plan, x_desc, data, y_desc, out, args));
    CHECK(miopenExecuteFusionPlan(handle, plan, x_desc, data, y_desc, out, args));

    /* A plan no solver fuses: a convolution after an activation backward (no prologue op). */
    {
        miopenFusionPlanDescriptor_t bad;
        miopenFusionOpDescriptor_t a1, c2;
        CHECK(miopenCreateFusionPlan(&bad, miopenVerticalFusion, x_desc));
        CHECK(miopenCreateOpActivationBackward(bad, &a1, miopenActivationRELU));
        CHECK(miopenCreateOpConvForward(bad, &c2, conv, w_desc));
        EXPECT_STATUS(miopenStatusUnsupportedOp, miopenCompileFusionPlan(handle, bad));
        REQUIRE(strstr(confluxGetLastErrorMessage(), "op 0") != NULL);
        CHECK(miopenDestroyFusionPlan(bad));
    }

    CHECK(miopenDestroyOperatorArgs(args));
    CHECK(miopenDestroyFusionPlan(plan));
    CHECK(miopenDestroyActivationDescriptor(act));
    CHECK(miopenDestroyConvolutionDescriptor(conv));
    CHECK(miopenDestroyTensorDescriptor(x_desc));
    CHECK(miopenDestroyTensorDescriptor(w_desc));
    CHECK(miopenDestroyTensorDescriptor(y_desc));
    CHECK(miopenDestroyTensorDescriptor(other));
    CHECK(miopenDestroy(handle));
    printf("bad_input: ok\n");
    return 0;
}
