// Element types of quantized convolutions (src/quant.rs has the rules): int8 and int32 codes,
// fp8 e4m3 / e5m2 codes. Loads decode exactly; stores round as quant.rs says: int8 / int32
// round half to even and saturate (NaN → 0), fp8 round to nearest even or stochastically
// with the bits of the element's logical index, saturating finite overflow. Included after
// common.cuh by the quantized kernels only.

struct s8 { signed char u; };     // int8
struct s32 { int u; };            // int32
struct e4m3 { unsigned char u; }; // OCP fp8 e4m3fn: bias 7, max 448, no infinities, NaN 0x7f
struct e5m2 { unsigned char u; }; // fp8 e5m2: bias 15, max 57344, inf 0x7c, NaN 0x7d..0x7f

__device__ __forceinline__ float to_f(s8 v) { return (float)v.u; }
__device__ __forceinline__ float to_f(s32 v) { return (float)v.u; }
__device__ __forceinline__ float to_f(e4m3 v) {
    const unsigned c = v.u, sign = (c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;
    if (e == 15u && m == 7u) return __uint_as_float(sign | 0x7fc00000u);
    if (e == 0u) return __uint_as_float(sign | __float_as_uint((float)m * 0.001953125f));   // m · 2^-9
    return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}
__device__ __forceinline__ float to_f(e5m2 v) {
    // e5m2 is the top byte of an IEEE half with the same value.
    h16 h;
    h.u = (unsigned short)(v.u << 8);
    return to_f(h);
}

template <> __device__ __forceinline__ s8 from_f<s8>(float v) {
    int r;
    asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(v));
    return s8{(signed char)r};
}
template <> __device__ __forceinline__ s32 from_f<s32>(float v) {
    int r;
    asm("cvt.rni.s32.f32 %0, %1;" : "=r"(r) : "f"(v));   // saturates; NaN → 0
    return s32{r};
}

// The 24 random bits of output element `index` (quant.rs `stochastic_bits`).
#define CONFLUX_STOCHASTIC_SEED 0x9E3779B97F4A7C15ull
__device__ __forceinline__ unsigned stochastic_bits(unsigned long long index) {
    unsigned long long z = (index ^ CONFLUX_STOCHASTIC_SEED) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (unsigned)(z >> 40);
}

// v as an fp8 code with MB mantissa bits and exponent bias BIAS; `stochastic` rounds up when
// `bits` < frac·2^24 (quant.rs `Fp8::encode`).
template <int MB, int BIAS>
__device__ __forceinline__ unsigned char f8_encode(float v, bool stochastic, unsigned bits) {
    constexpr bool E4M3 = MB == 3;
    constexpr unsigned MAX_CODE = E4M3 ? 0x7eu : 0x7bu, NAN_CODE = E4M3 ? 0x7fu : 0x7eu;
    constexpr float MAX = E4M3 ? 448.f : 57344.f;
    constexpr int EMIN = 1 - BIAS;
    const unsigned sign = (__float_as_uint(v) >> 24) & 0x80u;
    if (v != v) return (unsigned char)(sign | NAN_CODE);
    const float a = fabsf(v);
    if (!E4M3 && a == __int_as_float(0x7f800000)) return (unsigned char)(sign | 0x7cu);
    if (a >= MAX) return (unsigned char)(sign | MAX_CODE);
    const float smallest_normal = __uint_as_float((unsigned)(EMIN + 127) << 23);
    const bool sub = a < smallest_normal;
    const int e = sub ? EMIN : (int)((__float_as_uint(a) >> 23) & 0xff) - 127;
    // a / 2^(e − MB), exact (a power-of-two scaling of a value far from f32's limits).
    const float t = a * __uint_as_float((unsigned)(MB - e + 127) << 23);
    float n;
    if (stochastic) {
        const float lo = floorf(t);
        n = (float)bits < (t - lo) * 16777216.f ? lo + 1.f : lo;
    } else {
        n = rintf(t);
    }
    const unsigned base = sub ? 0u : (unsigned)(e - EMIN) << MB;
    const unsigned code = base + (unsigned)n;
    return (unsigned char)(sign | (code < MAX_CODE ? code : MAX_CODE));
}
template <> __device__ __forceinline__ e4m3 from_f<e4m3>(float v) { return e4m3{f8_encode<3, 7>(v, false, 0)}; }
template <> __device__ __forceinline__ e5m2 from_f<e5m2>(float v) { return e5m2{f8_encode<2, 15>(v, false, 0)}; }

// Stores v as element `o` of a y of type U; `index` is its logical (N, C, D, H, W) index,
// which only stochastic fp8 rounding (FP8_STOCHASTIC) reads.
#ifndef FP8_STOCHASTIC
#define FP8_STOCHASTIC 0
#endif
template <class U> __device__ __forceinline__ void st_q(void* y, i64 o, float v, unsigned long long index) {
    if constexpr (same_type<U, e4m3>::value || same_type<U, e5m2>::value) {
        if (FP8_STOCHASTIC) {
            const unsigned bits = stochastic_bits(index);
            ((U*)y)[o].u = same_type<U, e4m3>::value ? f8_encode<3, 7>(v, true, bits) : f8_encode<2, 15>(v, true, bits);
            return;
        }
    }
    ((U*)y)[o] = from_f<U>(v);
}
