// Pointwise kernels: the epilogue chain without a convolution (bias, BN inference,
// activation, residual add in any order) and activation backward. Packed NCHW and NHWC
// tensors take 16-byte vector paths with 32-bit index arithmetic per vector; anything else
// takes the generic strided path. Logical shape: n, c, in[3] (D, H, W).
typedef CONFLUX_T T;
#ifndef CONFLUX_VEC_BYTES
#define CONFLUX_VEC_BYTES 16
#endif
#define VEC (CONFLUX_VEC_BYTES / (int)sizeof(T))

struct alignas(CONFLUX_VEC_BYTES) Vec16 { T v[VEC]; };

template <class I> __device__ __forceinline__ void pw_chain_generic_loop(const Params& p) {
    const int D = p.in[0], H = p.in[1], W = p.in[2];
    const int sp_size = D * H * W;
    const I total = (I)p.n * p.c * sp_size;
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const Coord5 q = coord5(i, p.c, D, H, W);
        const float v = ld<T>(p.x, off5(p.xs, q.n, q.c, q.d, q.h, q.w));
        st<T>(p.y, off5(p.ys, q.n, q.c, q.d, q.h, q.w), conflux_epilogue(v, p.epi, q.n, q.c, q.d, q.h, q.w, (q.d * H + q.h) * W + q.w, sp_size));
    }
}
extern "C" __global__ void pw_chain_generic(const Params p) {
    if (index32((i64)p.n * p.c * p.in[0] * p.in[1] * p.in[2])) pw_chain_generic_loop<unsigned>(p);
    else pw_chain_generic_loop<i64>(p);
}

// Packed NCHW-family: each plane (n, c) holds sp_size contiguous elements and sp_size is a
// multiple of VEC (the solver picks the widest vector, up to 16 bytes, that divides the
// plane) or, with CONFLUX_NCHW_FLAT, C·sp_size is a multiple of VEC and sp_size >= VEC (a
// 16-byte vector may then hold the end of one plane and the start of the next).
// A thread owns one (c, vector) position and walks NCHUNK images of the batch (one grid
// dimension picks the chunk), so parameter loads (hoisted, see `ldp`) are shared by NCHUNK
// images while enough threads stay in flight. The solver sets NCHUNK (8 when per-element
// parameters are read, else 4) and CHUNK_FAST: with per-element parameters the chunk is the
// fastest grid dimension, so that the blocks reading the same parameters run together and
// the parameters come from L2 after the first chunk (with chunks slowest, per-element BN
// read them from DRAM once per chunk, a quarter more traffic than x and y on 112×112 f16).
// Per-channel chains keep neighbouring blocks on neighbouring memory, which chunk-fastest
// order would lose. Measurements: bench/results/2026-11-21-h200-na-2.md.
#ifndef CONFLUX_NCHUNK
#define CONFLUX_NCHUNK 4
#endif
template <bool ALIGNED> __device__ __forceinline__ void pw_chain_nchw_loop(const Params& p) {
    const int H = p.in[1], W = p.in[2];
    const unsigned sp_size = p.in[0] * H * W;
#if CONFLUX_NCHW_FLAT
    // Planes are not a whole number of vectors, but images are: vectors tile each image's
    // C·D·H·W elements, and an element's channel is found from its offset in the image.
    const unsigned items = (unsigned)p.c * sp_size / VEC;
#else
    const unsigned vec_per_plane = sp_size / VEC;
    const unsigned items = (unsigned)p.c * vec_per_plane;
#endif
    const Vec16* x = (const Vec16*)p.x;
    Vec16* y = (Vec16*)p.y;
#if CONFLUX_CHUNK_FAST
    const unsigned chunk = blockIdx.x, item_block = blockIdx.y, item_blocks = gridDim.y;
#else
    const unsigned chunk = blockIdx.y, item_block = blockIdx.x, item_blocks = gridDim.x;
#endif
    for (unsigned i = item_block * blockDim.x + threadIdx.x; i < items; i += item_blocks * blockDim.x) {
#if CONFLUX_NCHW_FLAT
        const int c = i * VEC / sp_size;
        const int sp0 = i * VEC - c * sp_size;
#else
        const int c = i / vec_per_plane;
        const int sp0 = (i - c * vec_per_plane) * VEC;
#endif
        // Channel and plane offset of each element of the vector (the same for every image).
        int cs[VEC], sps[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
#if CONFLUX_NCHW_FLAT
            // The vector may run into the next plane (at most one boundary: sp_size >= VEC).
            cs[j] = c + (sp0 + j >= (int)sp_size);
            sps[j] = sp0 + j - (cs[j] - c) * (int)sp_size;
#else
            cs[j] = c;
            sps[j] = sp0 + j;
#endif
        }
        const int n0 = chunk * CONFLUX_NCHUNK;
        const int count = min(CONFLUX_NCHUNK, p.n - n0);
        // Every image's load first, so NCHUNK independent 16-byte loads per thread are in
        // flight (small tensors give each SM few threads; one load at a time leaves bandwidth
        // unused). Measured best on the H200 (na.txt); smaller batches of loads lost
        // bandwidth on per-element BN (bench/results/2026-11-27-history-from-status.md,
        // pointwise.cu).
        Vec16 a[CONFLUX_NCHUNK];
#pragma unroll
        for (int k = 0; k < CONFLUX_NCHUNK; ++k)
            if (k < count) a[k] = x[(size_t)(n0 + k) * items + i];
#pragma unroll
        for (int k = 0; k < CONFLUX_NCHUNK; ++k) {
            if (k >= count) break;
            const int n = n0 + k;
            // The vector's elements are consecutive in the image, so per-element parameters
            // are read as vectors (`conflux_epilogue_span`).
            float v[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[j] = to_f(a[k].v[j]);
            conflux_epilogue_span<VEC, ALIGNED>(v, p.epi, n, cs, sps, sp_size, H, W);
            Vec16 b;
#pragma unroll
            for (int j = 0; j < VEC; ++j) b.v[j] = from_f<T>(v[j]);
            y[(size_t)n * items + i] = b;
        }
    }
}

// Per-element parameters are read as vectors when their arrays are 16-byte aligned: one
// uniform test here, so that the loop's loads carry no branch and stay hoisted. Only for
// 16-bit data, where it measured faster; f32 data measured slightly slower with vectors, so
// it keeps scalar loads (bench/results/2026-11-21-h200-na-3.md).
extern "C" __global__ void pw_chain_nchw(const Params p) {
    if (sizeof(T) == 2 && conflux_span_aligned(p.epi)) pw_chain_nchw_loop<true>(p);
    else pw_chain_nchw_loop<false>(p);
}

// Packed NHWC-family: channels innermost, c % VEC == 0.
#define NHWC_UNROLL 4
extern "C" __global__ void pw_chain_nhwc(const Params p) {
    const int H = p.in[1], W = p.in[2];
    const unsigned sp_size = p.in[0] * H * W;
    const unsigned cvec = p.c / VEC;
    const unsigned total = (unsigned)p.n * sp_size * cvec;
    const Vec16* x = (const Vec16*)p.x;
    Vec16* y = (Vec16*)p.y;
    // NHWC_UNROLL vectors per thread pass, loaded before any is computed (bytes in flight).
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < total; i0 += NHWC_UNROLL * stride) {
        Vec16 a[NHWC_UNROLL];
#pragma unroll
        for (int k = 0; k < NHWC_UNROLL; ++k)
            if (i0 + k * stride < total) a[k] = x[i0 + k * stride];
#pragma unroll
        for (int k = 0; k < NHWC_UNROLL; ++k) {
            const unsigned i = i0 + k * stride;
            if (i >= total) break;
            const unsigned pix = i / cvec;
            const int c0 = (i - pix * cvec) * VEC;
            const int sp = pix % sp_size, n = pix / sp_size;
            const int w = sp % W, h = (sp / W) % H, d = sp / (W * H);
            Vec16 b;
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                b.v[j] = from_f<T>(conflux_epilogue(to_f(a[k].v[j]), p.epi, n, c0 + j, d, h, w, sp, sp_size));
            y[i] = b;
        }
    }
}

// dx = act_backward(dy, x, y); x = aux[0] (may be NULL when the mode does not read it),
// y = aux[1] (NULL: recomputed from x). dy is p.x, dx is p.y; x and y share dy's strides.
template <class I> __device__ __forceinline__ void act_bwd_generic_loop(const Params& p) {
    const int D = p.in[0], H = p.in[1], W = p.in[2];
    const I total = (I)p.n * p.c * D * H * W;
    const float a = p.f[0], b = p.f[1], g = p.f[2];
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const Coord5 q = coord5(i, p.c, D, H, W);
        const i64 o = off5(p.xs, q.n, q.c, q.d, q.h, q.w);
        const float dy = ld<T>(p.x, o);
        const float x = p.aux[0] ? ld<T>(p.aux[0], o) : 0.f;
        const float y = p.aux[1] ? ld<T>(p.aux[1], o) : CONFLUX_ACT(x, a, b, g);
        st<T>(p.y, off5(p.ys, q.n, q.c, q.d, q.h, q.w), CONFLUX_ACTB(dy, x, y, a, b, g));
    }
}
extern "C" __global__ void act_bwd_generic(const Params p) {
    if (index32((i64)p.n * p.c * p.in[0] * p.in[1] * p.in[2])) act_bwd_generic_loop<unsigned>(p);
    else act_bwd_generic_loop<i64>(p);
}
