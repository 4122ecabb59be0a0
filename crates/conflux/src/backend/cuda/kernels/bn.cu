// Batch-norm forward training (+ activation) and backward (+ activation backward).
// CONFLUX_BN_SPATIAL selects spatial (1) or per-activation (0) statistics. Statistics are
// reduced in double, in a fixed order per block (deterministic). Logical shape n, c, in[3].
// aux: 0 scale, 1 bias, 2 saved mean, 3 saved inv-std, 4 running mean | dscale,
//      5 running var | dbias, 6 stats workspace (mean, inv-std per statistic), 7 forward x,
//      8 activation output y, 9 backward sums workspace. f: 0 eps, 1 exp-avg factor,
//      2..4 activation alpha, beta, gamma.
typedef CONFLUX_T T;

struct Members {
    int sp_size, W, H, c, n;
    __device__ Members(const Params& p) : sp_size(p.in[0] * p.in[1] * p.in[2]), W(p.in[2]), H(p.in[1]), c(p.c), n(p.n) {}
    __device__ int count() const { return CONFLUX_BN_SPATIAL ? c : c * sp_size; }
    __device__ int m() const { return CONFLUX_BN_SPATIAL ? n * sp_size : n; }
    // Offset through strides s of member j of statistic stat.
    __device__ i64 offset(const i64* s, int stat, int j) const {
        int nn, ch, sp;
        if (CONFLUX_BN_SPATIAL) { ch = stat; nn = j / sp_size; sp = j - nn * sp_size; }
        else { ch = stat / sp_size; sp = stat - ch * sp_size; nn = j; }
        const int w = sp % W, h = (sp / W) % H, d = sp / (W * H);
        return off5(s, nn, ch, d, h, w);
    }
};

__device__ double block_sum(double v, double* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// One block per statistic: mean and inverse std of p.x (biased variance); writes the stats
// workspace and, when requested, saved and running statistics.
extern "C" __global__ void bn_stats(const Params p) {
    __shared__ double sh[256];
    const Members mb(p);
    const int M = mb.m();
    for (int stat = blockIdx.x; stat < mb.count(); stat += gridDim.x) {
        double s = 0, s2 = 0;
        for (int j = threadIdx.x; j < M; j += blockDim.x) {
            const double v = ld<T>(p.x, mb.offset(p.xs, stat, j));
            s += v;
            s2 += v * v;
        }
        s = block_sum(s, sh);
        s2 = block_sum(s2, sh);
        if (threadIdx.x == 0) {
            const double mean = s / M;
            const double var = fmax(s2 / M - mean * mean, 0.0);
            const double inv = 1.0 / sqrt(var + (double)p.f[0]);
            float* ws = (float*)p.aux[6];
            ws[2 * stat] = (float)mean;
            ws[2 * stat + 1] = (float)inv;
            if (p.aux[2] && p.aux[3]) {
                ((float*)p.aux[2])[stat] = (float)mean;
                ((float*)p.aux[3])[stat] = (float)inv;
            }
            if (p.aux[4] && p.aux[5]) {
                const double f = p.f[1];
                const double unbiased = M > 1 ? var * M / (M - 1.0) : var;
                float* rm = (float*)p.aux[4];
                float* rv = (float*)p.aux[5];
                rm[stat] = (float)((1.0 - f) * rm[stat] + f * mean);
                rv[stat] = (float)((1.0 - f) * rv[stat] + f * unbiased);
            }
        }
    }
}

// y = act(scale * (x - mean) * inv + bias), one block-stride loop per statistic.
extern "C" __global__ void bn_apply(const Params p) {
    const Members mb(p);
    const int M = mb.m();
    const float* ws = (const float*)p.aux[6];
    for (int stat = blockIdx.x; stat < mb.count(); stat += gridDim.x) {
        const float mean = ws[2 * stat], inv = ws[2 * stat + 1];
        const float g = ((const float*)p.aux[0])[stat], b = ((const float*)p.aux[1])[stat];
        for (int j = threadIdx.x; j < M; j += blockDim.x) {
            const float v = g * (ld<T>(p.x, mb.offset(p.xs, stat, j)) - mean) * inv + b;
            st<T>(p.y, mb.offset(p.ys, stat, j), CONFLUX_ACT(v, p.f[2], p.f[3], p.f[4]));
        }
    }
}

// dy' = act_backward(dy, yhat, y_act) at member j (identity without a fused activation) and x̂.
__device__ __forceinline__ float2 bwd_grad(const Params& p, const Members& mb, int stat, int j, float mean, float inv, float g, float b) {
    const i64 o = mb.offset(p.xs, stat, j);
    const float xhat = (ld<T>(p.aux[7], o) - mean) * inv;
    float d = ld<T>(p.x, o);
#if CONFLUX_BN_ACT
    const float yhat = g * xhat + b;
    const float ya = p.aux[8] ? ld<T>(p.aux[8], o) : CONFLUX_ACT(yhat, p.f[2], p.f[3], p.f[4]);
    d = CONFLUX_ACTB(d, yhat, ya, p.f[2], p.f[3], p.f[4]);
#endif
    return make_float2(d, xhat);
}

// One block per statistic: dbias = Σ dy', dscale = Σ dy'·x̂, then dx in the same block.
extern "C" __global__ void bn_bwd(const Params p) {
    __shared__ double sh[256];
    const Members mb(p);
    const int M = mb.m();
    const float* ws = (const float*)p.aux[6];
    for (int stat = blockIdx.x; stat < mb.count(); stat += gridDim.x) {
        // Saved statistics when the caller gives them, else the ones bn_stats just computed.
        const bool saved = p.aux[2] && p.aux[3];
        const float mean = saved ? ((const float*)p.aux[2])[stat] : ws[2 * stat];
        const float inv = saved ? ((const float*)p.aux[3])[stat] : ws[2 * stat + 1];
        const float g = ((const float*)p.aux[0])[stat];
        const float b = p.aux[1] ? ((const float*)p.aux[1])[stat] : 0.f;
        double db = 0, dg = 0;
        for (int j = threadIdx.x; j < M; j += blockDim.x) {
            const float2 r = bwd_grad(p, mb, stat, j, mean, inv, g, b);
            db += r.x;
            dg += (double)r.x * r.y;
        }
        db = block_sum(db, sh);
        dg = block_sum(dg, sh);
        if (threadIdx.x == 0) {
            if (p.aux[4]) ((float*)p.aux[4])[stat] = (float)dg;
            if (p.aux[5]) ((float*)p.aux[5])[stat] = (float)db;
        }
        const double k = (double)g * inv / M;
        for (int j = threadIdx.x; j < M; j += blockDim.x) {
            const float2 r = bwd_grad(p, mb, stat, j, mean, inv, g, b);
            st<T>(p.y, mb.offset(p.ys, stat, j), (float)(k * (M * (double)r.x - db - r.y * dg)));
        }
    }
}
