// Shared by the tensor-core convolution kernels (conv_igemm_tc.cu and conv_grouped_tc.cu:
// mma.sync; conv_igemm_wgmma.cu, conv_igemm_tma.cu: Hopper wgmma): asynchronous 16-byte copies,
// the pixel and filter-tap decomposition, and the output store through the epilogue. The
// including kernel's generated preamble defines the geometry (every stride a compile-time
// constant; only the batch size is not).
typedef CONFLUX_T T;
// y's element type: T, except in quantized kernels (int8 / fp8 x and w, quant.cuh).
#ifdef CONFLUX_TY
typedef CONFLUX_TY TY;
#else
typedef T TY;
#endif

#define OSP (OD * OH * OW)
#define FS (FD * FH * FW)
#define KRED (CG * FS)

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// 16-byte asynchronous copy; `valid == false` writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Output pixel m → (n, od, oh, ow).
struct Pixel { int n, od, oh, ow; };
__device__ __forceinline__ Pixel pixel_of(int m) {
    Pixel q;
    q.ow = m % OW;
    int t = m / OW;
    q.oh = t % OH;
    t /= OH;
    q.od = t % OD;
    q.n = t / OD;
    return q;
}

// Reduction index kk → (c, rd, rh, rw), channels fastest.
struct Tap { int c, rd, rh, rw; };
__device__ __forceinline__ Tap tap_of(int kk) {
    Tap t;
    t.c = kk % CG;
    int r = kk / CG;
    t.rw = r % FW;
    r /= FW;
    t.rh = r % FH;
    t.rd = r / FH;
    return t;
}

// One output pixel row of the tile: where its channels live in y.
struct OutRow {
    Pixel q;
    int sp;
    i64 off;
};
__device__ __forceinline__ OutRow out_row(int m) {
    OutRow r;
    r.q = pixel_of(m);
    r.sp = (r.q.od * OH + r.q.oh) * OW + r.q.ow;
    r.off = (i64)r.q.n * YS_N + (i64)r.q.od * YS_D + (i64)r.q.oh * YS_H + (i64)r.q.ow * YS_W;
    return r;
}

// Where pixel m's channels start in y; packed pixel rows (the usual channels-last y) need no
// division. (A 2-D y has D stride 0: only the N stride says whether images are packed.)
#define Y_PIXEL_LINEAR (YS_H == OW * YS_W && (OD == 1 || YS_D == OH * YS_H) && YS_N == OD * OH * YS_H)
__device__ __forceinline__ i64 y_row_offset(int m) {
    if (Y_PIXEL_LINEAR) return (i64)m * YS_W;
    return out_row(m).off;
}

// Where output channel k lies in a pixel's row of y: k·YS_C, or, with Y_SEG (the channels
// split into runs of Y_SEG, each Y_SEG_STRIDE elements after the last: backward-data of patch
// layers, whose GEMM columns (filter row, filter column, channel) land in fy rows of dx,
// bwd_data_patch.rs), (k / Y_SEG)·Y_SEG_STRIDE + (k % Y_SEG)·YS_C. Y_SEG is even, so a pair
// of channels kn, kn + 1 (kn even) never straddles two runs.
#ifndef Y_SEG
#define Y_SEG 0
#define Y_SEG_STRIDE 0
#endif
static_assert(Y_SEG % 2 == 0, "channel runs hold whole pairs");
__device__ __forceinline__ i64 y_chan(int k) {
    if (Y_SEG) return (i64)(k / (Y_SEG ? Y_SEG : 1)) * Y_SEG_STRIDE + (i64)(k % (Y_SEG ? Y_SEG : 1)) * YS_C;
    return (i64)k * YS_C;
}

// Channels kn and kn + 1 (within group g) of one output row through α/β and the generated
// epilogue chain; channels past KG come out as 0 and must not be stored.
__device__ __forceinline__ void epilogue_pair(const Params& p, const OutRow& r, int g, int kn, float a0, float a1, float (&v)[2]) {
    const float acc[2] = {a0, a1};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        v[e] = 0.f;
        if (kn + e >= KG) continue;   // the epilogue may read per-channel data
        const int k = g * KG + kn + e;
        float t = p.alpha * acc[e];
        if (p.beta != 0.f) t += p.beta * ld<TY>(p.y, r.off + y_chan(k));
        v[e] = conflux_epilogue(t, p.epi, r.q.n, k, r.q.od, r.q.oh, r.q.ow, r.sp, OSP);
    }
}

// Two 16-bit values in one word (a template so that f32 kernels, which never call it,
// compile).
template <class U = TY> __device__ __forceinline__ unsigned pack2(float a, float b) {
    return (unsigned)from_f<U>(a).u | ((unsigned)from_f<U>(b).u << 16);
}

// Two adjacent elements of y in one store: a word for 16-bit types, 8 bytes for f32 (TF32
// kernels) and int32, 2 bytes for int8.
template <class U = TY> __device__ __forceinline__ void st2(void* y, i64 o, const float (&v)[2]) {
    if constexpr (sizeof(U) == 4) {
#ifdef QUANT_INT8
        if constexpr (same_type<U, s32>::value) {
            *(int2*)((U*)y + o) = make_int2(from_f<U>(v[0]).u, from_f<U>(v[1]).u);
            return;
        }
#endif
        *(float2*)((U*)y + o) = make_float2(v[0], v[1]);
    } else if constexpr (sizeof(U) == 1) {
        *(unsigned short*)((U*)y + o) = (unsigned short)((unsigned char)from_f<U>(v[0]).u | ((unsigned)(unsigned char)from_f<U>(v[1]).u << 8));
    } else {
        *(unsigned*)((U*)y + o) = pack2<U>(v[0], v[1]);
    }
}

// Finished values of channels kn and kn + 1 stored straight to y (both at once when
// PAIR_STORE says they are adjacent and aligned). Stochastically rounded fp8 elements each
// take the bits of their own logical index.
__device__ __forceinline__ void put_pair(const Params& p, const OutRow& r, int g, int kn, const float (&v)[2]) {
    const i64 o = r.off + y_chan(g * KG + kn);
#if FP8_STOCHASTIC
    for (int e = 0; e < 2; ++e)
        if (kn + e < KG) st_q<TY>(p.y, o + e * YS_C, v[e], ((unsigned long long)r.q.n * p.k + g * KG + kn + e) * OSP + r.sp);
    return;
#endif
#if PAIR_STORE
    if (kn + 1 < KG) {
        st2(p.y, o, v);
        return;
    }
#endif
    if (kn < KG) st<TY>(p.y, o, v[0]);
    if (kn + 1 < KG) st<TY>(p.y, o + YS_C, v[1]);
}

// epilogue_pair, then put_pair.
__device__ __forceinline__ void store_pair(const Params& p, const OutRow& r, int g, int kn, float a0, float a1) {
    float v[2];
    epilogue_pair(p, r, g, kn, a0, a1, v);
    put_pair(p, r, g, kn, v);
}
