/*
 * conflux: config.h — the backend choice miopen.h depends on.
 *
 * MIOpen's own config.h selects OpenCL or HIP, and miopen.h then takes the queue type and
 * <stdint.h> from those runtimes' headers. conflux runs on CUDA GPUs and on CPUs, so this
 * file selects neither and supplies both itself: the queue is a CUDA stream, declared
 * through the opaque struct that CUstream and cudaStream_t point to, so no CUDA header is
 * needed and values of either CUDA type convert without a cast.
 */
#ifndef MIOPEN_CONFIG_H_
#define MIOPEN_CONFIG_H_

#include <stdint.h>

#define MIOPEN_BACKEND_OPENCL 0
#define MIOPEN_BACKEND_HIP 0
/* conflux: CUDA (device pointers, CUstream) or CPU (host pointers, no stream). */
#define MIOPEN_BACKEND_CONFLUX 1

/* The MIOpen API level implemented (what miopenGetVersion reports). */
#define MIOPEN_VERSION_MAJOR 3
#define MIOPEN_VERSION_MINOR 3
#define MIOPEN_VERSION_PATCH 0

/* The stream handles take: CUDA's (CUstream / cudaStream_t), NULL for the default stream.
 * HIP programs pass hipStream_t, which is `struct ihipStream_t*` on HIP's AMD platform and
 * CUDA's stream on its NVIDIA platform: a program that includes HIP's headers first (defining
 * __HIP_PLATFORM_AMD__) gets the AMD type, so it compiles unchanged; such a stream can only be
 * given to a CPU handle. A CPU handle keeps any stream (miopenGetStream returns it) and
 * otherwise ignores it. */
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
struct ihipStream_t;
typedef struct ihipStream_t* miopenAcceleratorQueue_t;
#else
struct CUstream_st;
typedef struct CUstream_st* miopenAcceleratorQueue_t;
#endif

#endif /* MIOPEN_CONFIG_H_ */
