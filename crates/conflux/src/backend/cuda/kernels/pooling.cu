// Pooling forward and backward. Every size and stride is a compile-time constant from the
// generated preamble (prefixed PL_, clear of common.cuh's names): PL_N, PL_C; input PL_ID,
// PL_IH, PL_IW; output PL_OD, PL_OH, PL_OW; window PL_K*, stride PL_S*, padding PL_P* (D, H, W);
// PL_XS_* the input-side strides (x, or dx), PL_YS_* the output-side strides (y, or dy);
// PL_POOL_MODE (0 max, 1 average, 2 inclusive average); PL_SAVE_INDEX; PL_INDEX_T and
// PL_INDEX_IMAGE (image rather than window positions); PL_C_FASTEST (threads take channels
// innermost, for channels-last tensors; else W innermost).
// Params: x = source (x or dy), y = destination (y or dx), aux[0] = indices (packed N, C, D,
// H, W order), alpha, beta.
typedef CONFLUX_T T;

__device__ __forceinline__ i64 x_at(int n, int c, int d, int h, int w) {
    return (i64)n * PL_XS_N + (i64)c * PL_XS_C + (i64)d * PL_XS_D + (i64)h * PL_XS_H + (i64)w * PL_XS_W;
}
__device__ __forceinline__ i64 y_at(int n, int c, int d, int h, int w) {
    return (i64)n * PL_YS_N + (i64)c * PL_YS_C + (i64)d * PL_YS_D + (i64)h * PL_YS_H + (i64)w * PL_YS_W;
}
__device__ __forceinline__ i64 index_at(int n, int c, int d, int h, int w) {
    return ((((i64)n * PL_C + c) * PL_OD + d) * PL_OH + h) * PL_OW + w;
}
// The recorded index of input (d, h, w) as the maximum of output (od, oh, ow).
__device__ __forceinline__ unsigned long long index_of(int d, int h, int w, int od, int oh, int ow) {
#if PL_INDEX_IMAGE
    return ((unsigned long long)d * PL_IH + h) * PL_IW + w;
#else
    return ((unsigned long long)(d + PL_PD - od * PL_SD) * PL_KH + (h + PL_PH - oh * PL_SH)) * PL_KW + (w + PL_PW - ow * PL_SW);
#endif
}
__device__ __forceinline__ float divisor(int od, int oh, int ow) {
#if PL_POOL_MODE == 2
    return (float)(PL_KD * PL_KH * PL_KW);
#else
    const int d0 = od * PL_SD - PL_PD, h0 = oh * PL_SH - PL_PH, w0 = ow * PL_SW - PL_PW;
    const int cnt = (min(d0 + PL_KD, PL_ID) - max(d0, 0)) * (min(h0 + PL_KH, PL_IH) - max(h0, 0)) * (min(w0 + PL_KW, PL_IW) - max(w0, 0));
    return (float)max(cnt, 1);
#endif
}

// Split a flat thread index into (n, c, d, h, w) of extents (PL_N, PL_C, E0, E1, E2).
template <int E0, int E1, int E2> __device__ __forceinline__ void split(i64 i, int& n, int& c, int& d, int& h, int& w) {
#if PL_C_FASTEST
    c = (int)(i % PL_C); i /= PL_C;
    w = (int)(i % E2); i /= E2;
    h = (int)(i % E1); i /= E1;
    d = (int)(i % E0); n = (int)(i / E0);
#else
    w = (int)(i % E2); i /= E2;
    h = (int)(i % E1); i /= E1;
    d = (int)(i % E0); i /= E0;
    c = (int)(i % PL_C); n = (int)(i / PL_C);
#endif
}

extern "C" __global__ void pool_fwd(const Params p) {
    const i64 total = (i64)PL_N * PL_C * PL_OD * PL_OH * PL_OW;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        int n, c, od, oh, ow;
        split<PL_OD, PL_OH, PL_OW>(i, n, c, od, oh, ow);
        const int d0 = od * PL_SD - PL_PD, h0 = oh * PL_SH - PL_PH, w0 = ow * PL_SW - PL_PW;
        float best = -__int_as_float(0x7f800000), sum = 0.f;
        unsigned long long at = 0;
        for (int d = max(d0, 0); d < min(d0 + PL_KD, PL_ID); ++d)
            for (int h = max(h0, 0); h < min(h0 + PL_KH, PL_IH); ++h)
                for (int w = max(w0, 0); w < min(w0 + PL_KW, PL_IW); ++w) {
                    const float v = ld<T>(p.x, x_at(n, c, d, h, w));
#if PL_POOL_MODE == 0
                    if (v > best) {
                        best = v;
                        at = index_of(d, h, w, od, oh, ow);
                    }
#else
                    sum += v;
#endif
                }
#if PL_POOL_MODE == 0
        const float r = best;
#if PL_SAVE_INDEX
        ((PL_INDEX_T*)p.aux[0])[index_at(n, c, od, oh, ow)] = (PL_INDEX_T)at;
#endif
#else
        const float r = sum / divisor(od, oh, ow);
#endif
        (void)at;
        (void)sum;
        const i64 o = y_at(n, c, od, oh, ow);
        st<T>(p.y, o, p.alpha * r + (p.beta != 0.f ? p.beta * ld<T>(p.y, o) : 0.f));
    }
}

// One thread per dx element: the outputs whose windows cover it, in a fixed order (no
// atomics: reruns are bit-identical).
extern "C" __global__ void pool_bwd(const Params p) {
    const i64 total = (i64)PL_N * PL_C * PL_ID * PL_IH * PL_IW;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        int n, c, d, h, w;
        split<PL_ID, PL_IH, PL_IW>(i, n, c, d, h, w);
        // Outputs o with o·S − P ≤ pos < o·S − P + K.
        const int qd = d + PL_PD, qh = h + PL_PH, qw = w + PL_PW;
        const int d_lo = qd - PL_KD + 1 <= 0 ? 0 : (qd - PL_KD + PL_SD) / PL_SD, d_hi = min(qd / PL_SD + 1, PL_OD);
        const int h_lo = qh - PL_KH + 1 <= 0 ? 0 : (qh - PL_KH + PL_SH) / PL_SH, h_hi = min(qh / PL_SH + 1, PL_OH);
        const int w_lo = qw - PL_KW + 1 <= 0 ? 0 : (qw - PL_KW + PL_SW) / PL_SW, w_hi = min(qw / PL_SW + 1, PL_OW);
        float g = 0.f;
        for (int od = d_lo; od < d_hi; ++od)
            for (int oh = h_lo; oh < h_hi; ++oh)
                for (int ow = w_lo; ow < w_hi; ++ow) {
                    const float dy = ld<T>(p.x, y_at(n, c, od, oh, ow));
#if PL_POOL_MODE == 0
                    if ((unsigned long long)((const PL_INDEX_T*)p.aux[0])[index_at(n, c, od, oh, ow)] == index_of(d, h, w, od, oh, ow)) g += dy;
#else
                    g += dy / divisor(od, oh, ow);
#endif
                }
        const i64 o = x_at(n, c, d, h, w);
        st<T>(p.y, o, p.alpha * g + (p.beta != 0.f ? p.beta * ld<T>(p.y, o) : 0.f));
    }
}
