// conflux's extension activations (miopen.h values 100-105; no parameters), forward and
// backward, in the same arrangement as the CPU and the reference (src/activation/modern.rs):
// exponentials of non-positive arguments only, 1 + tanh(u) as 2*sigmoid(2u) and 1 + erf(z) as
// erfc(-z) so that negative inputs do not cancel, and Mish's softplus threshold at 20. Every
// finite input gives a finite result.

// (sigmoid(x), 1 - sigmoid(x)), both without cancellation.
__device__ __forceinline__ float2 act_sigmoid_pair(float x) {
    const float e = expf(-fabsf(x));
    const float big = 1.f / (1.f + e), small = e * big;
    return x >= 0.f ? make_float2(big, small) : make_float2(small, big);
}
__device__ __forceinline__ float act_ramp(float x) { return fminf(fmaxf(x + 3.f, 0.f), 6.f); }
// u = sqrt(2/pi) * (x + 0.044715 x^3)
__device__ __forceinline__ float act_gelu_tanh_arg(float x) { return 0.7978845608f * (x + 0.044715f * x * x * x); }

__device__ __forceinline__ float act_silu(float x, float, float, float) { return x * act_sigmoid_pair(x).x; }
__device__ __forceinline__ float act_hardswish(float x, float, float, float) { return x * (act_ramp(x) / 6.f); }
__device__ __forceinline__ float act_hardsigmoid(float x, float, float, float) { return act_ramp(x) / 6.f; }
__device__ __forceinline__ float act_gelu(float x, float, float, float) { return 0.5f * x * erfcf(-x * 0.70710678118f); }
__device__ __forceinline__ float act_gelu_tanh(float x, float, float, float) {
    return x * act_sigmoid_pair(2.f * act_gelu_tanh_arg(x)).x;
}
__device__ __forceinline__ float act_mish(float x, float, float, float) {
    const float e = expf(fminf(x, 20.f)), n = e * (e + 2.f);
    return x * (n / (n + 2.f));
}

__device__ __forceinline__ float actb_silu(float dy, float x, float, float, float, float) {
    const float2 s = act_sigmoid_pair(x);
    return dy * (s.x * (1.f + x * s.y));
}
// PyTorch's conventions at the kinks.
__device__ __forceinline__ float actb_hardswish(float dy, float x, float, float, float, float) {
    return x < -3.f ? 0.f : (x <= 3.f ? dy * (x / 3.f + 0.5f) : dy);
}
__device__ __forceinline__ float actb_hardsigmoid(float dy, float x, float, float, float, float) {
    return (x > -3.f && x < 3.f) ? dy / 6.f : 0.f;
}
__device__ __forceinline__ float actb_gelu(float dy, float x, float, float, float, float) {
    const float cdf = 0.5f * erfcf(-x * 0.70710678118f);
    const float pdf = expf(-0.5f * x * x) * 0.3989422804f;
    return dy * (cdf + x * pdf);
}
__device__ __forceinline__ float actb_gelu_tanh(float dy, float x, float, float, float, float) {
    const float2 s = act_sigmoid_pair(2.f * act_gelu_tanh_arg(x));
    const float q = s.x * s.y;
    const float du = 2.f * 0.7978845608f * (1.f + 3.f * 0.044715f * x * x);
    // Where q underflows to 0, x * du may overflow: the term is 0 there.
    return dy * (s.x + (q > 0.f ? x * du * q : 0.f));
}
__device__ __forceinline__ float actb_mish(float dy, float x, float, float, float, float) {
    if (x > 20.f) return dy;
    const float e = expf(x), n = e * (e + 2.f), m = n + 2.f;
    const float t = n / m, one_minus_t2 = 4.f * (n + 1.f) / (m * m), sigma = e / (1.f + e);
    return dy * (t + x * one_minus_t2 * sigma);
}
