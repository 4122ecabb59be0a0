/*
 * conflux: miopen_layers.h — pooling, local response normalization (LRN) and softmax.
 *
 * What conflux computes here, on the CPU and CUDA backends, for float, half and bfloat16
 * tensors (double too on the CPU), in any strides (NCHW, NHWC, padded rows):
 *   - Pooling: max, average (padding excluded from the divisor) and inclusive average (the
 *     divisor is the whole window), 2-D (4-D tensors) and 3-D (5-D tensors), any window,
 *     padding and stride. Max pooling with do_backward records the position of each maximum
 *     in the workspace, in either index mode (Mask: inside the window; Image: inside the input
 *     plane or volume; both for 2-D and 3-D) and any index type; backward reads them.
 *   - Softmax: Fast, Accurate and Log algorithms, Instance and Channel modes, forward and
 *     backward; tensors of 2 to 5 dimensions (N, C, then spatial).
 *   - LRN: see the LRN section below.
 * alpha and beta (host floats; NULL reads as 1 and 0) are honoured by every call:
 * out = alpha * result + beta * out, and beta = 0 never reads out. (MIOpen accepts only
 * alpha = 1, beta = 0 for pooling.)
 *
 * Included by <miopen/miopen.h>; include that header, not this one.
 */
#ifndef CONFLUX_MIOPEN_LAYERS_H_
#define CONFLUX_MIOPEN_LAYERS_H_

#include <miopen/miopen.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct miopenPoolingDescriptor* miopenPoolingDescriptor_t;
typedef struct miopenLRNDescriptor* miopenLRNDescriptor_t;

/* ---- Pooling ---- */

/* Unsigned type of the indices max pooling records. */
typedef enum
{
    miopenIndexUint8  = 0,
    miopenIndexUint16 = 1,
    miopenIndexUint32 = 2,
    miopenIndexUint64 = 3,
} miopenIndexType_t;

typedef enum
{
    miopenPoolingMax              = 0,
    miopenPoolingAverage          = 1, /* divides by the window positions inside the input */
    miopenPoolingAverageInclusive = 2, /* divides by the whole window, padding included */
} miopenPoolingMode_t;

typedef enum
{
    miopenPoolingWorkspaceIndexMask  = 0, /* (kd * KH + kh) * KW + kw inside the window */
    miopenPoolingWorkspaceIndexImage = 1, /* (d * H + h) * W + w inside the input */
} miopenPoolingWorkspaceIndexMode_t;

/* A new descriptor is unset: set it with miopenSet2dPoolingDescriptor or
 * miopenSetNdPoolingDescriptor before use. */
MIOPEN_EXPORT miopenStatus_t miopenCreatePoolingDescriptor(miopenPoolingDescriptor_t* poolDesc);

/* The index type starts as miopenIndexUint8. Forward and backward refuse (BadParm) an index
 * type too narrow for the positions it must number (its largest value is reserved). */
MIOPEN_EXPORT miopenStatus_t miopenSetPoolingIndexType(miopenPoolingDescriptor_t poolDesc,
                                                       miopenIndexType_t index_type);

MIOPEN_EXPORT miopenStatus_t miopenGetPoolingIndexType(miopenPoolingDescriptor_t poolDesc,
                                                       miopenIndexType_t* index_type);

/* Setting the window (2-D or N-D) resets the mode to Mask for 2-D and Image for 3-D;
 * set the index mode afterwards. */
MIOPEN_EXPORT miopenStatus_t miopenSetPoolingWorkSpaceIndexMode(
    miopenPoolingDescriptor_t poolDesc, miopenPoolingWorkspaceIndexMode_t workspace_index);

MIOPEN_EXPORT miopenStatus_t miopenGetPoolingWorkSpaceIndexMode(
    miopenPoolingDescriptor_t poolDesc, miopenPoolingWorkspaceIndexMode_t* workspace_index);

/* Windows and strides >= 1, pads >= 0 (else BadParm, descriptor unchanged). As in MIOpen,
 * setting the window also resets the index type (8-bit) and the index mode. */
MIOPEN_EXPORT miopenStatus_t miopenSet2dPoolingDescriptor(miopenPoolingDescriptor_t poolDesc,
                                                          miopenPoolingMode_t mode,
                                                          int windowHeight,
                                                          int windowWidth,
                                                          int pad_h,
                                                          int pad_w,
                                                          int stride_h,
                                                          int stride_w);

/* BadParm for a descriptor that is not 2-D. All outputs required. */
MIOPEN_EXPORT miopenStatus_t miopenGet2dPoolingDescriptor(const miopenPoolingDescriptor_t poolDesc,
                                                          miopenPoolingMode_t* mode,
                                                          int* windowHeight,
                                                          int* windowWidth,
                                                          int* pad_h,
                                                          int* pad_w,
                                                          int* stride_h,
                                                          int* stride_w);

/* Output of a 2-D pooling of the 4-D tensor: N, C, then per spatial dimension
 * max(1, (in + 2 * pad - window) / stride + 1). */
MIOPEN_EXPORT miopenStatus_t
miopenGetPoolingForwardOutputDim(const miopenPoolingDescriptor_t poolDesc,
                                 const miopenTensorDescriptor_t tensorDesc,
                                 int* n,
                                 int* c,
                                 int* h,
                                 int* w);

/* nbDims 2 or 3. */
MIOPEN_EXPORT miopenStatus_t miopenSetNdPoolingDescriptor(miopenPoolingDescriptor_t poolDesc,
                                                          const miopenPoolingMode_t mode,
                                                          int nbDims,
                                                          const int* windowDimA,
                                                          const int* padA,
                                                          const int* stridesA);

/* Writes min(nbDimsRequested, dimensions) entries of each array given (NULL outputs are
 * skipped). */
MIOPEN_EXPORT miopenStatus_t miopenGetNdPoolingDescriptor(const miopenPoolingDescriptor_t poolDesc,
                                                          int nbDimsRequested,
                                                          miopenPoolingMode_t* mode,
                                                          int* nbDims,
                                                          int* windowDimA,
                                                          int* padA,
                                                          int* stridesA);

/* dims must be the tensor's dimension count (4 or 5). */
MIOPEN_EXPORT miopenStatus_t
miopenGetPoolingNdForwardOutputDim(const miopenPoolingDescriptor_t poolDesc,
                                   const miopenTensorDescriptor_t tensorDesc,
                                   int dims,
                                   int* tensorDimArr);

/* One byte per element of y (8-bit indices), whatever the descriptor says: prefer
 * miopenPoolingGetWorkSpaceSizeV2. */
MIOPEN_EXPORT miopenStatus_t miopenPoolingGetWorkSpaceSize(const miopenTensorDescriptor_t yDesc,
                                                           size_t* workSpaceSize);

/* Max pooling: one index of the descriptor's type per element of y (stored packed in
 * N, C, (D,) H, W order, whatever y's layout); average pooling: 0. */
MIOPEN_EXPORT miopenStatus_t
miopenPoolingGetWorkSpaceSizeV2(const miopenPoolingDescriptor_t poolDesc,
                                const miopenTensorDescriptor_t yDesc,
                                size_t* workSpaceSize);

/* y must have the lengths miopenGetPoolingNdForwardOutputDim gives, and x's type. With
 * do_backward, max pooling writes the indices to workSpace (workSpaceSize bytes, at least
 * miopenPoolingGetWorkSpaceSizeV2's; else BadParm and nothing is written). Max pooling
 * ignores NaN inputs and keeps the first maximum of a window. */
MIOPEN_EXPORT miopenStatus_t miopenPoolingForward(miopenHandle_t handle,
                                                  const miopenPoolingDescriptor_t poolDesc,
                                                  const void* alpha,
                                                  const miopenTensorDescriptor_t xDesc,
                                                  const void* x,
                                                  const void* beta,
                                                  const miopenTensorDescriptor_t yDesc,
                                                  void* y,
                                                  bool do_backward,
                                                  void* workSpace,
                                                  size_t workSpaceSize);

/* dx from dy. y and x (the forward output and input) are checked by descriptor and not
 * read (may be NULL). Max pooling reads the indices its forward wrote with do_backward
 * (workSpace required, with the same descriptor settings); average pooling reads no
 * workspace. */
MIOPEN_EXPORT miopenStatus_t miopenPoolingBackward(miopenHandle_t handle,
                                                   const miopenPoolingDescriptor_t poolDesc,
                                                   const void* alpha,
                                                   const miopenTensorDescriptor_t yDesc,
                                                   const void* y,
                                                   const miopenTensorDescriptor_t dyDesc,
                                                   const void* dy,
                                                   const miopenTensorDescriptor_t xDesc,
                                                   const void* x,
                                                   const void* beta,
                                                   const miopenTensorDescriptor_t dxDesc,
                                                   void* dx,
                                                   void* workSpace);

MIOPEN_EXPORT miopenStatus_t miopenDestroyPoolingDescriptor(miopenPoolingDescriptor_t poolDesc);

/* ---- Local response normalization ----
 * The descriptor calls work (set, get, destroy). conflux does not compute LRN yet:
 * miopenLRNGetWorkSpaceSize, miopenLRNForward and miopenLRNBackward return
 * miopenStatusNotImplemented, write none of their outputs, and leave a reason for
 * confluxGetLastErrorMessage(). */

typedef enum
{
    miopenLRNWithinChannel = 0,
    miopenLRNCrossChannel  = 1,
} miopenLRNMode_t;

MIOPEN_EXPORT miopenStatus_t miopenCreateLRNDescriptor(miopenLRNDescriptor_t* lrnDesc);

/* lrnN: the window's width (odd, >= 1). */
MIOPEN_EXPORT miopenStatus_t miopenSetLRNDescriptor(const miopenLRNDescriptor_t lrnDesc,
                                                    miopenLRNMode_t mode,
                                                    unsigned int lrnN,
                                                    double lrnAlpha,
                                                    double lrnBeta,
                                                    double lrnK);

/* All outputs required. */
MIOPEN_EXPORT miopenStatus_t miopenGetLRNDescriptor(const miopenLRNDescriptor_t lrnDesc,
                                                    miopenLRNMode_t* mode,
                                                    unsigned int* lrnN,
                                                    double* lrnAlpha,
                                                    double* lrnBeta,
                                                    double* lrnK);

MIOPEN_EXPORT miopenStatus_t miopenLRNGetWorkSpaceSize(const miopenTensorDescriptor_t yDesc,
                                                       size_t* workSpaceSize);

MIOPEN_EXPORT miopenStatus_t miopenLRNForward(miopenHandle_t handle,
                                              const miopenLRNDescriptor_t lrnDesc,
                                              const void* alpha,
                                              const miopenTensorDescriptor_t xDesc,
                                              const void* x,
                                              const void* beta,
                                              const miopenTensorDescriptor_t yDesc,
                                              void* y,
                                              bool do_backward,
                                              void* workSpace);

MIOPEN_EXPORT miopenStatus_t miopenLRNBackward(miopenHandle_t handle,
                                               const miopenLRNDescriptor_t lrnDesc,
                                               const void* alpha,
                                               const miopenTensorDescriptor_t yDesc,
                                               const void* y,
                                               const miopenTensorDescriptor_t dyDesc,
                                               const void* dy,
                                               const miopenTensorDescriptor_t xDesc,
                                               const void* x,
                                               const void* beta,
                                               const miopenTensorDescriptor_t dxDesc,
                                               void* dx,
                                               const void* workSpace);

MIOPEN_EXPORT miopenStatus_t miopenDestroyLRNDescriptor(miopenLRNDescriptor_t lrnDesc);

/* ---- Softmax ---- */

typedef enum
{
    MIOPEN_SOFTMAX_FAST     = 0, /* exp(x) / sum exp(x), x as given */
    MIOPEN_SOFTMAX_ACCURATE = 1, /* the maximum subtracted first: no overflow */
    MIOPEN_SOFTMAX_LOG      = 2, /* log-softmax */
} miopenSoftmaxAlgorithm_t;

typedef enum
{
    MIOPEN_SOFTMAX_MODE_INSTANCE = 0, /* over C, (D,) H, W of each image */
    MIOPEN_SOFTMAX_MODE_CHANNEL  = 1, /* over C at each pixel of each image */
} miopenSoftmaxMode_t;

/* Accurate, Channel mode. x and y: equal lengths and types (strides may differ). */
MIOPEN_EXPORT miopenStatus_t miopenSoftmaxForward(miopenHandle_t handle,
                                                  const void* alpha,
                                                  const miopenTensorDescriptor_t xDesc,
                                                  const void* x,
                                                  const void* beta,
                                                  const miopenTensorDescriptor_t yDesc,
                                                  void* y);

/* Accurate, Channel mode. dx = y * (dy - sum(dy * y)); y is the forward output. */
MIOPEN_EXPORT miopenStatus_t miopenSoftmaxBackward(miopenHandle_t handle,
                                                   const void* alpha,
                                                   const miopenTensorDescriptor_t yDesc,
                                                   const void* y,
                                                   const miopenTensorDescriptor_t dyDesc,
                                                   const void* dy,
                                                   const void* beta,
                                                   const miopenTensorDescriptor_t dxDesc,
                                                   void* dx);

MIOPEN_EXPORT miopenStatus_t miopenSoftmaxForward_V2(miopenHandle_t handle,
                                                     const void* alpha,
                                                     const miopenTensorDescriptor_t xDesc,
                                                     const void* x,
                                                     const void* beta,
                                                     const miopenTensorDescriptor_t yDesc,
                                                     void* y,
                                                     miopenSoftmaxAlgorithm_t algorithm,
                                                     miopenSoftmaxMode_t mode);

/* Log: dx = dy - exp(y) * sum(dy), y being the log-softmax output. */
MIOPEN_EXPORT miopenStatus_t miopenSoftmaxBackward_V2(miopenHandle_t handle,
                                                      const void* alpha,
                                                      const miopenTensorDescriptor_t yDesc,
                                                      const void* y,
                                                      const miopenTensorDescriptor_t dyDesc,
                                                      const void* dy,
                                                      const void* beta,
                                                      const miopenTensorDescriptor_t dxDesc,
                                                      void* dx,
                                                      miopenSoftmaxAlgorithm_t algorithm,
                                                      miopenSoftmaxMode_t mode);

#ifdef __cplusplus
}
#endif

#endif /* CONFLUX_MIOPEN_LAYERS_H_ */
