// conflux CUDA kernels: shared definitions. Compiled by NVRTC after a small generated
// preamble that defines CONFLUX_T (the element type), CONFLUX_PARAMS_SIZE and the epilogue
// function `conflux_epilogue`. No CUDA headers are needed: 16-bit types are bit containers
// converted with PTX instructions.

typedef long long i64;

struct h16 { unsigned short u; };   // IEEE half
struct b16 { unsigned short u; };   // bfloat16

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(h16 v) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.u));
    return f;
}
__device__ __forceinline__ float to_f(b16 v) { return __uint_as_float(((unsigned)v.u) << 16); }

template <class T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ h16 from_f<h16>(float v) {
    h16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.u) : "f"(v));
    return r;
}
template <> __device__ __forceinline__ b16 from_f<b16>(float v) {
    // Round to nearest even; NaN stays NaN. One instruction from sm_80 on (it matters in
    // epilogues that store millions of values); bit arithmetic before.
    b16 r;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.u) : "f"(v));
#else
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) { r.u = 0x7fc0; return r; }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.u = (unsigned short)(u >> 16);
#endif
    return r;
}

template <class A, class B> struct same_type { static constexpr bool value = false; };
template <class A> struct same_type<A, A> { static constexpr bool value = true; };

template <class T> __device__ __forceinline__ float ld(const void* p, i64 i) { return to_f(((const T*)p)[i]); }
template <class T> __device__ __forceinline__ void st(void* p, i64 i, float v) { ((T*)p)[i] = from_f<T>(v); }

// Arguments of one epilogue op (mirrors `EpiArgC` in cuda/params.rs).
struct EpiArg {
    const void* p[4];   // bias | bn scale, bias, mean, var | z
    i64 s[5];           // strides N,C,D,H,W of z
    float f[4];         // activation alpha, beta, gamma | bn epsilon | add alpha
};

#define CONFLUX_MAX_EPI 8

// One parameter block for every kernel (mirrors `Params` in cuda/params.rs).
struct Params {
    const void* x;
    const void* w;
    void* y;
    const void* aux[12];
    i64 xs[5], ws[5], ys[5];
    int n, c, k, groups;
    int in[3], out[3], fil[3], pad[3], str[3], dil[3];
    float alpha, beta;
    float f[6];
    EpiArg epi[CONFLUX_MAX_EPI];
};
static_assert(sizeof(Params) == CONFLUX_PARAMS_SIZE, "Params layout differs from the Rust mirror");

// MIOpen's activations (reference doc 2.1); a, b, g are the descriptor's alpha, beta, gamma.
#define ACT_EPS 1e-6f
__device__ __forceinline__ float act_passthru(float x, float, float, float) { return x; }
__device__ __forceinline__ float act_logistic(float x, float, float, float) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float act_tanh(float x, float a, float b, float) { return b * tanhf(a * x); }
__device__ __forceinline__ float act_relu(float x, float, float, float) { return x > 0.f ? x : 0.f; }
__device__ __forceinline__ float act_softrelu(float x, float, float, float) {
    return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
__device__ __forceinline__ float act_abs(float x, float, float, float) { return fabsf(x); }
__device__ __forceinline__ float act_power(float x, float a, float b, float g) {
    float v = a + b * x;
    return v <= ACT_EPS ? 0.f : powf(v, g);
}
__device__ __forceinline__ float act_clippedrelu(float x, float a, float, float) { return fminf(a, fmaxf(0.f, x)); }
__device__ __forceinline__ float act_leakyrelu(float x, float a, float, float) { return x > 0.f ? x : a * x; }
__device__ __forceinline__ float act_elu(float x, float a, float, float) { return x > 0.f ? x : a * expm1f(x); }

// Backward: dx from dy, forward input x and forward output y (MIOpen's quirks kept).
__device__ __forceinline__ float actb_passthru(float dy, float, float, float, float, float) { return dy; }
__device__ __forceinline__ float actb_logistic(float dy, float, float y, float, float, float) { return dy * y * (1.f - y); }
__device__ __forceinline__ float actb_tanh(float dy, float, float y, float a, float b, float) {
    return fabsf(b) <= ACT_EPS ? 0.f : dy * a * (b - y * y / b);
}
__device__ __forceinline__ float actb_relu(float dy, float x, float, float, float, float) { return x > 0.f ? dy : 0.f; }
__device__ __forceinline__ float actb_softrelu(float dy, float x, float, float, float, float) {
    float e = expf(fminf(x, 50.f));
    return dy * e / (e + 1.f);
}
__device__ __forceinline__ float actb_abs(float dy, float x, float, float, float, float) { return x > 0.f ? dy : -dy; }
__device__ __forceinline__ float actb_power(float, float x, float y, float a, float b, float g) {
    float v = a + b * x;
    return v <= ACT_EPS ? 0.f : g * b * y / v;
}
__device__ __forceinline__ float actb_clippedrelu(float dy, float x, float, float a, float, float) {
    return (x > 0.f && x <= a) ? dy : 0.f;
}
__device__ __forceinline__ float actb_leakyrelu(float dy, float x, float, float a, float, float) { return x > 0.f ? dy : dy * a; }
__device__ __forceinline__ float actb_elu(float dy, float x, float y, float a, float, float) { return x > 0.f ? dy : dy * (y + a); }

// Loads of data no kernel writes (operator parameters, and x / w / dy in kernels that only
// read them) through the read-only path. `__ldg` rather than an inline-asm `ld.global.nc`: a
// non-volatile asm is a pure function of its address to the compiler, which then executes it
// wherever its inputs are ready, including above the bounds check of a channel or pixel
// past the end (it read bias[KG..] of grouped layers before their channel guard). `__ldg`
// is a load the compiler knows may fault, so it stays behind its guard, and loads in loops
// that store nothing are still hoisted or shared.
template <class TP> __device__ __forceinline__ float ldp(const void* p, i64 i);
template <> __device__ __forceinline__ float ldp<float>(const void* p, i64 i) { return __ldg((const float*)p + i); }
template <> __device__ __forceinline__ float ldp<h16>(const void* p, i64 i) {
    h16 r;
    r.u = __ldg((const unsigned short*)p + i);
    return to_f(r);
}
template <> __device__ __forceinline__ float ldp<b16>(const void* p, i64 i) {
    b16 r;
    r.u = __ldg((const unsigned short*)p + i);
    return to_f(r);
}

// V consecutive parameters p[j0 .. j0+V) as floats. With ALIGNED (the caller checked that
// the array is 16-byte aligned and j0 is a multiple of V) and V parameters filling whole
// 16-byte words, 16-byte loads: a thread of the NCHW chain kernel reads the per-element BN
// parameters of its vector with 2 loads per array instead of 8 on f16 data. Otherwise one
// load each. Branch-free, so the loads repeated for every image of a chunk are hoisted out
// of the image loop (a run-time alignment branch here defeated that and measured much
// slower: bench/results/2026-11-21-h200-na-3.md).
__device__ __forceinline__ uint4 ldp16(const void* p) { return __ldg((const uint4*)p); }
// The same for an 8-byte word pair (half-width vectors of the direct kernels, `vec16.cuh`).
__device__ __forceinline__ uint2 ldp8(const void* p) { return __ldg((const uint2*)p); }
__device__ __forceinline__ float word_to_f(unsigned w, float*, int) { return __uint_as_float(w); }
__device__ __forceinline__ float word_to_f(unsigned w, h16*, int half) { h16 r; r.u = (unsigned short)(w >> (16 * half)); return to_f(r); }
__device__ __forceinline__ float word_to_f(unsigned w, b16*, int half) { b16 r; r.u = (unsigned short)(w >> (16 * half)); return to_f(r); }
template <class TP, int V, bool ALIGNED> __device__ __forceinline__ void ldp_span(const void* p, i64 j0, float (&out)[V]) {
    const TP* a = (const TP*)p + j0;
    constexpr int per_word = 4 / (int)sizeof(TP);
    if (ALIGNED && (V * sizeof(TP)) % 16 == 0) {
#pragma unroll
        for (int q = 0; q < (int)(V * sizeof(TP) / 16); ++q) {
            const uint4 w = ldp16(a + q * 4 * per_word);
            const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int k = 0; k < 4 * per_word; ++k)
                out[q * 4 * per_word + k] = word_to_f(words[k / per_word], (TP*)0, k % per_word);
        }
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j) out[j] = ldp<TP>(p, j0 + j);
    }
}

// Epilogue building blocks, called by the generated `conflux_epilogue`.
template <class TP> __device__ __forceinline__ float epi_bias(float v, const EpiArg& e, int c) { return v + ldp<TP>(e.p[0], c); }
template <class TP> __device__ __forceinline__ float epi_bn(float v, const EpiArg& e, i64 j) {
    float g = ldp<TP>(e.p[0], j), b = ldp<TP>(e.p[1], j), m = ldp<TP>(e.p[2], j), var = ldp<TP>(e.p[3], j);
    // rsqrtf (one special-function op, ~2 ulp) instead of sqrt + divide: per-activation BN
    // on 16-bit data is otherwise bound by this arithmetic, not by memory.
    return (v - m) * (g * rsqrtf(fabsf(var + e.f[0]))) + b;
}
// BN with per-element parameters on V consecutive elements whose first parameter index is j0.
__device__ __forceinline__ bool aligned16(const void* p) { return ((unsigned long long)p & 15) == 0; }
__device__ __forceinline__ bool bn_params_aligned16(const EpiArg& e) {
    return aligned16(e.p[0]) && aligned16(e.p[1]) && aligned16(e.p[2]) && aligned16(e.p[3]);
}
template <class TP, int V, bool ALIGNED> __device__ __forceinline__ void epi_bn_span(float (&v)[V], const EpiArg& e, i64 j0) {
    float g[V], b[V], m[V], var[V];
    ldp_span<TP, V, ALIGNED>(e.p[0], j0, g);
    ldp_span<TP, V, ALIGNED>(e.p[1], j0, b);
    ldp_span<TP, V, ALIGNED>(e.p[2], j0, m);
    ldp_span<TP, V, ALIGNED>(e.p[3], j0, var);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = (v[j] - m[j]) * (g[j] * rsqrtf(fabsf(var[j] + e.f[0]))) + b[j];
}
template <class TZ> __device__ __forceinline__ float epi_add(float v, const EpiArg& e, int n, int c, int d, int h, int w) {
    return v + e.f[0] * ld<TZ>(e.p[0], n * e.s[0] + c * e.s[1] + d * e.s[2] + h * e.s[3] + w * e.s[4]);
}

// Offset of logical element (n, c, d, h, w) through five strides.
__device__ __forceinline__ i64 off5(const i64* s, int n, int c, int d, int h, int w) {
    return n * s[0] + c * s[1] + d * s[2] + h * s[3] + (i64)w * s[4];
}

// Coordinates of element i of a logical n × c × D × H × W tensor (w fastest).
struct Coord5 { int n, c, d, h, w; };
template <class I> __device__ __forceinline__ Coord5 coord5(I i, int C, int D, int H, int W) {
    Coord5 q;
    q.w = (int)(i % (I)W); i /= (I)W;
    q.h = (int)(i % (I)H); i /= (I)H;
    q.d = (int)(i % (I)D); i /= (I)D;
    q.c = (int)(i % (I)C);
    q.n = (int)(i / (I)C);
    return q;
}

// Whether a grid-stride loop over 0..total may use a 32-bit index (it never passes 2^32):
// the per-element divisions of `coord5` are then 32-bit ones (a 64-bit division costs
// several times more). Kernels instantiate their loop for `unsigned` and for `i64`.
__device__ __forceinline__ bool index32(i64 total) { return total <= (i64)(0xffffffffu - gridDim.x * blockDim.x); }
