// ConvolutionForwardBias / BackwardBias. x = b (forward, broadcast dims have stride 0) or dy
// (backward); y = y (forward, updated in place) or db (backward, 1×C×1×1).
typedef CONFLUX_T T;

// y = α·(y + b) + β·y, one thread per element (grid-stride, 32-bit index arithmetic below
// 4G elements).
template <class I> __device__ __forceinline__ void bias_fwd_loop(const Params& p) {
    const int D = p.in[0], H = p.in[1], W = p.in[2];
    const I total = (I)p.n * p.c * D * H * W;
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const Coord5 q = coord5(i, p.c, D, H, W);
        const i64 yo = off5(p.ys, q.n, q.c, q.d, q.h, q.w);
        const float v = ld<T>(p.y, yo);
        const float b = ld<T>(p.x, off5(p.xs, q.n, q.c, q.d, q.h, q.w));
        st<T>(p.y, yo, p.alpha * (v + b) + p.beta * v);
    }
}
extern "C" __global__ void bias_fwd(const Params p) {
    if (index32((i64)p.n * p.c * p.in[0] * p.in[1] * p.in[2])) bias_fwd_loop<unsigned>(p);
    else bias_fwd_loop<i64>(p);
}

// The same for a dense y (packed in any dimension order) and a per-channel b: the channel of
// memory offset i is (i / ys[1]) % C, so threads walk y linearly, 8 elements (one or two
// 16-byte vectors) at a time, and track the channel without dividing per element. The
// caller guarantees a 16-byte aligned y.
#define BIAS_VEC 8
extern "C" __global__ void bias_fwd_dense(const Params p) {
    const i64 total = (i64)p.n * p.c * p.in[0] * p.in[1] * p.in[2];
    const i64 cs = p.ys[1], bs = p.xs[1];
    const i64 vecs = total / BIAS_VEC;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x; v <= vecs; v += step) {
        const i64 i0 = v * BIAS_VEC;
        const int len = v < vecs ? BIAS_VEC : (int)(total - i0);   // the last pass: the tail
        if (len == 0) break;
        i64 q = i0 / cs, r = i0 - q * cs;
        int c = (int)(q % p.c);
        T e[BIAS_VEC];
        T* y = (T*)p.y + i0;
        if (len == BIAS_VEC) {
#pragma unroll
            for (int k = 0; k < (int)(BIAS_VEC * sizeof(T) / 16); ++k) ((uint4*)e)[k] = ((const uint4*)y)[k];
        } else {
            for (int j = 0; j < len; ++j) e[j] = y[j];
        }
#pragma unroll
        for (int j = 0; j < BIAS_VEC; ++j) {
            if (j < len) {
                const float x = to_f(e[j]);
                e[j] = from_f<T>(p.alpha * (x + ldp<T>(p.x, c * bs)) + p.beta * x);
            }
            if (++r == cs) {
                r = 0;
                if (++c == p.c) c = 0;
            }
        }
        if (len == BIAS_VEC) {
#pragma unroll
            for (int k = 0; k < (int)(BIAS_VEC * sizeof(T) / 16); ++k) ((uint4*)y)[k] = ((const uint4*)e)[k];
        } else {
            for (int j = 0; j < len; ++j) y[j] = e[j];
        }
    }
}

// db[c] = α·Σ_{n,d,h,w} dy + β·db[c]: one block of 256 threads per channel, f64 partial sums
// reduced in a fixed order, so the result is deterministic.
#define BIAS_BLOCK 256
extern "C" __global__ void bias_bwd(const Params p) {
    __shared__ double part[BIAS_BLOCK];
    const int D = p.in[0], H = p.in[1], W = p.in[2];
    const int sp = D * H * W;
    const i64 per = (i64)p.n * sp;
    for (int c = blockIdx.x; c < p.c; c += gridDim.x) {
        double acc = 0.0;
        for (i64 m = threadIdx.x; m < per; m += BIAS_BLOCK) {
            const int s = (int)(m % sp), n = (int)(m / sp);
            acc += ld<T>(p.x, off5(p.xs, n, c, s / (H * W), (s / W) % H, s % W));
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (int k = BIAS_BLOCK / 2; k > 0; k >>= 1) {
            if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            const i64 o = (i64)c * p.ys[1];
            float r = p.alpha * (float)part[0];
            if (p.beta != 0.f) r += p.beta * ld<T>(p.y, o);
            st<T>(p.y, o, r);
        }
        __syncthreads();
    }
}
