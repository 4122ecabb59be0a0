/* The calls conflux declares but does not compute, made the way a client makes them (real
 * arguments, outputs to fill): each returns miopenStatusNotImplemented with a reason naming
 * it, leaves its outputs as they were, and destroying NULL succeeds. */
#define MIOPEN_BETA_API
#include "common.h"

#define EXPECT_NOT_IMPLEMENTED(name, call)                                               \
    do {                                                                                 \
        EXPECT_STATUS(miopenStatusNotImplemented, call);                                 \
        REQUIRE(strncmp(confluxGetLastErrorMessage(), name ":", strlen(name ":")) == 0); \
    } while(0)

int main(void)
{
    miopenHandle_t h;
    miopenTensorDescriptor_t x;
    miopenRNNDescriptor_t rnn = (miopenRNNDescriptor_t)0;
    miopenDropoutDescriptor_t drop = (miopenDropoutDescriptor_t)0;
    miopenReduceTensorDescriptor_t red = (miopenReduceTensorDescriptor_t)0;
    miopenCTCLossDescriptor_t ctc = (miopenCTCLossDescriptor_t)0;
    miopenSeqTensorDescriptor_t seq = (miopenSeqTensorDescriptor_t)0;
    miopenBackendDescriptor_t graph = (miopenBackendDescriptor_t)0;
    miopenLRNDescriptor_t lrn;
    size_t size = 77;
    float in[24], out[24];
    int i;
    CHECK(miopenCreateWithStream(&h, (miopenAcceleratorQueue_t)0));
    CHECK(miopenCreateTensorDescriptor(&x));
    CHECK(miopenSet4dTensorDescriptor(x, miopenFloat, 1, 2, 3, 4));
    for(i = 0; i < 24; i++) {
        in[i] = (float)i;
        out[i] = -1.0f;
    }

    EXPECT_NOT_IMPLEMENTED("miopenCreateRNNDescriptor", miopenCreateRNNDescriptor(&rnn));
    REQUIRE(rnn == (miopenRNNDescriptor_t)0);
    EXPECT_NOT_IMPLEMENTED("miopenSetRNNDescriptor",
                           miopenSetRNNDescriptor(rnn, 16, 1, miopenRNNlinear, miopenRNNunidirection,
                                                  miopenLSTM, miopenRNNwithBias, miopenRNNdefault, miopenFloat));
    EXPECT_NOT_IMPLEMENTED("miopenCreateDropoutDescriptor", miopenCreateDropoutDescriptor(&drop));
    EXPECT_NOT_IMPLEMENTED("miopenDropoutGetStatesSize", miopenDropoutGetStatesSize(h, &size));
    REQUIRE(size == 77);
    EXPECT_NOT_IMPLEMENTED("miopenCreateReduceTensorDescriptor", miopenCreateReduceTensorDescriptor(&red));
    EXPECT_NOT_IMPLEMENTED("miopenCreateCTCLossDescriptor", miopenCreateCTCLossDescriptor(&ctc));
    EXPECT_NOT_IMPLEMENTED("miopenCreateSeqTensorDescriptor", miopenCreateSeqTensorDescriptor(&seq));
    EXPECT_NOT_IMPLEMENTED("miopenBackendCreateDescriptor",
                           miopenBackendCreateDescriptor(MIOPEN_BACKEND_TENSOR_DESCRIPTOR, &graph));
    EXPECT_NOT_IMPLEMENTED("miopenGLUForward", miopenGLUForward(h, x, in, x, out, 1));
    EXPECT_NOT_IMPLEMENTED("miopenLayerNormForward",
                           miopenLayerNormForward(h, MIOPEN_ELEMENTWISE_AFFINE, x, in, x, in, x, in, 1e-5f, 1,
                                                  x, out, x, out, x, out));
    for(i = 0; i < 24; i++)
        REQUIRE(out[i] == -1.0f);

    /* LRN: the descriptor calls work; the computation is not implemented. */
    CHECK(miopenCreateLRNDescriptor(&lrn));
    CHECK(miopenSetLRNDescriptor(lrn, miopenLRNCrossChannel, 5, 1e-4, 0.75, 2.0));
    EXPECT_NOT_IMPLEMENTED("miopenLRNForward",
                           miopenLRNForward(h, lrn, NULL, x, in, NULL, x, out, false, NULL));
    for(i = 0; i < 24; i++)
        REQUIRE(out[i] == -1.0f);

    /* Destroying what was never created is a no-op, as for every conflux object. */
    CHECK(miopenDestroyRNNDescriptor(rnn));
    CHECK(miopenDestroyDropoutDescriptor(drop));
    CHECK(miopenDestroyReduceTensorDescriptor(red));
    CHECK(miopenDestroyCTCLossDescriptor(ctc));
    CHECK(miopenDestroySeqTensorDescriptor(seq));
    CHECK(miopenBackendDestroyDescriptor(graph));
    CHECK(miopenDestroyLRNDescriptor(lrn));
    CHECK(miopenDestroyTensorDescriptor(x));
    CHECK(miopenDestroy(h));
    printf("not_implemented: ok\n");
    return 0;
}
