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

struct CUstream_st;
/* A CUDA stream (CUstream / cudaStream_t). NULL is the default stream; CPU handles have
 * no stream and accept only NULL. */
typedef struct CUstream_st* miopenAcceleratorQueue_t;

#endif /* MIOPEN_CONFIG_H_ */
