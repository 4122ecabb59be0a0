// Hopper bulk tensor copies (TMA, sm_90) and the shared-memory barriers they complete on.
// A tensor map is an opaque 128-byte descriptor made on the host (cuTensorMapEncode*) and
// passed in the kernel's parameter block; the copy engine reads it through its generic
// address.

struct __align__(64) TensorMap { unsigned long long opaque[16]; };

// mbarrier: a phase completes when `count` arrivals happened and every byte announced with
// expect_tx has landed. Waiters name the parity of the phase they wait for.
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the copy engine (async proxy).
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Spins until the phase of parity `parity` has completed (a fresh barrier counts its
// "previous" phase, parity 1, as completed).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// im2col load of a 4-D channels-last tensor (dims C, W, H, N): `pixels-per-column` output
// pixels starting at the one whose filter window's corner is input (w, h) of image n,
// channels [c, c + channels-per-pixel), shifted by the filter tap (ow, oh). Pixels outside
// the image read as zeros.
__device__ __forceinline__ void tma_load_im2col_4d(unsigned dst, const TensorMap* map, unsigned bar, int c, int w, int h, int n, unsigned short ow, unsigned short oh) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(dst),
        "l"(map), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n), "h"(ow), "h"(oh)
        : "memory");
}

// im2col load of a 5-D channels-last tensor (dims C, W, H, D, N): as the 4-D load, for 3-D
// convolutions, with the tap's depth offset `od` too (offsets of 5-D copies are 5 bits wide).
__device__ __forceinline__ void tma_load_im2col_5d(unsigned dst, const TensorMap* map, unsigned bar, int c, int w, int h, int d, int n, unsigned short ow, unsigned short oh, unsigned short od) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6, %7}], [%2], {%8, %9, %10};\n" ::"r"(dst),
        "l"(map), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(d), "r"(n), "h"(ow), "h"(oh), "h"(od)
        : "memory");
}

// Box load of a 2-D tensor at (inner x0, outer x1); rows past the tensor read as zeros.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar, int x0, int x1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
        "l"(map), "r"(bar), "r"(x0), "r"(x1)
        : "memory");
}

// Box load of a 3-D tensor at (x0, x1, x2), innermost first; elements past the tensor read as
// zeros.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, unsigned bar, int x0, int x1, int x2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
        "l"(map), "r"(bar), "r"(x0), "r"(x1), "r"(x2)
        : "memory");
}

// Synchronises the `threads` threads of one warpgroup-sized team on hardware barrier `id`
// (0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Box store of a 2-D tensor from shared memory at (inner x0, outer x1); parts of the box past
// the tensor are not written. Completes in bulk groups (commit / wait below).
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, unsigned src, int x0, int x1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map), "r"(src), "r"(x0), "r"(x1)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N committed store groups are still reading their shared-memory source.
template <int N> __device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory"); }
// Until at most N committed store groups are incomplete.
template <int N> __device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"); }

// The shared memory of a TMA pipeline of `stages` buffers: buffers from a 1024-byte aligned
// base (the 128-byte swizzle is anchored to 1024-byte aligned tiles; launches reserve 1 KiB
// extra), then `stages` full and `stages` empty mbarriers after `buffer_bytes`.
struct TmaRing {
    unsigned char* base;
    unsigned sbase, bars, stages;
    __device__ __forceinline__ unsigned full(int s) const { return bars + 8 * s; }
    __device__ __forceinline__ unsigned empty(int s) const { return bars + 8 * (stages + s); }
};

__device__ __forceinline__ TmaRing tma_ring(unsigned char* smem_raw, unsigned buffer_bytes, unsigned stages) {
    const unsigned raw = smem_addr(smem_raw);
    unsigned char* base = smem_raw + (((raw + 1023) & ~1023u) - raw);
    const unsigned sbase = smem_addr(base);
    return TmaRing{base, sbase, sbase + buffer_bytes, stages};
}

// Thread 0 initialises the barriers (full: the producer's arrival plus the copied bytes;
// empty: `releases` consumer arrivals), then the block synchronises.
__device__ __forceinline__ void tma_ring_init(const TmaRing& r, unsigned releases) {
    if (threadIdx.x == 0) {
        for (unsigned s = 0; s < r.stages; ++s) {
            mbar_init(r.full(s), 1);
            mbar_init(r.empty(s), releases);
        }
        mbar_init_fence();
    }
    __syncthreads();
}
