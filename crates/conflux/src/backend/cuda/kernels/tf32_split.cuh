// An f32 value as the sum of two TF32 values (10-bit mantissas): hi, the value rounded to
// TF32, and lo, the rest (exact in f32) rounded to TF32. hi + lo is within 2^-22 of the value,
// so the three products hi·hi + hi·lo + lo·hi on TF32 tensor cores ("3xTF32"; lo·lo, below
// 2^-22 relative, is dropped) carry f32 accuracy. Non-finite values keep lo = 0.

__device__ __forceinline__ unsigned tf32_round(float v) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
    return r;
}

__device__ __forceinline__ void tf32_split(float v, unsigned& hi, unsigned& lo) {
    unsigned h = tf32_round(v);
    // Values within half a TF32 step of the largest float round to infinity: truncate them.
    if (isinf(__uint_as_float(h)) && !isinf(v)) h = __float_as_uint(v) & 0xffffe000u;
    hi = h;
    lo = isfinite(v) ? tf32_round(v - __uint_as_float(h)) : 0u;
}
