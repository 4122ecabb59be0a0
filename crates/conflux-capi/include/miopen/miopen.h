/*
 * conflux: miopen.h — MIOpen's C API for convolution, activation, batch normalization and
 * kernel fusion, implemented by conflux (libMIOpen.so / libMIOpen.a).
 *
 * Names, signatures, enum values and struct layouts are MIOpen's, so programs written
 * against MIOpen compile unchanged; the text of this header is conflux's own.
 *
 * Memory model
 *   - CPU backend: every data pointer (tensors, workspace, BN parameters) is a host pointer.
 *   - CUDA backend: every data pointer is a CUDA device pointer (CUdeviceptr), work is
 *     queued on the handle's stream, and miopenCreateWithStream / miopenSetStream take a
 *     CUstream / cudaStream_t (borrowed, never destroyed by conflux).
 *   miopenCreate picks the backend: GPU 0 when a CUDA driver and a GPU are present, else
 *   the CPU; the environment variable CONFLUX_DEVICE=cpu|cuda|cuda:N forces the choice.
 *   Scalars (alpha, beta) are always host pointers to float (double for Double tensors).
 *
 * Errors
 *   Every function returns a miopenStatus_t (miopenGetErrorString: a const char*). NULL
 *   handles, descriptors and required outputs give miopenStatusBadParm, as do enum values
 *   MIOpen does not define. Destroying NULL succeeds. Where MIOpen reports a failure as
 *   miopenStatusUnknownError only, conflux returns the precise status, and the reason of
 *   the last failure on the calling thread is available from confluxGetLastErrorMessage()
 *   (see the extension section at the end).
 *
 * Thread safety: as MIOpen — a handle or descriptor must not be modified by two threads
 * at once; a compiled fusion plan may be executed from several threads.
 */
#ifndef MIOPEN_GUARD_MIOPEN_H_
#define MIOPEN_GUARD_MIOPEN_H_

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <miopen/config.h>
#include <miopen/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The anonymous union of miopenConvAlgoPerf_t is C11 / C++; mark it for C99 compilers. */
#if defined(__GNUC__) && !defined(__cplusplus)
#define MIOPEN_ANONYMOUS_UNION __extension__ union
#else
#define MIOPEN_ANONYMOUS_UNION union
#endif

/* ======================================================================================
 * Opaque objects. Each is a pointer to a library-owned object; create and destroy them
 * with the matching calls.
 * ====================================================================================== */
typedef struct miopenHandle* miopenHandle_t;
typedef struct miopenTensorDescriptor* miopenTensorDescriptor_t;
typedef struct miopenConvolutionDescriptor* miopenConvolutionDescriptor_t;
typedef struct miopenActivationDescriptor* miopenActivationDescriptor_t;
typedef struct miopenFusionPlanDescriptor* miopenFusionPlanDescriptor_t;
/* Owned by its fusion plan; valid until the plan is destroyed. */
typedef struct miopenFusionOpDescriptor* miopenFusionOpDescriptor_t;
typedef struct miopenOperatorArgs* miopenOperatorArgs_t;
/* Declared by MIOpen, used by no function. */
typedef struct miopenOperatorDescriptor* miopenOperatorDescriptor_t;

/* ======================================================================================
 * Status codes
 * ====================================================================================== */
typedef enum
{
    miopenStatusSuccess              = 0,
    miopenStatusNotInitialized       = 1,
    miopenStatusInvalidValue         = 2,  /* NULL array / count <= 0 in array setters */
    miopenStatusBadParm              = 3,  /* bad argument: NULL, unknown enum, shape */
    miopenStatusAllocFailed          = 4,
    miopenStatusInternalError        = 5,  /* includes a caught internal panic */
    miopenStatusNotImplemented       = 6,  /* valid request conflux does not compute */
    miopenStatusUnknownError         = 7,
    miopenStatusUnsupportedOp        = 8,  /* no solver fuses / runs this problem */
    miopenStatusGpuOperationsSkipped = 9,
    miopenStatusVersionMismatch      = 10,
} miopenStatus_t;

/* The enumerator's name ("miopenStatusBadParm"), or "Unknown error status". Static. */
MIOPEN_EXPORT const char* miopenGetErrorString(miopenStatus_t error);

/* ======================================================================================
 * 1a. Handle
 * ====================================================================================== */

/* The MIOpen API level implemented (3.3.0). NULL outputs are skipped. */
MIOPEN_EXPORT miopenStatus_t miopenGetVersion(size_t* major, size_t* minor, size_t* patch);

/* A handle on the default device (see the memory model above) and the default stream. */
MIOPEN_EXPORT miopenStatus_t miopenCreate(miopenHandle_t* handle);

/* A handle whose work is queued on `stream` (borrowed). A CPU handle keeps the stream (returned
   by miopenGetStream) and otherwise ignores it: its calls run on conflux's threads and return
   when done, so a HIP program that creates every handle with a stream runs unchanged. */
MIOPEN_EXPORT miopenStatus_t miopenCreateWithStream(miopenHandle_t* handle,
                                                    miopenAcceleratorQueue_t stream);

MIOPEN_EXPORT miopenStatus_t miopenDestroy(miopenHandle_t handle);

/* Any stream (NULL = default); not thread-safe against work running on the handle. */
MIOPEN_EXPORT miopenStatus_t miopenSetStream(miopenHandle_t handle,
                                             miopenAcceleratorQueue_t streamID);

/* The handle's stream (NULL for the default stream; on a CPU handle, the stream it was given). */
MIOPEN_EXPORT miopenStatus_t miopenGetStream(miopenHandle_t handle,
                                             miopenAcceleratorQueue_t* streamID);

typedef void* (*miopenAllocatorFunction)(void* context, size_t sizeBytes);
typedef void (*miopenDeallocatorFunction)(void* context, void* memory);

/* Accepted and stored; conflux asks callers for workspace explicitly and allocates no
 * caller-visible memory, so the allocator is not called today. NULL restores the default. */
MIOPEN_EXPORT miopenStatus_t miopenSetAllocator(miopenHandle_t handle,
                                                miopenAllocatorFunction allocator,
                                                miopenDeallocatorFunction deallocator,
                                                void* allocatorContext);

/* Milliseconds of the last GPU operation run with profiling on (0.0 before any). */
MIOPEN_EXPORT miopenStatus_t miopenGetKernelTime(miopenHandle_t handle, float* time);

/* Time every GPU launch with CUDA events (CPU handles keep reporting 0.0). */
MIOPEN_EXPORT miopenStatus_t miopenEnableProfiling(miopenHandle_t handle, bool enable);

/* ======================================================================================
 * 1b. Data types, layouts, tensor descriptors
 * Lengths are always given and returned in N, C, (D,) H, W order; the layout only decides
 * the strides. Strides must be > 0.
 * ====================================================================================== */
typedef enum
{
    miopenHalf     = 0,
    miopenFloat    = 1,
    miopenInt32    = 2,
    miopenInt8     = 3,
    /* 4 was miopenInt8x4, removed. */
    miopenBFloat16 = 5,
    miopenDouble   = 6,
#ifdef MIOPEN_BETA_API
    miopenFloat8   = 7,
    miopenBFloat8  = 8,
#endif
    miopenInt64    = 9,
} miopenDataType_t;

/* Quantized convolutions (forward only; the CPU computes them, the CUDA backend refuses them
 * with miopenStatusUnsupportedOp for now). Backward directions with these types, transpose
 * forward included, are miopenStatusBadParm.
 *
 * int8: x and w miopenInt8; products summed exactly in int32 (up to 2^17 products per
 * output). y is miopenInt32, miopenFloat, miopenHalf, miopenBFloat16 or miopenInt8. The value
 * v = alpha * sum + beta * y_old is formed in float (beta = 0 never reads y; alpha / beta are
 * float pointers), then a fusion plan's epilogue (bias, batch-norm inference, activation,
 * residual add; their parameters are float/half/bf16) is applied in float, then v is
 * converted: miopenInt8 rounds half to even and saturates to [-128, 127] (NaN gives 0);
 * miopenInt32 stores the exact sum when alpha = 1, beta = 0 and there is no epilogue, else v
 * rounded half to even and saturated. The default output descriptor of an int8 convolution
 * (and so a fusion plan's output) is miopenFloat.
 *
 * fp8: miopenFloat8 is OCP e4m3fn (bias 7, largest finite 448, no infinities, NaN 0x7f/0xff);
 * miopenBFloat8 is e5m2 (bias 15, largest finite 57344, +-inf 0x7c/0xfc, NaN 0x7d-0x7f).
 * x and w may each be either; values are converted exactly to float and summed in float. y is
 * miopenFloat, miopenHalf, miopenBFloat16, miopenFloat8 or miopenBFloat8. Conversion to fp8
 * follows MIOPEN_CONVOLUTION_ATTRIB_FP8_ROUNDING_MODE (below) and saturates: finite values
 * beyond the largest finite one, and infinities in e4m3, become +-max; e5m2 keeps +-inf; NaN
 * becomes the NaN code with its sign. */

typedef enum
{
    miopenTensorNCHW   = 0,
    miopenTensorNHWC   = 1,
    miopenTensorCHWN   = 2,
    miopenTensorNCHWc4 = 3,
    miopenTensorNCHWc8 = 4,
    miopenTensorCHWNc4 = 5,
    miopenTensorCHWNc8 = 6,
    miopenTensorNCDHW  = 7,
    miopenTensorNDHWC  = 8,
} miopenTensorLayout_t;

typedef enum
{
    miopenTensorOpAdd = 0,
    miopenTensorOpMul = 1,
    miopenTensorOpMin = 2,
    miopenTensorOpMax = 3,
} miopenTensorOp_t;

/* An empty descriptor (no dimensions, Float) to be set by one of the setters. */
MIOPEN_EXPORT miopenStatus_t miopenCreateTensorDescriptor(miopenTensorDescriptor_t* tensorDesc);

/* Packed NCHW. */
MIOPEN_EXPORT miopenStatus_t miopenSet4dTensorDescriptor(
    miopenTensorDescriptor_t tensorDesc, miopenDataType_t dataType, int n, int c, int h, int w);

/* Packed strides of `tensorLayout`; `lens` still in N,C,(D,)H,W order. NCHW/NHWC/CHWN take
 * 4 lengths, NCDHW/NDHWC 5. The vectorized layouts (c4/c8) give NotImplemented. */
MIOPEN_EXPORT miopenStatus_t
miopenSetNdTensorDescriptorWithLayout(miopenTensorDescriptor_t tensorDesc,
                                      miopenDataType_t dataType,
                                      miopenTensorLayout_t tensorLayout,
                                      const int* lens,
                                      int num_lens);

/* Explicit strides. */
MIOPEN_EXPORT miopenStatus_t miopenSet4dTensorDescriptorEx(miopenTensorDescriptor_t tensorDesc,
                                                           miopenDataType_t dataType,
                                                           int n, int c, int h, int w,
                                                           int nStride, int cStride,
                                                           int hStride, int wStride);

/* All outputs required; BadParm unless the descriptor is 4-D. */
MIOPEN_EXPORT miopenStatus_t miopenGet4dTensorDescriptor(miopenTensorDescriptor_t tensorDesc,
                                                         miopenDataType_t* dataType,
                                                         int* n, int* c, int* h, int* w,
                                                         int* nStride, int* cStride,
                                                         int* hStride, int* wStride);

/* stridesA == NULL gives packed strides. NULL dimsA or nbDims <= 0: InvalidValue. */
MIOPEN_EXPORT miopenStatus_t miopenSetTensorDescriptor(miopenTensorDescriptor_t tensorDesc,
                                                       miopenDataType_t dataType,
                                                       int nbDims,
                                                       const int* dimsA,
                                                       const int* stridesA);

#ifdef MIOPEN_BETA_API
/* As miopenSetTensorDescriptor with 64-bit sizes. */
MIOPEN_EXPORT miopenStatus_t miopenSetTensorDescriptorV2(miopenTensorDescriptor_t tensorDesc,
                                                         miopenDataType_t dataType,
                                                         int nbDims,
                                                         const size_t* dimsA,
                                                         const size_t* stridesA);

/* FP8 convolution cast type. conflux does not convert f32/f16 tensors on load yet: returns
 * miopenStatusNotImplemented (the descriptor is unchanged). Describe the tensors as
 * miopenFloat8 / miopenBFloat8 instead. */
MIOPEN_EXPORT miopenStatus_t miopenSetTensorCastType(miopenTensorDescriptor_t tensorDesc,
                                                     miopenDataType_t cast_type);
#endif

/* Writes the NUMBER OF DIMENSIONS (as MIOpen does; not the element count). */
MIOPEN_EXPORT miopenStatus_t miopenGetTensorDescriptorSize(miopenTensorDescriptor_t tensorDesc,
                                                           int* size);

/* Each output optional; arrays sized with miopenGetTensorDescriptorSize. */
MIOPEN_EXPORT miopenStatus_t miopenGetTensorDescriptor(miopenTensorDescriptor_t tensorDesc,
                                                       miopenDataType_t* dataType,
                                                       int* dimsA,
                                                       int* stridesA);

MIOPEN_EXPORT miopenStatus_t miopenDestroyTensorDescriptor(miopenTensorDescriptor_t tensorDesc);

/* Bytes spanned: element size x (sum over dims of (len - 1) x stride + 1). */
MIOPEN_EXPORT miopenStatus_t miopenGetTensorNumBytes(miopenTensorDescriptor_t tensorDesc,
                                                     size_t* numBytes);

/* Tensor helpers. Floating-point tensors only; on the CUDA backend they stage through host
 * memory (utility calls, not a fast path).
 * C = op(alpha1 * A, alpha2 * B) + beta * C. A has C's lengths; each dimension of B is 1 or
 * C's (broadcast); B and C share a type. C is read only when beta != 0. */
MIOPEN_EXPORT miopenStatus_t miopenOpTensor(miopenHandle_t handle,
                                            miopenTensorOp_t tensorOp,
                                            const void* alpha1,
                                            const miopenTensorDescriptor_t aDesc,
                                            const void* A,
                                            const void* alpha2,
                                            const miopenTensorDescriptor_t bDesc,
                                            const void* B,
                                            const void* beta,
                                            const miopenTensorDescriptor_t cDesc,
                                            void* C);

/* y = *alpha (every element). */
MIOPEN_EXPORT miopenStatus_t miopenSetTensor(miopenHandle_t handle,
                                             const miopenTensorDescriptor_t yDesc,
                                             void* y,
                                             const void* alpha);

/* y = *alpha * y. */
MIOPEN_EXPORT miopenStatus_t miopenScaleTensor(miopenHandle_t handle,
                                               const miopenTensorDescriptor_t yDesc,
                                               void* y,
                                               const void* alpha);

/* y = alpha * x + beta * y between descriptors of equal lengths (any strides/types). */
MIOPEN_EXPORT miopenStatus_t miopenTransformTensor(miopenHandle_t handle,
                                                   const void* alpha,
                                                   const miopenTensorDescriptor_t xDesc,
                                                   const void* x,
                                                   const void* beta,
                                                   const miopenTensorDescriptor_t yDesc,
                                                   void* y);

/* ======================================================================================
 * 1c. Convolution
 * Argument order differs between calls, as in MIOpen: workspace-size / solution /
 * immediate forward calls take (wDesc, xDesc, convDesc, yDesc); Find and Forward take
 * (xDesc, x, wDesc, w, convDesc, ..., yDesc, y); backward-data (dyDesc, wDesc, convDesc,
 * dxDesc); backward-weights (dyDesc, xDesc, convDesc, dwDesc). In transpose mode every
 * forward call computes the backward-data of the normal convolution and vice versa.
 * ====================================================================================== */
typedef enum
{
    miopenConvolution = 0, /* cross-correlation */
    miopenTranspose   = 1,
    miopenGroupConv   = 2, /* deprecated: same as miopenConvolution */
    miopenDepthwise   = 3, /* deprecated: same as miopenConvolution */
} miopenConvolutionMode_t;

typedef enum
{
    miopenPaddingDefault = 0,
    miopenPaddingSame    = 1,
    miopenPaddingValid   = 2,
} miopenPaddingMode_t;

typedef enum
{
    MIOPEN_CONVOLUTION_ATTRIB_FP16_ALT_IMPL = 0, /* -1 (default), 0, 1 */
    MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC = 1, /* 0 (default), 1: bitwise reproducible */
#ifdef MIOPEN_BETA_API
    MIOPEN_CONVOLUTION_ATTRIB_FP8_ROUNDING_MODE = 2,
#endif
} miopenConvolutionAttrib_t;

#ifdef MIOPEN_BETA_API
/* Rounding of float results stored as fp8. Standard: round to nearest, ties to even.
 * Stochastic (the default): a value between two codes rounds away from zero with probability
 * equal to its distance from the lower code (in code spacings); the random bits of output
 * element i (its logical N,C,(D,)H,W row-major index) are the top 24 bits of
 * splitmix64(i ^ 0x9E3779B97F4A7C15), so results do not depend on threads, layout or run. */
typedef enum
{
    miopenF8RoundingModeStandard   = 0,
    miopenF8RoundingModeStochastic = 1,
} miopenF8RoundingMode_t;
#endif

typedef enum
{
    miopenConvolutionFwdAlgoGEMM         = 0,
    miopenConvolutionFwdAlgoDirect       = 1,
    miopenConvolutionFwdAlgoFFT          = 2,
    miopenConvolutionFwdAlgoWinograd     = 3,
    miopenConvolutionFwdAlgoImplicitGEMM = 5,
} miopenConvFwdAlgorithm_t;

typedef enum
{
    miopenConvolutionBwdWeightsAlgoGEMM         = 0,
    miopenConvolutionBwdWeightsAlgoDirect       = 1,
    miopenConvolutionBwdWeightsAlgoWinograd     = 3,
    miopenConvolutionBwdWeightsAlgoImplicitGEMM = 5,
} miopenConvBwdWeightsAlgorithm_t;

typedef enum
{
    miopenConvolutionBwdDataAlgoGEMM         = 0,
    miopenConvolutionBwdDataAlgoDirect       = 1,
    miopenConvolutionBwdDataAlgoFFT          = 2,
    miopenConvolutionBwdDataAlgoWinograd     = 3,
    miopenTransposeBwdDataAlgoGEMM           = 4, /* deprecated */
    miopenConvolutionBwdDataAlgoImplicitGEMM = 5,
} miopenConvBwdDataAlgorithm_t;

typedef enum
{
    miopenConvolutionAlgoGEMM         = 0,
    miopenConvolutionAlgoDirect       = 1,
    miopenConvolutionAlgoFFT          = 2,
    miopenConvolutionAlgoWinograd     = 3,
    miopenConvolutionAlgoImplicitGEMM = 5,
} miopenConvAlgorithm_t;

/* One Find result: 16 bytes (algorithm at 0, time at 4, memory at 8). */
typedef struct
{
    MIOPEN_ANONYMOUS_UNION
    {
        miopenConvFwdAlgorithm_t fwd_algo;
        miopenConvBwdWeightsAlgorithm_t bwd_weights_algo;
        miopenConvBwdDataAlgorithm_t bwd_data_algo;
    };
    float time;    /* milliseconds */
    size_t memory; /* workspace bytes */
} miopenConvAlgoPerf_t;

/* One immediate-mode solution: 32 bytes (time 0, workspace_size 8, solution_id 16,
 * algorithm 24). */
typedef struct
{
    float time;            /* ms; negative = an estimate, not a measurement */
    size_t workspace_size; /* bytes */
    uint64_t solution_id;  /* 0 is never a valid id */
    miopenConvAlgorithm_t algorithm;
} miopenConvSolution_t;

/* 2-D, pad 0, stride 1, dilation 1, output padding 0, 1 group, mode miopenConvolution. */
MIOPEN_EXPORT miopenStatus_t
miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t* convDesc);

/* 2-D geometry: pad >= 0, stride >= 1, dilation >= 1. Resets the group count to 1 and the
 * output padding to 0 (set those after Init). */
MIOPEN_EXPORT miopenStatus_t miopenInitConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc,
                                                             miopenConvolutionMode_t c_mode,
                                                             int pad_h, int pad_w,
                                                             int stride_h, int stride_w,
                                                             int dilation_h, int dilation_w);

/* N-d geometry (spatialDim 2 or 3), arrays of spatialDim entries; resets as above. */
MIOPEN_EXPORT miopenStatus_t
miopenInitConvolutionNdDescriptor(miopenConvolutionDescriptor_t convDesc,
                                  int spatialDim,
                                  const int* padA,
                                  const int* strideA,
                                  const int* dilationA,
                                  miopenConvolutionMode_t c_mode);

MIOPEN_EXPORT miopenStatus_t miopenGetConvolutionSpatialDim(miopenConvolutionDescriptor_t convDesc,
                                                            int* spatialDim);

/* 2-D descriptors only (else UnknownError); all outputs required. */
MIOPEN_EXPORT miopenStatus_t miopenGetConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc,
                                                            miopenConvolutionMode_t* c_mode,
                                                            int* pad_h, int* pad_w,
                                                            int* stride_h, int* stride_w,
                                                            int* dilation_h, int* dilation_w);

/* Copies requestedSpatialDim entries (more than the descriptor has: UnknownError);
 * spatialDim and c_mode may be NULL. */
MIOPEN_EXPORT miopenStatus_t
miopenGetConvolutionNdDescriptor(miopenConvolutionDescriptor_t convDesc,
                                 int requestedSpatialDim,
                                 int* spatialDim,
                                 int* padA,
                                 int* strideA,
                                 int* dilationA,
                                 miopenConvolutionMode_t* c_mode);

MIOPEN_EXPORT miopenStatus_t miopenGetConvolutionGroupCount(miopenConvolutionDescriptor_t convDesc,
                                                            int* groupCount);

/* Checked against the tensors when used; only counts < 1 are refused here. Depthwise
 * convolution = group count equal to the input channels. */
MIOPEN_EXPORT miopenStatus_t miopenSetConvolutionGroupCount(miopenConvolutionDescriptor_t convDesc,
                                                            int groupCount);

/* Transpose output padding (each must be < its stride, checked when used). 2-D only. */
MIOPEN_EXPORT miopenStatus_t
miopenSetTransposeConvOutputPadding(miopenConvolutionDescriptor_t convDesc, int adj_h, int adj_w);

/* spatialDim must equal the descriptor's (else UnknownError). */
MIOPEN_EXPORT miopenStatus_t
miopenSetTransposeConvNdOutputPadding(miopenConvolutionDescriptor_t convDesc,
                                      int spatialDim,
                                      const int* adjA);

/* Output lengths of the forward operation: per dimension max(1, (in + 2p - e) / s + 1)
 * with e = d(k - 1) + 1 and truncating division; transpose: max(1, s(in - 1) + e - 2p + a)
 * and w.C x groups channels. 2-D only. */
MIOPEN_EXPORT miopenStatus_t
miopenGetConvolutionForwardOutputDim(miopenConvolutionDescriptor_t convDesc,
                                     const miopenTensorDescriptor_t inputTensorDesc,
                                     const miopenTensorDescriptor_t filterDesc,
                                     int* n, int* c, int* h, int* w);

/* Writes spatialDim + 2 lengths to outputTensorDimA and their count to nDim. */
MIOPEN_EXPORT miopenStatus_t
miopenGetConvolutionNdForwardOutputDim(miopenConvolutionDescriptor_t convDesc,
                                       const miopenTensorDescriptor_t inputTensorDesc,
                                       const miopenTensorDescriptor_t filterDesc,
                                       int* nDim,
                                       int* outputTensorDimA);

MIOPEN_EXPORT miopenStatus_t
miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc);

/* Out-of-range value or unknown attribute: BadParm. */
MIOPEN_EXPORT miopenStatus_t
miopenSetConvolutionAttribute(miopenConvolutionDescriptor_t convDesc,
                              const miopenConvolutionAttrib_t attr,
                              int value);

MIOPEN_EXPORT miopenStatus_t
miopenGetConvolutionAttribute(miopenConvolutionDescriptor_t convDesc,
                              const miopenConvolutionAttrib_t attr,
                              int* value);

/* --- Immediate mode: list the solutions of a problem, pick one by id, run it. ------------
 * Solutions come best first: measured times (from an earlier Find on any handle of this
 * process or the find-db) ascending, then estimates (negative times). */

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionForwardGetSolutionCount(miopenHandle_t handle,
                                         const miopenTensorDescriptor_t wDesc,
                                         const miopenTensorDescriptor_t xDesc,
                                         const miopenConvolutionDescriptor_t convDesc,
                                         const miopenTensorDescriptor_t yDesc,
                                         size_t* solutionCount);

/* Up to maxSolutionCount entries; solutionCount and solutions are each optional. */
MIOPEN_EXPORT miopenStatus_t
miopenConvolutionForwardGetSolution(miopenHandle_t handle,
                                    const miopenTensorDescriptor_t wDesc,
                                    const miopenTensorDescriptor_t xDesc,
                                    const miopenConvolutionDescriptor_t convDesc,
                                    const miopenTensorDescriptor_t yDesc,
                                    const size_t maxSolutionCount,
                                    size_t* solutionCount,
                                    miopenConvSolution_t* solutions);

/* Unknown or inapplicable id: BadParm. */
MIOPEN_EXPORT miopenStatus_t
miopenConvolutionForwardGetSolutionWorkspaceSize(miopenHandle_t handle,
                                                 const miopenTensorDescriptor_t wDesc,
                                                 const miopenTensorDescriptor_t xDesc,
                                                 const miopenConvolutionDescriptor_t convDesc,
                                                 const miopenTensorDescriptor_t yDesc,
                                                 const uint64_t solution_id,
                                                 size_t* workSpaceSize);

/* Builds (compiles, on GPUs) and caches the solution's kernels on the handle. */
MIOPEN_EXPORT miopenStatus_t
miopenConvolutionForwardCompileSolution(miopenHandle_t handle,
                                        const miopenTensorDescriptor_t wDesc,
                                        const miopenTensorDescriptor_t xDesc,
                                        const miopenConvolutionDescriptor_t convDesc,
                                        const miopenTensorDescriptor_t yDesc,
                                        const uint64_t solution_id);

/* y = conv(x, w) with the given solution (alpha = 1, beta = 0). */
MIOPEN_EXPORT miopenStatus_t
miopenConvolutionForwardImmediate(miopenHandle_t handle,
                                  const miopenTensorDescriptor_t wDesc,
                                  const void* w,
                                  const miopenTensorDescriptor_t xDesc,
                                  const void* x,
                                  const miopenConvolutionDescriptor_t convDesc,
                                  const miopenTensorDescriptor_t yDesc,
                                  void* y,
                                  void* workSpace,
                                  size_t workSpaceSize,
                                  const uint64_t solution_id);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardDataGetSolutionCount(miopenHandle_t handle,
                                              const miopenTensorDescriptor_t dyDesc,
                                              const miopenTensorDescriptor_t wDesc,
                                              const miopenConvolutionDescriptor_t convDesc,
                                              const miopenTensorDescriptor_t dxDesc,
                                              size_t* solutionCount);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardDataGetSolution(miopenHandle_t handle,
                                         const miopenTensorDescriptor_t dyDesc,
                                         const miopenTensorDescriptor_t wDesc,
                                         const miopenConvolutionDescriptor_t convDesc,
                                         const miopenTensorDescriptor_t dxDesc,
                                         const size_t maxSolutionCount,
                                         size_t* solutionCount,
                                         miopenConvSolution_t* solutions);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardDataGetSolutionWorkspaceSize(miopenHandle_t handle,
                                                      const miopenTensorDescriptor_t dyDesc,
                                                      const miopenTensorDescriptor_t wDesc,
                                                      const miopenConvolutionDescriptor_t convDesc,
                                                      const miopenTensorDescriptor_t dxDesc,
                                                      const uint64_t solution_id,
                                                      size_t* workSpaceSize);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardDataCompileSolution(miopenHandle_t handle,
                                             const miopenTensorDescriptor_t dyDesc,
                                             const miopenTensorDescriptor_t wDesc,
                                             const miopenConvolutionDescriptor_t convDesc,
                                             const miopenTensorDescriptor_t dxDesc,
                                             const uint64_t solution_id);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardDataImmediate(miopenHandle_t handle,
                                       const miopenTensorDescriptor_t dyDesc,
                                       const void* dy,
                                       const miopenTensorDescriptor_t wDesc,
                                       const void* w,
                                       const miopenConvolutionDescriptor_t convDesc,
                                       const miopenTensorDescriptor_t dxDesc,
                                       void* dx,
                                       void* workSpace,
                                       size_t workSpaceSize,
                                       const uint64_t solution_id);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardWeightsGetSolutionCount(miopenHandle_t handle,
                                                 const miopenTensorDescriptor_t dyDesc,
                                                 const miopenTensorDescriptor_t xDesc,
                                                 const miopenConvolutionDescriptor_t convDesc,
                                                 const miopenTensorDescriptor_t dwDesc,
                                                 size_t* solutionCount);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardWeightsGetSolution(miopenHandle_t handle,
                                            const miopenTensorDescriptor_t dyDesc,
                                            const miopenTensorDescriptor_t xDesc,
                                            const miopenConvolutionDescriptor_t convDesc,
                                            const miopenTensorDescriptor_t dwDesc,
                                            const size_t maxSolutionCount,
                                            size_t* solutionCount,
                                            miopenConvSolution_t* solutions);

MIOPEN_EXPORT miopenStatus_t miopenConvolutionBackwardWeightsGetSolutionWorkspaceSize(
    miopenHandle_t handle,
    const miopenTensorDescriptor_t dyDesc,
    const miopenTensorDescriptor_t xDesc,
    const miopenConvolutionDescriptor_t convDesc,
    const miopenTensorDescriptor_t dwDesc,
    const uint64_t solution_id,
    size_t* workSpaceSize);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardWeightsCompileSolution(miopenHandle_t handle,
                                                const miopenTensorDescriptor_t dyDesc,
                                                const miopenTensorDescriptor_t xDesc,
                                                const miopenConvolutionDescriptor_t convDesc,
                                                const miopenTensorDescriptor_t dwDesc,
                                                const uint64_t solution_id);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardWeightsImmediate(miopenHandle_t handle,
                                          const miopenTensorDescriptor_t dyDesc,
                                          const void* dy,
                                          const miopenTensorDescriptor_t xDesc,
                                          const void* x,
                                          const miopenConvolutionDescriptor_t convDesc,
                                          const miopenTensorDescriptor_t dwDesc,
                                          void* dw,
                                          void* workSpace,
                                          size_t workSpaceSize,
                                          const uint64_t solution_id);

/* --- Find mode: benchmark the solvers, then run by algorithm. -----------------------------
 * Workspace size: enough for every algorithm Find may return. */
MIOPEN_EXPORT miopenStatus_t
miopenConvolutionForwardGetWorkSpaceSize(miopenHandle_t handle,
                                         const miopenTensorDescriptor_t wDesc,
                                         const miopenTensorDescriptor_t xDesc,
                                         const miopenConvolutionDescriptor_t convDesc,
                                         const miopenTensorDescriptor_t yDesc,
                                         size_t* workSpaceSize);

/* Times the applicable solvers (y may be overwritten), keeps the fastest per algorithm,
 * sorted by time, at most requestAlgoCount (>= 1) entries. x, w, y, returnedAlgoCount and
 * perfResults are required. */
MIOPEN_EXPORT miopenStatus_t
miopenFindConvolutionForwardAlgorithm(miopenHandle_t handle,
                                      const miopenTensorDescriptor_t xDesc,
                                      const void* x,
                                      const miopenTensorDescriptor_t wDesc,
                                      const void* w,
                                      const miopenConvolutionDescriptor_t convDesc,
                                      const miopenTensorDescriptor_t yDesc,
                                      void* y,
                                      const int requestAlgoCount,
                                      int* returnedAlgoCount,
                                      miopenConvAlgoPerf_t* perfResults,
                                      void* workSpace,
                                      size_t workSpaceSize,
                                      bool exhaustiveSearch);

/* y = alpha * conv(x, w) + beta * y with the best solver of `algo` (conflux honors any
 * alpha/beta and needs no prior Find). */
MIOPEN_EXPORT miopenStatus_t miopenConvolutionForward(miopenHandle_t handle,
                                                      const void* alpha,
                                                      const miopenTensorDescriptor_t xDesc,
                                                      const void* x,
                                                      const miopenTensorDescriptor_t wDesc,
                                                      const void* w,
                                                      const miopenConvolutionDescriptor_t convDesc,
                                                      miopenConvFwdAlgorithm_t algo,
                                                      const void* beta,
                                                      const miopenTensorDescriptor_t yDesc,
                                                      void* y,
                                                      void* workSpace,
                                                      size_t workSpaceSize);

/* y += b broadcast over N and the spatial dimensions (b is 1 x K x 1 x 1). */
MIOPEN_EXPORT miopenStatus_t miopenConvolutionForwardBias(miopenHandle_t handle,
                                                          const void* alpha,
                                                          const miopenTensorDescriptor_t bDesc,
                                                          const void* b,
                                                          const void* beta,
                                                          const miopenTensorDescriptor_t yDesc,
                                                          void* y);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardDataGetWorkSpaceSize(miopenHandle_t handle,
                                              const miopenTensorDescriptor_t dyDesc,
                                              const miopenTensorDescriptor_t wDesc,
                                              const miopenConvolutionDescriptor_t convDesc,
                                              const miopenTensorDescriptor_t dxDesc,
                                              size_t* workSpaceSize);

MIOPEN_EXPORT miopenStatus_t
miopenFindConvolutionBackwardDataAlgorithm(miopenHandle_t handle,
                                           const miopenTensorDescriptor_t dyDesc,
                                           const void* dy,
                                           const miopenTensorDescriptor_t wDesc,
                                           const void* w,
                                           const miopenConvolutionDescriptor_t convDesc,
                                           const miopenTensorDescriptor_t dxDesc,
                                           void* dx,
                                           const int requestAlgoCount,
                                           int* returnedAlgoCount,
                                           miopenConvAlgoPerf_t* perfResults,
                                           void* workSpace,
                                           size_t workSpaceSize,
                                           bool exhaustiveSearch);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardData(miopenHandle_t handle,
                              const void* alpha,
                              const miopenTensorDescriptor_t dyDesc,
                              const void* dy,
                              const miopenTensorDescriptor_t wDesc,
                              const void* w,
                              const miopenConvolutionDescriptor_t convDesc,
                              miopenConvBwdDataAlgorithm_t algo,
                              const void* beta,
                              const miopenTensorDescriptor_t dxDesc,
                              void* dx,
                              void* workSpace,
                              size_t workSpaceSize);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardWeightsGetWorkSpaceSize(miopenHandle_t handle,
                                                 const miopenTensorDescriptor_t dyDesc,
                                                 const miopenTensorDescriptor_t xDesc,
                                                 const miopenConvolutionDescriptor_t convDesc,
                                                 const miopenTensorDescriptor_t dwDesc,
                                                 size_t* workSpaceSize);

/* Results are written to the bwd_weights_algo member (MIOpen writes bwd_data_algo; both
 * share storage and values). */
MIOPEN_EXPORT miopenStatus_t
miopenFindConvolutionBackwardWeightsAlgorithm(miopenHandle_t handle,
                                              const miopenTensorDescriptor_t dyDesc,
                                              const void* dy,
                                              const miopenTensorDescriptor_t xDesc,
                                              const void* x,
                                              const miopenConvolutionDescriptor_t convDesc,
                                              const miopenTensorDescriptor_t dwDesc,
                                              void* dw,
                                              const int requestAlgoCount,
                                              int* returnedAlgoCount,
                                              miopenConvAlgoPerf_t* perfResults,
                                              void* workSpace,
                                              size_t workSpaceSize,
                                              bool exhaustiveSearch);

MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBackwardWeights(miopenHandle_t handle,
                                 const void* alpha,
                                 const miopenTensorDescriptor_t dyDesc,
                                 const void* dy,
                                 const miopenTensorDescriptor_t xDesc,
                                 const void* x,
                                 const miopenConvolutionDescriptor_t convDesc,
                                 miopenConvBwdWeightsAlgorithm_t algo,
                                 const void* beta,
                                 const miopenTensorDescriptor_t dwDesc,
                                 void* dw,
                                 void* workSpace,
                                 size_t workSpaceSize);

/* db[k] = sum over n and the spatial dimensions of dy[n, k, ...]. */
MIOPEN_EXPORT miopenStatus_t miopenConvolutionBackwardBias(miopenHandle_t handle,
                                                           const void* alpha,
                                                           const miopenTensorDescriptor_t dyDesc,
                                                           const void* dy,
                                                           const void* beta,
                                                           const miopenTensorDescriptor_t dbDesc,
                                                           void* db);

/* ======================================================================================
 * 1d. Activation
 * Forward and backward formulas are MIOpen's (including its quirks: POWER backward does
 * not multiply by dy, ABS backward at 0 gives -dy). activAlpha/Beta/Gamma parametrize the
 * mode; the API scalars alpha/beta must be 1 and 0 (else UnknownError, as MIOpen).
 * ====================================================================================== */
typedef enum
{
    miopenActivationPASTHRU     = 0, /* x */
    miopenActivationLOGISTIC    = 1, /* 1 / (1 + e^-x) */
    miopenActivationTANH        = 2, /* beta * tanh(alpha * x) */
    miopenActivationRELU        = 3, /* max(0, x) */
    miopenActivationSOFTRELU    = 4, /* log(1 + e^x) */
    miopenActivationABS         = 5, /* |x| */
    miopenActivationPOWER       = 6, /* (alpha + beta * x)^gamma */
    miopenActivationCLIPPEDRELU = 7, /* min(alpha, max(0, x)) */
    miopenActivationLEAKYRELU   = 8, /* x > 0 ? x : alpha * x */
    miopenActivationELU         = 9, /* x > 0 ? x : alpha * (e^x - 1) */
    /* conflux adds modes 100-105 (SiLU, hard-swish, hard-sigmoid, GELU, GELU-tanh, Mish):
     * see CONFLUX_ACTIVATION_* in the conflux extensions at the end of this header. */
} miopenActivationMode_t;

/* Mode PASTHRU, parameters 0. */
MIOPEN_EXPORT miopenStatus_t
miopenCreateActivationDescriptor(miopenActivationDescriptor_t* activDesc);

MIOPEN_EXPORT miopenStatus_t
miopenSetActivationDescriptor(const miopenActivationDescriptor_t activDesc,
                              miopenActivationMode_t mode,
                              double activAlpha,
                              double activBeta,
                              double activGamma);

/* All outputs required. */
MIOPEN_EXPORT miopenStatus_t
miopenGetActivationDescriptor(const miopenActivationDescriptor_t activDesc,
                              miopenActivationMode_t* mode,
                              double* activAlpha,
                              double* activBeta,
                              double* activGamma);

/* y = f(x); x and y have equal lengths and types (strides may differ). */
MIOPEN_EXPORT miopenStatus_t miopenActivationForward(miopenHandle_t handle,
                                                     const miopenActivationDescriptor_t activDesc,
                                                     const void* alpha,
                                                     const miopenTensorDescriptor_t xDesc,
                                                     const void* x,
                                                     const void* beta,
                                                     const miopenTensorDescriptor_t yDesc,
                                                     void* y);

/* dx = f'(dy, x, y) with x, y the forward input and output; y and x must have dy's
 * descriptor, dx its lengths and type. */
MIOPEN_EXPORT miopenStatus_t miopenActivationBackward(miopenHandle_t handle,
                                                      const miopenActivationDescriptor_t activDesc,
                                                      const void* alpha,
                                                      const miopenTensorDescriptor_t yDesc,
                                                      const void* y,
                                                      const miopenTensorDescriptor_t dyDesc,
                                                      const void* dy,
                                                      const miopenTensorDescriptor_t xDesc,
                                                      const void* x,
                                                      const void* beta,
                                                      const miopenTensorDescriptor_t dxDesc,
                                                      void* dx);

MIOPEN_EXPORT miopenStatus_t
miopenDestroyActivationDescriptor(miopenActivationDescriptor_t activDesc);

/* ======================================================================================
 * 1e. Batch normalization
 * Spatial: one statistic per channel over N x (D x) H x W; per-activation: one per
 * (c, (d,) h, w) over N. Parameters (scale, bias, mean, variance) have the derived shape
 * and type Float. Saved statistics are the mean and the INVERSE standard deviation
 * 1 / sqrt(var + eps); running variance uses the unbiased M / (M - 1) factor and is
 * updated as running = (1 - expAvgFactor) * running + expAvgFactor * batch.
 * ====================================================================================== */
typedef enum
{
    miopenBNPerActivation = 0,
    miopenBNSpatial       = 1,
} miopenBatchNormMode_t;

/* Spatial: 1 x C x 1 x 1 (x 1); per-activation: 1 x C x (D x) H x W. Always Float. */
MIOPEN_EXPORT miopenStatus_t miopenDeriveBNTensorDescriptor(miopenTensorDescriptor_t derivedBnDesc,
                                                            const miopenTensorDescriptor_t xDesc,
                                                            miopenBatchNormMode_t bn_mode);

/* y = scale * (x - mean) / sqrt(var + eps) + bias with batch statistics. Running stats are
 * updated only when both running pointers are non-NULL, saved stats written only when both
 * saved pointers are. alpha/beta must be 1/0 (else UnknownError). */
MIOPEN_EXPORT miopenStatus_t
miopenBatchNormalizationForwardTraining(miopenHandle_t handle,
                                        miopenBatchNormMode_t bn_mode,
                                        void* alpha,
                                        void* beta,
                                        const miopenTensorDescriptor_t xDesc,
                                        const void* x,
                                        const miopenTensorDescriptor_t yDesc,
                                        void* y,
                                        const miopenTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                        void* bnScale,
                                        void* bnBias,
                                        double expAvgFactor,
                                        void* resultRunningMean,
                                        void* resultRunningVariance,
                                        double epsilon,
                                        void* resultSaveMean,
                                        void* resultSaveInvVariance);

/* As above with one descriptor per parameter tensor. */
MIOPEN_EXPORT miopenStatus_t
miopenBatchNormalizationForwardTraining_V2(miopenHandle_t handle,
                                           miopenBatchNormMode_t bn_mode,
                                           void* alpha,
                                           void* beta,
                                           const miopenTensorDescriptor_t xDesc,
                                           const void* x,
                                           const miopenTensorDescriptor_t yDesc,
                                           void* y,
                                           const miopenTensorDescriptor_t scaleDesc,
                                           const miopenTensorDescriptor_t biasVarDesc,
                                           const miopenTensorDescriptor_t savedMeanDesc,
                                           const miopenTensorDescriptor_t savedVarDesc,
                                           void* bnScale,
                                           void* bnBias,
                                           double expAvgFactor,
                                           void* resultRunningMean,
                                           void* resultRunningVariance,
                                           double epsilon,
                                           void* resultSaveMean,
                                           void* resultSaveInvVariance);

/* y = scale * (x - estimatedMean) / sqrt(estimatedVariance + eps) + bias. With either
 * estimate NULL the batch statistics are used instead. alpha/beta must be 1/0 (BadParm). */
MIOPEN_EXPORT miopenStatus_t
miopenBatchNormalizationForwardInference(miopenHandle_t handle,
                                         miopenBatchNormMode_t bn_mode,
                                         void* alpha,
                                         void* beta,
                                         const miopenTensorDescriptor_t xDesc,
                                         const void* x,
                                         const miopenTensorDescriptor_t yDesc,
                                         void* y,
                                         const miopenTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                         void* bnScale,
                                         void* bnBias,
                                         void* estimatedMean,
                                         void* estimatedVariance,
                                         double epsilon);

MIOPEN_EXPORT miopenStatus_t
miopenBatchNormalizationForwardInference_V2(miopenHandle_t handle,
                                            miopenBatchNormMode_t bn_mode,
                                            void* alpha,
                                            void* beta,
                                            const miopenTensorDescriptor_t xDesc,
                                            const void* x,
                                            const miopenTensorDescriptor_t yDesc,
                                            void* y,
                                            const miopenTensorDescriptor_t scaleDesc,
                                            const miopenTensorDescriptor_t biasDesc,
                                            const miopenTensorDescriptor_t estMeanDesc,
                                            const miopenTensorDescriptor_t estVarianceDesc,
                                            void* bnScale,
                                            void* bnBias,
                                            void* estimatedMean,
                                            void* estimatedVariance,
                                            double epsilon);

/* dx, dscale, dbias from dy and the forward input x (x must have dy's descriptor). Uses
 * the saved statistics when both are given, else recomputes them with epsilon. The four
 * scalars must be 1, 0, 1, 0 (else BadParm). */
MIOPEN_EXPORT miopenStatus_t
miopenBatchNormalizationBackward(miopenHandle_t handle,
                                 miopenBatchNormMode_t bn_mode,
                                 const void* alphaDataDiff,
                                 const void* betaDataDiff,
                                 const void* alphaParamDiff,
                                 const void* betaParamDiff,
                                 const miopenTensorDescriptor_t xDesc,
                                 const void* x,
                                 const miopenTensorDescriptor_t dyDesc,
                                 const void* dy,
                                 const miopenTensorDescriptor_t dxDesc,
                                 void* dx,
                                 const miopenTensorDescriptor_t bnScaleBiasDiffDesc,
                                 const void* bnScale,
                                 void* resultBnScaleDiff,
                                 void* resultBnBiasDiff,
                                 double epsilon,
                                 const void* savedMean,
                                 const void* savedInvVariance);

MIOPEN_EXPORT miopenStatus_t
miopenBatchNormalizationBackward_V2(miopenHandle_t handle,
                                    miopenBatchNormMode_t bn_mode,
                                    const void* alphaDataDiff,
                                    const void* betaDataDiff,
                                    const void* alphaParamDiff,
                                    const void* betaParamDiff,
                                    const miopenTensorDescriptor_t xDesc,
                                    const void* x,
                                    const miopenTensorDescriptor_t dyDesc,
                                    const void* dy,
                                    const miopenTensorDescriptor_t dxDesc,
                                    void* dx,
                                    const miopenTensorDescriptor_t scaleDesc,
                                    const miopenTensorDescriptor_t biasDesc,
                                    const miopenTensorDescriptor_t savedMeanDesc,
                                    const miopenTensorDescriptor_t savedVarDesc,
                                    const void* bnScale,
                                    void* resultBnScaleDiff,
                                    void* resultBnBiasDiff,
                                    double epsilon,
                                    const void* savedMean,
                                    const void* savedInvVariance);

/* ======================================================================================
 * 1f. Fusion
 * A plan is an ordered list of ops over an input descriptor; each op's output shape is
 * derived as it is added. Compile once, execute many times with new operator arguments.
 * conflux fuses: a convolution followed by any chain of bias / BN inference / activation
 * (up to 8 ops), pointwise chains of those without a convolution, BN forward training
 * (+ activation), BN backward (+ activation backward), activation backward alone.
 * Prologues (MIOpen refuses them): in a vertical plan, bias / BN inference / activation /
 * tensor-add ops placed before the ConvForward op are applied to x first, and the convolution
 * (with any epilogue after it) reads the transformed tensor; its padding is zeros of the
 * transformed tensor, as frameworks compute BN -> ReLU -> conv (pre-activation ResNet,
 * DenseNet). conflux runs the prologue as one pointwise pass into scratch memory, then the
 * convolution: two kernels, not yet one. Other ops before a convolution are UnsupportedOp at
 * compile, naming the op.
 * Convolution -> BN forward training (-> activation) (MIOpen refuses it): the batch
 * statistics of the whole convolution output; conflux runs the convolution into scratch
 * memory, then BN training of it (saved mean / inverse variance, running statistics as for a
 * BN-training plan). BN training anywhere else after a convolution is UnsupportedOp.
 * Horizontal plans (miopenHorizontalFusion; MIOpen declares the value but runs none): every
 * ConvForward op starts a branch that reads the plan's input x; the pointwise ops after it
 * (bias, BN inference, activation) belong to that branch; the plan's one output is the
 * branches' outputs concatenated along channels in op order, so the output descriptor given
 * to miopenExecuteFusionPlan has K = sum of the branches' K, packed in x's layout (NCHW or
 * NHWC), with the branches' N, H and W. A branch whose output differs from the earlier ones in
 * N or a spatial size is refused when its ConvForward op is created (BadParm); a plan whose
 * first op is not a convolution, or a branch holding an op a vertical plan would refuse after
 * a convolution, is refused at compile (UnsupportedOp, naming the plan's op index). Each
 * branch runs as its own fused kernel writing its channel slice of the output, in op order,
 * in one miopenExecuteFusionPlan; every op's arguments are checked before any branch runs.
 * Differences from MIOpen: shapes are checked when an op is added (BadParm, MIOpen defers
 * them); Compile returns UnsupportedOp with a reason for plans no solver fuses and the
 * precise status otherwise (MIOpen: UnknownError); SetOpArgs on an op of another kind is
 * BadParm (MIOpen: UnknownError).
 * ====================================================================================== */
typedef enum
{
    miopenVerticalFusion   = 0,
    miopenHorizontalFusion = 1, /* branches over the same input, outputs concatenated (above) */
} miopenFusionDirection_t;

/* Copies inputDesc. */
MIOPEN_EXPORT miopenStatus_t miopenCreateFusionPlan(miopenFusionPlanDescriptor_t* fusePlanDesc,
                                                    const miopenFusionDirection_t fuseDirection,
                                                    const miopenTensorDescriptor_t inputDesc);

/* Also frees the plan's op descriptors. */
MIOPEN_EXPORT miopenStatus_t miopenDestroyFusionPlan(miopenFusionPlanDescriptor_t fusePlanDesc);

/* Chooses a fused solver and builds its kernel (cached on the handle: compiling the same
 * plan again is cheap). */
MIOPEN_EXPORT miopenStatus_t miopenCompileFusionPlan(miopenHandle_t handle,
                                                     miopenFusionPlanDescriptor_t fusePlanDesc);

/* Op at position op_idx (out of range: BadParm). */
MIOPEN_EXPORT miopenStatus_t miopenFusionPlanGetOp(miopenFusionPlanDescriptor_t fusePlanDesc,
                                                   const int op_idx,
                                                   miopenFusionOpDescriptor_t* op);

/* Workspace of the chosen solver; `algo` is ignored. */
MIOPEN_EXPORT miopenStatus_t
miopenFusionPlanGetWorkSpaceSize(miopenHandle_t handle,
                                 miopenFusionPlanDescriptor_t fusePlanDesc,
                                 size_t* workSpaceSize,
                                 miopenConvFwdAlgorithm_t algo);

/* The convolution algorithms conflux's solvers provide (Direct first), at most
 * requestAlgoCount. */
MIOPEN_EXPORT miopenStatus_t
miopenFusionPlanConvolutionGetAlgo(miopenFusionPlanDescriptor_t fusePlanDesc,
                                   const int requestAlgoCount,
                                   int* returnedAlgoCount,
                                   miopenConvFwdAlgorithm_t* returnedAlgos);

/* Restricts Compile to solvers of `algo`. */
MIOPEN_EXPORT miopenStatus_t
miopenFusionPlanConvolutionSetAlgo(miopenFusionPlanDescriptor_t fusePlanDesc,
                                   miopenConvFwdAlgorithm_t algo);

MIOPEN_EXPORT miopenStatus_t miopenCreateOpConvForward(miopenFusionPlanDescriptor_t fusePlanDesc,
                                                       miopenFusionOpDescriptor_t* convOp,
                                                       miopenConvolutionDescriptor_t convDesc,
                                                       const miopenTensorDescriptor_t wDesc);

MIOPEN_EXPORT miopenStatus_t
miopenCreateOpActivationForward(miopenFusionPlanDescriptor_t fusePlanDesc,
                                miopenFusionOpDescriptor_t* activFwdOp,
                                miopenActivationMode_t mode);

MIOPEN_EXPORT miopenStatus_t
miopenCreateOpActivationBackward(miopenFusionPlanDescriptor_t fusePlanDesc,
                                 miopenFusionOpDescriptor_t* activBwdOp,
                                 miopenActivationMode_t mode);

/* bDesc: 1 x C x 1 x 1 (x 1) for the op's input channels C. */
MIOPEN_EXPORT miopenStatus_t miopenCreateOpBiasForward(miopenFusionPlanDescriptor_t fusePlanDesc,
                                                       miopenFusionOpDescriptor_t* biasOp,
                                                       const miopenTensorDescriptor_t bDesc);

/* bnScaleBiasMeanVarDesc: the derived BN shape, packed. */
MIOPEN_EXPORT miopenStatus_t
miopenCreateOpBatchNormInference(miopenFusionPlanDescriptor_t fusePlanDesc,
                                 miopenFusionOpDescriptor_t* bnOp,
                                 const miopenBatchNormMode_t bn_mode,
                                 const miopenTensorDescriptor_t bnScaleBiasMeanVarDesc);

/* runningMeanVariance: the caller will supply running mean/variance to update. */
MIOPEN_EXPORT miopenStatus_t
miopenCreateOpBatchNormForward(miopenFusionPlanDescriptor_t fusePlanDesc,
                               miopenFusionOpDescriptor_t* bnFwdOp,
                               const miopenBatchNormMode_t bn_mode,
                               bool runningMeanVariance);

/* The plan's input is dy and its output dx. */
MIOPEN_EXPORT miopenStatus_t
miopenCreateOpBatchNormBackward(miopenFusionPlanDescriptor_t fusePlanDesc,
                                miopenFusionOpDescriptor_t* bnBwdOp,
                                const miopenBatchNormMode_t bn_mode);

/* Arguments per op, keyed by the op's position in its plan. */
MIOPEN_EXPORT miopenStatus_t miopenCreateOperatorArgs(miopenOperatorArgs_t* args);

MIOPEN_EXPORT miopenStatus_t miopenDestroyOperatorArgs(miopenOperatorArgs_t args);

/* alpha (NULL = 1) scales the convolution, beta (NULL = 0) the old output. */
MIOPEN_EXPORT miopenStatus_t miopenSetOpArgsConvForward(miopenOperatorArgs_t args,
                                                        const miopenFusionOpDescriptor_t convOp,
                                                        const void* alpha,
                                                        const void* beta,
                                                        const void* w);

/* alpha and beta are ignored. */
MIOPEN_EXPORT miopenStatus_t miopenSetOpArgsActivForward(miopenOperatorArgs_t args,
                                                         const miopenFusionOpDescriptor_t activFwdOp,
                                                         const void* alpha,
                                                         const void* beta,
                                                         double activAlpha,
                                                         double activBeta,
                                                         double activGamma);

/* y: the activation's forward output. reserved: conflux reads the forward input x here
 * (MIOpen ignores it); modes whose derivative reads x (RELU, ...) need it when the
 * activation backward op is alone in its plan. alpha and beta are ignored. */
MIOPEN_EXPORT miopenStatus_t miopenSetOpArgsActivBackward(miopenOperatorArgs_t args,
                                                          const miopenFusionOpDescriptor_t activBwdOp,
                                                          const void* alpha,
                                                          const void* beta,
                                                          const void* y,
                                                          const void* reserved,
                                                          double activAlpha,
                                                          double activBeta,
                                                          double activGamma);

MIOPEN_EXPORT miopenStatus_t
miopenSetOpArgsBatchNormInference(miopenOperatorArgs_t args,
                                  const miopenFusionOpDescriptor_t bnOp,
                                  const void* alpha,
                                  const void* beta,
                                  const void* bnScale,
                                  const void* bnBias,
                                  const void* estimatedMean,
                                  const void* estimatedVariance,
                                  double epsilon);

/* An op created with runningMeanVariance needs both running pointers (else BadParm). */
MIOPEN_EXPORT miopenStatus_t miopenSetOpArgsBatchNormForward(miopenOperatorArgs_t args,
                                                             const miopenFusionOpDescriptor_t bnOp,
                                                             const void* alpha,
                                                             const void* beta,
                                                             const void* bnScale,
                                                             const void* bnBias,
                                                             void* savedMean,
                                                             void* savedInvVariance,
                                                             void* runningMean,
                                                             void* runningVariance,
                                                             double expAvgFactor,
                                                             double epsilon);

/* x: the BN forward input; savedMean / savedInvVariance are required. */
MIOPEN_EXPORT miopenStatus_t miopenSetOpArgsBatchNormBackward(miopenOperatorArgs_t args,
                                                              const miopenFusionOpDescriptor_t bnOp,
                                                              const void* alpha,
                                                              const void* beta,
                                                              const void* x,
                                                              const void* bnScale,
                                                              const void* bnBias,
                                                              void* resultBnScaleDiff,
                                                              void* resultBnBiasDiff,
                                                              const void* savedMean,
                                                              const void* savedInvVariance);

/* alpha and beta are ignored. */
MIOPEN_EXPORT miopenStatus_t miopenSetOpArgsBiasForward(miopenOperatorArgs_t args,
                                                        const miopenFusionOpDescriptor_t biasOp,
                                                        const void* alpha,
                                                        const void* beta,
                                                        const void* bias);

/* inputDesc must equal the plan's input descriptor and outputDesc its derived output
 * (type, lengths, strides), the plan must be compiled, and every op needs its arguments;
 * otherwise BadParm and nothing is written. */
MIOPEN_EXPORT miopenStatus_t miopenExecuteFusionPlan(const miopenHandle_t handle,
                                                     const miopenFusionPlanDescriptor_t fusePlanDesc,
                                                     const miopenTensorDescriptor_t inputDesc,
                                                     const void* input,
                                                     const miopenTensorDescriptor_t outputDesc,
                                                     void* output,
                                                     miopenOperatorArgs_t args);

/* y = act(alpha1 * conv(x, w) + alpha2 * z + bias) in one call (alpha NULL = 1). z or bias
 * NULL drops that term (its descriptor may then be NULL too). MIOpen accepts only RELU;
 * conflux fuses any activation mode. `algo` must have a fused solver (else UnsupportedOp);
 * the workspace is accepted and unused (a NULL pointer with a size > 0 is BadParm). */
MIOPEN_EXPORT miopenStatus_t
miopenConvolutionBiasActivationForward(miopenHandle_t handle,
                                       const void* alpha1,
                                       const miopenTensorDescriptor_t xDesc,
                                       const void* x,
                                       const miopenTensorDescriptor_t wDesc,
                                       const void* w,
                                       const miopenConvolutionDescriptor_t convDesc,
                                       miopenConvFwdAlgorithm_t algo,
                                       void* workspace,
                                       size_t workspaceSizeInBytes,
                                       const void* alpha2,
                                       const miopenTensorDescriptor_t zDesc,
                                       const void* z,
                                       const miopenTensorDescriptor_t biasDesc,
                                       const void* bias,
                                       const miopenActivationDescriptor_t activationDesc,
                                       const miopenTensorDescriptor_t yDesc,
                                       void* y);

/* ======================================================================================
 * conflux extensions (not in MIOpen)
 * ====================================================================================== */

/* Convolution attribute (miopenSetConvolutionAttribute / miopenGetConvolutionAttribute):
 * may f32 convolutions run on TF32 tensor cores (inputs rounded to 10 mantissa bits, f32
 * accumulation; cuDNN's CUDNN_DEFAULT_MATH, PyTorch's allow_tf32)? -1 (default): as the
 * environment says (CONFLUX_ALLOW_TF32=1 allows), 0: strict f32, 1: allowed. Strict f32
 * keeps f32 accuracy: on Hopper GPUs conflux computes it on the tensor cores with each
 * operand split into two TF32 parts (three products per product, per-stage sums in f32;
 * measured errors at or below those of f32 on CUDA cores). */
#define CONFLUX_CONVOLUTION_ATTRIB_ALLOW_TF32 ((miopenConvolutionAttrib_t)1000)

/* Convolution attribute: does the caller promise constant weights? 0 (default): every call
 * reads the filter. 1: the values behind a filter address do not change from call to call
 * (an inference engine's frozen weights), so conflux may transform the filter once per
 * address and reuse the result (CPU: the 1x1 and Winograd F(4x4) and F(2x2) forward solvers keep the
 * transformed filter of the last few addresses per compiled problem or fusion plan; the GPU
 * ignores it). Writing new values at the same address is then the caller's error: results
 * keep using the old ones. To change weights, pass them at another address, or use a
 * descriptor without the attribute. This is what oneDNN users get by reordering weights once. */
#define CONFLUX_CONVOLUTION_ATTRIB_CONSTANT_WEIGHTS ((miopenConvolutionAttrib_t)1001)

/* Activation modes of modern networks, accepted wherever a miopenActivationMode_t is
 * (miopenSetActivationDescriptor, miopenActivationForward / Backward, the fusion activation
 * ops forward and backward, miopenConvolutionBiasActivationForward). They take no parameters:
 * activAlpha, activBeta and activGamma are ignored. Backward reads the forward input x (y is
 * not needed). sigma(x) = 1 / (1 + e^-x), softplus(x) = log(1 + e^x). At the kinks of
 * HARDSWISH and HARDSIGMOID the backward takes PyTorch's values: HARDSWISH' is x/3 + 1/2 on
 * [-3, 3] (0 below, 1 above), HARDSIGMOID' is 1/6 on (-3, 3) (0 elsewhere). MISH is x for
 * x > 20 (PyTorch's softplus threshold; the difference is below f64 rounding). Every finite
 * input gives a finite result in every precision. */
#define CONFLUX_ACTIVATION_SILU        ((miopenActivationMode_t)100) /* x * sigma(x) */
#define CONFLUX_ACTIVATION_HARDSWISH   ((miopenActivationMode_t)101) /* x * min(max(x + 3, 0), 6) / 6 */
#define CONFLUX_ACTIVATION_HARDSIGMOID ((miopenActivationMode_t)102) /* min(max(x + 3, 0), 6) / 6 */
#define CONFLUX_ACTIVATION_GELU        ((miopenActivationMode_t)103) /* 0.5 * x * (1 + erf(x / sqrt(2))) */
#define CONFLUX_ACTIVATION_GELU_TANH   ((miopenActivationMode_t)104) /* 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) */
#define CONFLUX_ACTIVATION_MISH        ((miopenActivationMode_t)105) /* x * tanh(softplus(x)) */

/* The output type of a fusion plan around an int8 or fp8 convolution. A plan's output
 * otherwise follows miopenGetConvolutionForwardOutputDim's rule (Float for int8 x, x's type
 * for fp8 x). int8 plans may output miopenInt32, miopenFloat, miopenHalf, miopenBFloat16 or
 * miopenInt8; fp8 plans miopenFloat, miopenHalf, miopenBFloat16, miopenFloat8 or
 * miopenBFloat8. The epilogue (bias, batch norm, activation, residual add) runs in f32 on
 * alpha * sum + beta * y, and the result is converted once: int8 and int32 round half to
 * even and saturate (NaN gives 0), fp8 rounds as the convolution's
 * MIOPEN_CONVOLUTION_ATTRIB_FP8_ROUNDING_MODE says. A residual z added after an int8,
 * int32 or fp8 output may be miopenFloat, miopenHalf or miopenBFloat16. Call it after
 * miopenCreateOpConvForward and before miopenCompileFusionPlan; the output descriptor given
 * to miopenExecuteFusionPlan must then have this type. Any other plan: miopenStatusBadParm. */
MIOPEN_EXPORT miopenStatus_t confluxFusionPlanSetOutputType(miopenFusionPlanDescriptor_t plan,
                                                            miopenDataType_t type);

/* The reason of the last failing call made on this thread, e.g.
 * "miopenCompileFusionPlan: miopenStatusUnsupportedOp: op 2 (...): ...". Successful calls
 * leave it unchanged; "" before any failure. Valid until the next failing call on this
 * thread. The same text is logged as a `tracing` warning (visible when the host process
 * installs a tracing subscriber). */
MIOPEN_EXPORT const char* confluxGetLastErrorMessage(void);

/* Progress of Find: called once per timed candidate of miopenFindConvolution*Algorithm
 * (every applicable solver that fits in the workspace; with exhaustiveSearch, every
 * tuning configuration of a tunable solver) and of fusion plans compiled in a timing find
 * mode. `step` runs from 1 to `total` within one Find; `total` is known at the first call.
 * `solver` is the solver's name, `config` the tuning configuration or NULL, `ms` the
 * measured time (-1 when the candidate failed and was skipped), `user` the pointer given
 * here. Both strings are valid during the call only. The callback runs on the thread
 * calling Find, between measurements, and must not unwind (C++ exceptions) into conflux. */
typedef void (*confluxFindProgressCallback)(
    const char* solver, const char* config, int step, int total, float ms, void* user);

/* Install `callback` (with `user`) on `handle`, replacing any earlier one; a NULL
 * callback removes it. A NULL handle gives miopenStatusBadParm. */
MIOPEN_EXPORT miopenStatus_t confluxSetFindProgressCallback(miopenHandle_t handle,
                                                            confluxFindProgressCallback callback,
                                                            void* user);

#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && !defined(__HIP_PLATFORM_AMD__) && !defined(__HIP_PLATFORM_HCC__)
/* HIP's AMD stream type for a C++ program that includes this header before HIP's and is
 * compiled without __HIP_PLATFORM_AMD__ (real MIOpen includes HIP itself, so include order
 * never matters there). Such a stream can only be given to a CPU handle. */
struct ihipStream_t;
inline miopenStatus_t miopenCreateWithStream(miopenHandle_t* handle, ihipStream_t* stream)
{
    return miopenCreateWithStream(handle, reinterpret_cast<miopenAcceleratorQueue_t>(stream));
}
inline miopenStatus_t miopenSetStream(miopenHandle_t handle, ihipStream_t* stream)
{
    return miopenSetStream(handle, reinterpret_cast<miopenAcceleratorQueue_t>(stream));
}
inline miopenStatus_t miopenGetStream(miopenHandle_t handle, ihipStream_t** stream)
{
    return miopenGetStream(handle, reinterpret_cast<miopenAcceleratorQueue_t*>(stream));
}
#endif

/* The rest of MIOpen's public API, by area. Each header says what conflux computes there. */
#include <miopen/miopen_layers.h>
#include <miopen/miopen_find2.h>
#include <miopen/miopen_rnn.h>
#include <miopen/miopen_reduce.h>
#include <miopen/miopen_beta_ops.h>
#include <miopen/miopen_graph.h>

#endif /* MIOPEN_GUARD_MIOPEN_H_ */
