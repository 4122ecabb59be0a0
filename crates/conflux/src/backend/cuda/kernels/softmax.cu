// Softmax forward and backward. Compile-time constants from the generated preamble (prefixed
// SM_, clear of common.cuh's names): SM_N, SM_C, SM_D, SM_H, SM_W; SM_INSTANCE (groups are
// whole images, else the channels of one pixel); SM_ALGO (0 fast, 1 accurate, 2 log);
// SM_LANES (threads per group: 32, a warp reducing with shuffles, or 1, a thread per group,
// where neighbouring groups are neighbours in memory: planar channel mode); SM_S0_*, SM_S1_*,
// SM_S2_* the strides (N, C, D, H, W) of the three tensors.
// Forward: x = p.x, y = p.y. Backward: dy = p.x, y = p.w, dx = p.y.
typedef CONFLUX_T T;

#if SM_INSTANCE
#define SM_GROUPS (SM_N)
#define SM_GROUP_LEN (SM_C * SM_D * SM_H * SM_W)
#else
#define SM_GROUPS (SM_N * SM_D * SM_H * SM_W)
#define SM_GROUP_LEN (SM_C)
#endif

#define S_AT(k, n, c, d, h, w) ((i64)(n) * SM_S##k##_N + (i64)(c) * SM_S##k##_C + (i64)(d) * SM_S##k##_D + (i64)(h) * SM_S##k##_H + (i64)(w) * SM_S##k##_W)

// Offset of element e of group g in tensor k (0, 1 or 2).
template <int K> __device__ __forceinline__ i64 at(int g, int e) {
#if SM_INSTANCE
    const int n = g, w = e % SM_W, h = (e / SM_W) % SM_H, d = (e / (SM_W * SM_H)) % SM_D, c = e / (SM_W * SM_H * SM_D);
#else
    const int c = e, w = g % SM_W, h = (g / SM_W) % SM_H, d = (g / (SM_W * SM_H)) % SM_D, n = g / (SM_W * SM_H * SM_D);
#endif
    if (K == 0) return S_AT(0, n, c, d, h, w);
    if (K == 1) return S_AT(1, n, c, d, h, w);
    return S_AT(2, n, c, d, h, w);
}

__device__ __forceinline__ float reduce_max(float v) {
#if SM_LANES > 1
#pragma unroll
    for (int o = SM_LANES / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
#endif
    return v;
}
__device__ __forceinline__ float reduce_sum(float v) {
#if SM_LANES > 1
#pragma unroll
    for (int o = SM_LANES / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
#endif
    return v;
}

extern "C" __global__ void softmax_fwd(const Params p) {
    const int per_block = blockDim.x / SM_LANES, lane = threadIdx.x % SM_LANES;
    // Whole warps stay together for the shuffles: the group loop's bound is uniform per warp.
    for (int g0 = blockIdx.x * per_block; g0 < SM_GROUPS; g0 += gridDim.x * per_block) {
        const int g = g0 + threadIdx.x / SM_LANES;
        const bool live = g < SM_GROUPS;
        float m = 0.f;
#if SM_ALGO != 0
        m = -__int_as_float(0x7f800000);
        if (live)
            for (int e = lane; e < SM_GROUP_LEN; e += SM_LANES) m = fmaxf(m, ld<T>(p.x, at<0>(g, e)));
        m = reduce_max(m);
#endif
        float s = 0.f;
        if (live)
            for (int e = lane; e < SM_GROUP_LEN; e += SM_LANES) s += expf(ld<T>(p.x, at<0>(g, e)) - m);
        s = reduce_sum(s);
        const float log_s = logf(s), inv_s = 1.f / s;
        if (live)
            for (int e = lane; e < SM_GROUP_LEN; e += SM_LANES) {
                const float v = ld<T>(p.x, at<0>(g, e)) - m;
#if SM_ALGO == 2
                const float r = v - log_s;
#else
                const float r = expf(v) * inv_s;
#endif
                const i64 o = at<2>(g, e);
                st<T>(p.y, o, p.alpha * r + (p.beta != 0.f ? p.beta * ld<T>(p.y, o) : 0.f));
            }
        (void)log_s;
        (void)inv_s;
    }
}

extern "C" __global__ void softmax_bwd(const Params p) {
    const int per_block = blockDim.x / SM_LANES, lane = threadIdx.x % SM_LANES;
    for (int g0 = blockIdx.x * per_block; g0 < SM_GROUPS; g0 += gridDim.x * per_block) {
        const int g = g0 + threadIdx.x / SM_LANES;
        const bool live = g < SM_GROUPS;
        float s = 0.f;
        if (live)
            for (int e = lane; e < SM_GROUP_LEN; e += SM_LANES) {
#if SM_ALGO == 2
                s += ld<T>(p.x, at<0>(g, e));
#else
                s += ld<T>(p.x, at<0>(g, e)) * ld<T>(p.w, at<1>(g, e));
#endif
            }
        s = reduce_sum(s);
        if (live)
            for (int e = lane; e < SM_GROUP_LEN; e += SM_LANES) {
                const float dy = ld<T>(p.x, at<0>(g, e)), y = ld<T>(p.w, at<1>(g, e));
#if SM_ALGO == 2
                const float r = dy - expf(y) * s;
#else
                const float r = y * (dy - s);
#endif
                const i64 o = at<2>(g, e);
                st<T>(p.y, o, p.alpha * r + (p.beta != 0.f ? p.beta * ld<T>(p.y, o) : 0.f));
            }
    }
}
