/* Struct sizes and field offsets clients rely on (x86-64 / aarch64 LP64), enum values, and
 * the tensor helpers on a small case. */
#include "common.h"
#include <stddef.h>

int main(void)
{
    REQUIRE(sizeof(miopenConvAlgoPerf_t) == 16);
    REQUIRE(offsetof(miopenConvAlgoPerf_t, fwd_algo) == 0);
    REQUIRE(offsetof(miopenConvAlgoPerf_t, bwd_data_algo) == 0);
    REQUIRE(offsetof(miopenConvAlgoPerf_t, bwd_weights_algo) == 0);
    REQUIRE(offsetof(miopenConvAlgoPerf_t, time) == 4);
    REQUIRE(offsetof(miopenConvAlgoPerf_t, memory) == 8);
    REQUIRE(sizeof(miopenConvSolution_t) == 32);
    REQUIRE(offsetof(miopenConvSolution_t, time) == 0);
    REQUIRE(offsetof(miopenConvSolution_t, workspace_size) == 8);
    REQUIRE(offsetof(miopenConvSolution_t, solution_id) == 16);
    REQUIRE(offsetof(miopenConvSolution_t, algorithm) == 24);
    REQUIRE(sizeof(miopenStatus_t) == 4 && sizeof(miopenDataType_t) == 4);
    REQUIRE(miopenBFloat16 == 5 && miopenInt64 == 9 && miopenTensorNDHWC == 8);
    REQUIRE(miopenConvolutionFwdAlgoImplicitGEMM == 5 && miopenTransposeBwdDataAlgoGEMM == 4);
    REQUIRE(miopenActivationELU == 9 && miopenBNSpatial == 1 && miopenHorizontalFusion == 1);
    REQUIRE(miopenStatusVersionMismatch == 10);

    /* Tensor helpers: C = A + 2 * B (B broadcast per channel), scale, set, transform. */
    {
        miopenHandle_t h;
        miopenTensorDescriptor_t a_desc, b_desc, t_desc;
        float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[2] = {10, 20}, c[8], t[8];
        float one = 1.0f, two = 2.0f, zero = 0.0f, three = 3.0f;
        float want[8] = {21, 22, 23, 24, 45, 46, 47, 48};
        int lens[4] = {1, 2, 2, 2};
        int dims[4], strides[4], i;
        CHECK(miopenCreate(&h));
        CHECK(miopenCreateTensorDescriptor(&a_desc));
        CHECK(miopenCreateTensorDescriptor(&b_desc));
        CHECK(miopenCreateTensorDescriptor(&t_desc));
        CHECK(miopenSetTensorDescriptor(a_desc, miopenFloat, 4, lens, NULL));
        CHECK(miopenSet4dTensorDescriptor(b_desc, miopenFloat, 1, 2, 1, 1));
        CHECK(miopenOpTensor(h, miopenTensorOpAdd, &one, a_desc, a, &two, b_desc, b, &zero, a_desc, c));
        EXPECT_CLOSE(c, want, 8, 0.0);
        CHECK(miopenScaleTensor(h, a_desc, c, &two));
        for(i = 0; i < 8; i++) want[i] *= 2.0f;
        EXPECT_CLOSE(c, want, 8, 0.0);
        CHECK(miopenSetTensor(h, a_desc, c, &three));
        for(i = 0; i < 8; i++) REQUIRE(c[i] == 3.0f);
        /* NCHW -> NHWC copy. */
        CHECK(miopenSetNdTensorDescriptorWithLayout(t_desc, miopenFloat, miopenTensorNHWC, lens, 4));
        CHECK(miopenGetTensorDescriptor(t_desc, NULL, dims, strides));
        REQUIRE(strides[0] == 8 && strides[1] == 1 && strides[2] == 4 && strides[3] == 2);
        CHECK(miopenTransformTensor(h, &one, a_desc, a, &zero, t_desc, t));
        REQUIRE(t[0] == 1 && t[1] == 5 && t[2] == 2 && t[7] == 8);
        CHECK(miopenDestroyTensorDescriptor(a_desc));
        CHECK(miopenDestroyTensorDescriptor(b_desc));
        CHECK(miopenDestroyTensorDescriptor(t_desc));
        CHECK(miopenDestroy(h));
    }
    printf("abi_layout: ok\n");
    return 0;
}
