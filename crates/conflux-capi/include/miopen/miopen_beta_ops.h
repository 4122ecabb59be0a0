/*
 * conflux: miopen_beta_ops.h — MIOpen's beta operators outside convolution networks' layers.
 *
 * Declared so that programs using these calls compile and link against libMIOpen unchanged.
 * conflux does not compute them: every function here returns miopenStatusNotImplemented,
 * writes none of its outputs, and leaves a reason naming the function for
 * confluxGetLastErrorMessage(). Enum values are MIOpen's.
 *
 * Included by <miopen/miopen.h>; include that header, not this one.
 */
#ifndef CONFLUX_MIOPEN_BETA_OPS_H_
#define CONFLUX_MIOPEN_BETA_OPS_H_

#include <miopen/miopen.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MIOpen gives a few beta calls default arguments, which only C++ has. */
#ifdef __cplusplus
#define CONFLUX_DEFAULT_ARG(value) = value
#else
#define CONFLUX_DEFAULT_ARG(value)
#endif

/* ---- Normalizations other than batch norm (beta) ---- */

#ifdef MIOPEN_BETA_API

typedef enum
{
    MIOPEN_ELEMENTWISE_AFFINE = 0,
    MIOPEN_WEIGHT_BIAS = 1,
    MIOPEN_ELEMENTWISE_AFFINE_FUSED_ADD = 2,
    MIOPEN_WEIGHT_BIAS_FUSED_ADD = 3,
    MIOPEN_ELEMENTWISE_AFFINE_T5 = 4,
    MIOPEN_WEIGHT_BIAS_T5 = 5,
} miopenNormMode_t;

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenLayerNormForward(
    miopenHandle_t handle,
    miopenNormMode_t mode,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const miopenTensorDescriptor_t weightDesc,
    const void* weight,
    const miopenTensorDescriptor_t biasDesc,
    const void* bias,
    const float epsilon,
    const int32_t normalized_dim,
    const miopenTensorDescriptor_t yDesc,
    void* y,
    const miopenTensorDescriptor_t meanDesc,
    void* mean,
    const miopenTensorDescriptor_t rstdDesc,
    void* rstd);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenCatForward(
    miopenHandle_t handle,
    const int32_t xCount,
    const miopenTensorDescriptor_t* xDescs,
    const void* const* xs,
    const miopenTensorDescriptor_t yDesc,
    void* y,
    const int32_t dim);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenGroupNormForward(
    miopenHandle_t handle,
    miopenNormMode_t mode,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const miopenTensorDescriptor_t weightDesc,
    const void* weight,
    const miopenTensorDescriptor_t biasDesc,
    const void* bias,
    const uint64_t num_groups,
    const float epsilon,
    const miopenTensorDescriptor_t yDesc,
    void* y,
    const miopenTensorDescriptor_t meanDesc,
    void* mean,
    const miopenTensorDescriptor_t rstdDesc,
    void* rstd);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenAddLayerNormForward(
    miopenHandle_t handle,
    miopenNormMode_t mode,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const miopenTensorDescriptor_t x2Desc,
    const void* x2,
    const miopenTensorDescriptor_t weightDesc,
    const void* weight,
    const miopenTensorDescriptor_t biasDesc,
    const void* bias,
    const float epsilon,
    const int32_t normalized_dim,
    const miopenTensorDescriptor_t yDesc,
    void* y,
    const miopenTensorDescriptor_t meanDesc,
    void* mean,
    const miopenTensorDescriptor_t rstdDesc,
    void* rstd);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenT5LayerNormForward(
    miopenHandle_t handle,
    miopenNormMode_t mode,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const miopenTensorDescriptor_t weightDesc,
    const void* weight,
    const float epsilon,
    const miopenTensorDescriptor_t yDesc,
    void* y,
    const miopenTensorDescriptor_t rstdDesc,
    void* rstd);

MIOPEN_EXPORT miopenStatus_t miopenGetT5LayerNormBackwardWorkspaceSize(
    miopenHandle_t handle,
    miopenNormMode_t mode,
    const miopenTensorDescriptor_t dyDesc,
    const miopenTensorDescriptor_t xDesc,
    const miopenTensorDescriptor_t weightDesc,
    const miopenTensorDescriptor_t rstdDesc,
    const miopenTensorDescriptor_t dxDesc,
    const miopenTensorDescriptor_t dwDesc,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenT5LayerNormBackward(
    miopenHandle_t handle,
    miopenNormMode_t mode,
    void* workspace,
    size_t workspaceSizeInBytes,
    const miopenTensorDescriptor_t dyDesc,
    const void* dy,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const miopenTensorDescriptor_t weightDesc,
    const void* weight,
    const miopenTensorDescriptor_t rstdDesc,
    const void* rstd,
    const miopenTensorDescriptor_t dxDesc,
    void* dx,
    const miopenTensorDescriptor_t dwDesc,
    void* dw);

#endif

/* ---- Gated linear unit (beta) ---- */

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenGLUForward(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t inputDesc,
    const void* input,
    const miopenTensorDescriptor_t outputDesc,
    void* output,
    const uint32_t dim);

MIOPEN_EXPORT miopenStatus_t miopenGLUBackward(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t inputDesc,
    const void* input,
    const miopenTensorDescriptor_t outputGradDesc,
    const void* outputGrad,
    const miopenTensorDescriptor_t inputGradDesc,
    void* inputGrad,
    const uint32_t dim);

#endif

/* ---- Optimizers, indexing, rotary embeddings, k-th value, PReLU, losses (beta) ---- */

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenFusedAdam(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t paramDesc,
    void* param,
    const miopenTensorDescriptor_t gradDesc,
    const void* grad,
    const miopenTensorDescriptor_t expAvgDesc,
    void* expAvg,
    const miopenTensorDescriptor_t expAvgSqDesc,
    void* expAvgSq,
    const miopenTensorDescriptor_t maxExpAvgSqDesc,
    void* maxExpAvgSq,
    const miopenTensorDescriptor_t stateStepDesc,
    void* stateStep,
    const unsigned int state_step,
    const float lr,
    const float beta1,
    const float beta2,
    const float weight_decay,
    const float eps,
    const bool amsgrad,
    const bool maximize,
    const bool adamw,
    const miopenTensorDescriptor_t gradScaleDesc,
    const void* gradScale,
    const miopenTensorDescriptor_t foundInfDesc,
    const void* foundInf);

MIOPEN_EXPORT miopenStatus_t miopenFusedAdamWithOutput(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t paramInDesc,
    void* paramIn,
    const miopenTensorDescriptor_t paramOutDesc,
    void* paramOut,
    const miopenTensorDescriptor_t paramOutFloat16Desc,
    void* paramOutFloat16,
    const miopenTensorDescriptor_t gradInDesc,
    const void* gradIn,
    const miopenTensorDescriptor_t expAvgInDesc,
    void* expAvgIn,
    const miopenTensorDescriptor_t expAvgOutDesc,
    void* expAvgOut,
    const miopenTensorDescriptor_t expAvgSqInDesc,
    void* expAvgSqIn,
    const miopenTensorDescriptor_t expAvgSqOutDesc,
    void* expAvgSqOut,
    const miopenTensorDescriptor_t maxExpAvgSqInDesc,
    void* maxExpAvgSqIn,
    const miopenTensorDescriptor_t maxExpAvgSqOutDesc,
    void* maxExpAvgSqOut,
    const miopenTensorDescriptor_t stateStepInDesc,
    void* stateStepIn,
    const miopenTensorDescriptor_t stateStepOutDesc,
    void* stateStepOut,
    const unsigned int state_step,
    const float lr,
    const float beta1,
    const float beta2,
    const float weight_decay,
    const float eps,
    const bool amsgrad,
    const bool maximize,
    const bool adamw,
    const miopenTensorDescriptor_t gradScaleDesc,
    const void* gradScale,
    const miopenTensorDescriptor_t foundInfDesc,
    const void* foundInf);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenTransformersAdamW(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t paramDesc,
    void* param,
    const miopenTensorDescriptor_t gradDesc,
    const void* grad,
    const miopenTensorDescriptor_t expAvgDesc,
    void* expAvg,
    const miopenTensorDescriptor_t expAvgSqDesc,
    void* expAvgSq,
    const miopenTensorDescriptor_t stateStepDesc,
    void* stateStep,
    const unsigned int state_step,
    const float lr,
    const float beta1,
    const float beta2,
    const float weight_decay,
    const float eps,
    const bool correct_bias,
    const miopenTensorDescriptor_t gradScaleDesc,
    const void* gradScale,
    const miopenTensorDescriptor_t foundInfDesc,
    const void* foundInf);

MIOPEN_EXPORT miopenStatus_t miopenTransformersAdamWWithOutput(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t paramInDesc,
    void* paramIn,
    const miopenTensorDescriptor_t paramOutDesc,
    void* paramOut,
    const miopenTensorDescriptor_t paramOutFloat16Desc,
    void* paramOutFloat16,
    const miopenTensorDescriptor_t gradInDesc,
    const void* gradIn,
    const miopenTensorDescriptor_t expAvgInDesc,
    void* expAvgIn,
    const miopenTensorDescriptor_t expAvgOutDesc,
    void* expAvgOut,
    const miopenTensorDescriptor_t expAvgSqInDesc,
    void* expAvgSqIn,
    const miopenTensorDescriptor_t expAvgSqOutDesc,
    void* expAvgSqOut,
    const miopenTensorDescriptor_t stateStepInDesc,
    void* stateStepIn,
    const miopenTensorDescriptor_t stateStepOutDesc,
    void* stateStepOut,
    const unsigned int state_step,
    const float lr,
    const float beta1,
    const float beta2,
    const float weight_decay,
    const float eps,
    const float step_size,
    const bool correct_bias,
    const miopenTensorDescriptor_t gradScaleDesc,
    const void* gradScale,
    const miopenTensorDescriptor_t foundInfDesc,
    const void* foundInf);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenGetGetitemWorkspaceSize(
    miopenHandle_t handle,
    uint32_t indexCount,
    const miopenTensorDescriptor_t* indexDescs,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenGetitemBackward(
    miopenHandle_t handle,
    void* workspace,
    size_t workspaceSizeInBytes,
    const miopenTensorDescriptor_t dyDesc,
    const void* dy,
    uint32_t indexCount,
    const miopenTensorDescriptor_t* indexDescs,
    const void* const* indexs,
    const miopenTensorDescriptor_t dxDesc,
    void* dx,
    const miopenTensorDescriptor_t errorDesc,
    void* error,
    uint32_t dimCount,
    const int32_t* dims,
    uint32_t sliceCount,
    const int32_t* slices,
    uint32_t offset);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenRoPEForward(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const miopenTensorDescriptor_t cosDesc,
    const void* cos,
    const miopenTensorDescriptor_t sinDesc,
    const void* sin,
    const miopenTensorDescriptor_t yDesc,
    void* y);

MIOPEN_EXPORT miopenStatus_t miopenRoPEBackward(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t dyDesc,
    const void* dy,
    const miopenTensorDescriptor_t cosDesc,
    const void* cos,
    const miopenTensorDescriptor_t sinDesc,
    const void* sin,
    const miopenTensorDescriptor_t dxDesc,
    void* dx);

MIOPEN_EXPORT miopenStatus_t miopenKthvalueForward(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    const void* input,
    miopenTensorDescriptor_t outputDesc,
    void* output,
    miopenTensorDescriptor_t indicesDesc,
    size_t* indices,
    size_t k,
    int32_t dim CONFLUX_DEFAULT_ARG(-1),
    bool keepDim CONFLUX_DEFAULT_ARG(false));

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenGetPReLUBackwardWorkspaceSize(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    miopenTensorDescriptor_t weightDesc,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenPReLUBackward(
    miopenHandle_t handle,
    void* workspace,
    size_t workspaceSizeInBytes,
    miopenTensorDescriptor_t inputDesc,
    const void* input,
    miopenTensorDescriptor_t weightDesc,
    const void* weight,
    miopenTensorDescriptor_t doutputDesc,
    const void* doutput,
    miopenTensorDescriptor_t dinputDesc,
    void* dinput,
    miopenTensorDescriptor_t dweightDesc,
    void* dweight);

#endif

#ifdef MIOPEN_BETA_API

typedef enum
{
    MIOPEN_LOSS_REDUCTION_NONE = 0,
    MIOPEN_LOSS_REDUCTION_SUM = 1,
    MIOPEN_LOSS_REDUCTION_MEAN = 2,
} miopenLossReductionMode_t;

MIOPEN_EXPORT miopenStatus_t miopenGetSoftMarginLossForwardWorkspaceSize(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    miopenTensorDescriptor_t targetDesc,
    miopenTensorDescriptor_t outputDesc,
    miopenLossReductionMode_t reduction,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenSoftMarginLossForward(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    const void* input,
    miopenTensorDescriptor_t targetDesc,
    const void* target,
    miopenTensorDescriptor_t outputDesc,
    void* output,
    miopenLossReductionMode_t reduction,
    void* workspace CONFLUX_DEFAULT_ARG(NULL),
    size_t workspaceSizeInBytes CONFLUX_DEFAULT_ARG(0));

MIOPEN_EXPORT miopenStatus_t miopenSoftMarginLossBackward(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    const void* input,
    miopenTensorDescriptor_t targetDesc,
    const void* target,
    miopenTensorDescriptor_t doutputDesc,
    const void* doutput,
    miopenTensorDescriptor_t dinputDesc,
    void* dinput,
    miopenLossReductionMode_t reduction);

#endif

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenGetMultiMarginLossForwardWorkspaceSize(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    miopenTensorDescriptor_t targetDesc,
    miopenTensorDescriptor_t weightDesc,
    miopenTensorDescriptor_t outputDesc,
    long p,
    float margin,
    miopenLossReductionMode_t reduction,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenMultiMarginLossForward(
    miopenHandle_t handle,
    miopenTensorDescriptor_t inputDesc,
    const void* input,
    miopenTensorDescriptor_t targetDesc,
    const void* target,
    miopenTensorDescriptor_t weightDesc,
    const void* weight,
    miopenTensorDescriptor_t outputDesc,
    void* output,
    long p,
    float margin,
    miopenLossReductionMode_t reduction,
    void* workspace,
    size_t workspaceSizeInBytes);

#endif

#ifdef __cplusplus
}
#endif

#endif /* CONFLUX_MIOPEN_BETA_OPS_H_ */
