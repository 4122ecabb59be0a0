/*
 * conflux: miopen_reduce.h — tensor reductions.
 *
 * Declared so that programs using these calls compile and link against libMIOpen unchanged.
 * conflux does not compute them: every function here returns miopenStatusNotImplemented,
 * writes none of its outputs, and leaves a reason naming the function for
 * confluxGetLastErrorMessage(). Enum values are MIOpen's.
 *
 * Included by <miopen/miopen.h>; include that header, not this one.
 */
#ifndef CONFLUX_MIOPEN_REDUCE_H_
#define CONFLUX_MIOPEN_REDUCE_H_

#include <miopen/miopen.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Tensor reductions (miopenReduceTensor) ---- */

#define MIOPEN_API_VERSION_REDUCE_TENSOR 1

typedef struct miopenReduceTensorDescriptor* miopenReduceTensorDescriptor_t;

typedef enum
{
    MIOPEN_REDUCE_TENSOR_ADD = 0,
    MIOPEN_REDUCE_TENSOR_MUL = 1,
    MIOPEN_REDUCE_TENSOR_MIN = 2,
    MIOPEN_REDUCE_TENSOR_MAX = 3,
    MIOPEN_REDUCE_TENSOR_AMAX = 4,
    MIOPEN_REDUCE_TENSOR_AVG = 5,
    MIOPEN_REDUCE_TENSOR_NORM1 = 6,
    MIOPEN_REDUCE_TENSOR_NORM2 = 7,
} miopenReduceTensorOp_t;

typedef enum
{
    MIOPEN_NOT_PROPAGATE_NAN = 0,
    MIOPEN_PROPAGATE_NAN = 1,
} miopenNanPropagation_t;

typedef enum
{
    MIOPEN_REDUCE_TENSOR_NO_INDICES = 0,
    MIOPEN_REDUCE_TENSOR_FLATTENED_INDICES = 1,
} miopenReduceTensorIndices_t;

typedef enum
{
    MIOPEN_32BIT_INDICES = 0,
    MIOPEN_64BIT_INDICES = 1,
    MIOPEN_16BIT_INDICES = 2,
    MIOPEN_8BIT_INDICES = 3,
} miopenIndicesType_t;

MIOPEN_EXPORT miopenStatus_t miopenCreateReduceTensorDescriptor(
    miopenReduceTensorDescriptor_t* reduceTensorDesc);

MIOPEN_EXPORT miopenStatus_t miopenDestroyReduceTensorDescriptor(
    miopenReduceTensorDescriptor_t reduceTensorDesc);

MIOPEN_EXPORT miopenStatus_t miopenSetReduceTensorDescriptor(
    miopenReduceTensorDescriptor_t reduceTensorDesc,
    miopenReduceTensorOp_t reduceTensorOp,
    miopenDataType_t reduceTensorCompType,
    miopenNanPropagation_t reduceTensorNanOpt,
    miopenReduceTensorIndices_t reduceTensorIndices,
    miopenIndicesType_t reduceTensorIndicesType);

MIOPEN_EXPORT miopenStatus_t miopenGetReduceTensorDescriptor(
    const miopenReduceTensorDescriptor_t reduceTensorDesc,
    miopenReduceTensorOp_t* reduceTensorOp,
    miopenDataType_t* reduceTensorCompType,
    miopenNanPropagation_t* reduceTensorNanOpt,
    miopenReduceTensorIndices_t* reduceTensorIndices,
    miopenIndicesType_t* reduceTensorIndicesType);

MIOPEN_EXPORT miopenStatus_t miopenGetReductionIndicesSize(
    miopenHandle_t handle,
    const miopenReduceTensorDescriptor_t reduceTensorDesc,
    const miopenTensorDescriptor_t aDesc,
    const miopenTensorDescriptor_t cDesc,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenGetReductionWorkspaceSize(
    miopenHandle_t handle,
    const miopenReduceTensorDescriptor_t reduceTensorDesc,
    const miopenTensorDescriptor_t aDesc,
    const miopenTensorDescriptor_t cDesc,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenReduceTensor(
    miopenHandle_t handle,
    const miopenReduceTensorDescriptor_t reduceTensorDesc,
    void* indices,
    size_t indicesSizeInBytes,
    void* workspace,
    size_t workspaceSizeInBytes,
    const void* alpha,
    const miopenTensorDescriptor_t aDesc,
    const void* A,
    const void* beta,
    const miopenTensorDescriptor_t cDesc,
    void* C);

/* ---- Single-dimension reductions (beta) ---- */

#ifdef MIOPEN_BETA_API

typedef enum
{
    MIOPEN_REDUCE_CALCULATION_NOT_PROPAGATE_NAN = 0,
    MIOPEN_REDUCE_CALCULATION_PROPAGATE_NAN = 1,
} miopenReduceCalculationNanPropagation_t;

typedef enum
{
    MIOPEN_REDUCE_CALCULATION_PROD = 1,
    MIOPEN_REDUCE_CALCULATION_SUM = 2,
} miopenReduceCalculationOp_t;

MIOPEN_EXPORT miopenStatus_t miopenGetReduceCalculationWorkspaceSize(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t xDesc,
    const int32_t dim,
    const miopenReduceCalculationOp_t reduceCalculationOp,
    const miopenTensorDescriptor_t reduceDesc,
    size_t* sizeInBytes);

MIOPEN_EXPORT miopenStatus_t miopenReduceCalculationForward(
    miopenHandle_t handle,
    miopenReduceCalculationNanPropagation_t nanPropagation,
    void* workspace,
    size_t workspaceSizeInBytes,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const int32_t dim,
    const miopenReduceCalculationOp_t reduceCalculationOp,
    const miopenTensorDescriptor_t reduceDesc,
    void* y);

#endif

#ifdef MIOPEN_BETA_API

typedef enum
{
    MIOPEN_REDUCE_EXTREME_ARGMIN = 1,
    MIOPEN_REDUCE_EXTREME_ARGMAX = 2,
    MIOPEN_REDUCE_EXTREME_MIN = 3,
    MIOPEN_REDUCE_EXTREME_MAX = 4,
} miopenReduceExtremeOp_t;

MIOPEN_EXPORT miopenStatus_t miopenReduceExtremeForward(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t xDesc,
    const void* x,
    const int32_t dim,
    const miopenReduceExtremeOp_t reduceExtremeOp,
    const miopenTensorDescriptor_t yDesc,
    void* y,
    const miopenTensorDescriptor_t indiceDesc,
    void* indice);

#endif

#ifdef __cplusplus
}
#endif

#endif /* CONFLUX_MIOPEN_REDUCE_H_ */
