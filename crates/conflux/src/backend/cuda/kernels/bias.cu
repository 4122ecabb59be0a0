// ConvolutionForwardBias / BackwardBias. x = b (forward, broadcast dims have stride 0) or dy
// (backward); y = y (forward, updated in place) or db (backward, 1×C×1×1).
typedef CONFLUX_T T;

// y = α·(y + b) + β·y, one thread per element (grid-stride).
extern "C" __global__ void bias_fwd(const Params p) {
    const int D = p.in[0], H = p.in[1], W = p.in[2];
    const i64 total = (i64)p.n * p.c * D * H * W;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 t = i;
        const int w = t % W; t /= W;
        const int h = t % H; t /= H;
        const int d = t % D; t /= D;
        const int c = t % p.c;
        const int n = (int)(t / p.c);
        const i64 yo = off5(p.ys, n, c, d, h, w);
        const float v = ld<T>(p.y, yo);
        const float b = ld<T>(p.x, off5(p.xs, n, c, d, h, w));
        st<T>(p.y, yo, p.alpha * (v + b) + p.beta * v);
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
