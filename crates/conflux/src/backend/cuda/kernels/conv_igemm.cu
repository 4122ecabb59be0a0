// Implicit-GEMM forward convolution on CUDA cores with the fused epilogue.
// GEMM view per group g: M = N·OD·OH·OW output pixels, N = KG output channels,
// K = CG·FD·FH·FW reduction; A (pixels × reduction) is gathered from x on the fly (no im2col
// buffer), B (reduction × channels) is read from w. Tiles of BM × BN outputs per block,
// BK-deep slices staged in shared memory (double buffered through registers), TM × TN
// outputs per thread, f32 accumulation. Geometry and strides except N are compile-time
// (preamble), so index arithmetic divides and multiplies by constants. CHANNEL_INNER orders the reduction c-fastest
// (channels-last tensors) instead of filter-fastest (NCHW), matching memory order.
typedef CONFLUX_T T;

#define THREADS 256
#define TM (BM / 16)
#define TN (BN / 16)
#define OSP (OD * OH * OW)
#define FS (FD * FH * FW)
#define KRED (CG * FS)
#define A_PER_THREAD (BM * BK / THREADS)
#define B_PER_THREAD (BN * BK / THREADS)

// Where output pixel m reads x: base offset (batch and group) and the corner of its window.
struct Window { i64 base; int d0, h0, w0; };
__device__ __forceinline__ Window window_of(int g, int m, int M) {
    Window q;
    const int mm = m < M ? m : 0;
    const int ow = mm % OW;
    int t = mm / OW;
    const int oh = t % OH;
    t /= OH;
    const int od = t % OD;
    const int n = t / OD;
    q.base = (i64)n * XS_N + (i64)g * CG * XS_C;
    q.d0 = m < M ? od * SD - PD : -(1 << 28);   // a row past M never loads
    q.h0 = oh * SH - PH;
    q.w0 = ow * SW - PW;
    return q;
}

// A element (m, kk): x at the input position the window reads for reduction index kk.
__device__ __forceinline__ float load_a(const Params& p, const Window& q, int kk) {
    if (kk >= KRED) return 0.f;
    int c, rd, rh, rw;
    split_tap_channel(kk, c, rd, rh, rw);
    const int id = q.d0 + rd * DD, ih = q.h0 + rh * DH, iw = q.w0 + rw * DW;
    if ((unsigned)id >= ID || (unsigned)ih >= IH || (unsigned)iw >= IW) return 0.f;
    return ld<T>(p.x, q.base + (i64)c * XS_C + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W);
}

// B element (kk, kn): weight of output channel g·KG + kn (w_base: its offset, -1 if none).
__device__ __forceinline__ float load_b(const Params& p, i64 w_base, int kk) {
    if (w_base < 0 || kk >= KRED) return 0.f;
    int c, rd, rh, rw;
    split_tap_channel(kk, c, rd, rh, rw);
    return ld<T>(p.w, w_base + (i64)c * WS_C + (i64)rd * WS_D + (i64)rh * WS_H + (i64)rw * WS_W);
}

extern "C" __global__ void __launch_bounds__(THREADS) conv_fwd_igemm(const Params p) {
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x;
    const int g = blockIdx.z;
    const int M = p.n * OSP;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;

    // Which tile elements this thread stages: A along m (NCHW: pixels are contiguous) or
    // along k (channels-last: channels are contiguous); B along k.
    float ra[A_PER_THREAD], rb[B_PER_THREAD];
    auto a_coord = [&](int i, int& mm, int& kk) {
        const int e = tid + i * THREADS;
#if CHANNEL_INNER
        kk = e % BK; mm = e / BK;
#else
        mm = e % BM; kk = e / BM;
#endif
    };
    auto b_coord = [&](int i, int& kk, int& nn) {
        const int e = tid + i * THREADS;
        kk = e % BK; nn = e / BK;
    };
    // The pixel rows and channel columns a thread stages are the same in every k-slice:
    // decompose them once.
    Window win[A_PER_THREAD];
    i64 w_base[B_PER_THREAD];
#pragma unroll
    for (int i = 0; i < A_PER_THREAD; ++i) { int mm, kk; a_coord(i, mm, kk); win[i] = window_of(g, m0 + mm, M); }
#pragma unroll
    for (int i = 0; i < B_PER_THREAD; ++i) {
        int kk, nn;
        b_coord(i, kk, nn);
        w_base[i] = n0 + nn < KG ? (i64)(g * KG + n0 + nn) * WS_K : -1;
    }
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_PER_THREAD; ++i) { int mm, kk; a_coord(i, mm, kk); ra[i] = load_a(p, win[i], k0 + kk); }
#pragma unroll
        for (int i = 0; i < B_PER_THREAD; ++i) { int kk, nn; b_coord(i, kk, nn); rb[i] = load_b(p, w_base[i], k0 + kk); }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < A_PER_THREAD; ++i) { int mm, kk; a_coord(i, mm, kk); As[buf][kk][mm] = ra[i]; }
#pragma unroll
        for (int i = 0; i < B_PER_THREAD; ++i) { int kk, nn; b_coord(i, kk, nn); Bs[buf][kk][nn] = rb[i]; }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    const int tx = tid % 16, ty = tid / 16;   // tx picks output rows (m), ty columns (n)
    fetch(0);
    stash(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < KRED; k0 += BK) {
        const bool more = k0 + BK < KRED;
        if (more) fetch(k0 + BK);            // global loads in flight during the math below
        simt_slice(As[buf], Bs[buf], tx, ty, acc);
        if (more) {
            stash(buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
    }

    // Epilogue: alpha/beta, the generated chain, store.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + tx * TM + i;
        if (m >= M) continue;
        const int ow = m % OW;
        int t = m / OW;
        const int oh = t % OH;
        t /= OH;
        const int od = t % OD;
        const int n = t / OD;
        const int sp = (od * OH + oh) * OW + ow;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int kn = n0 + ty * TN + j;
            if (kn >= KG) continue;
            const int k = g * KG + kn;
            const i64 o = (i64)n * YS_N + (i64)k * YS_C + (i64)od * YS_D + (i64)oh * YS_H + (i64)ow * YS_W;
            float v = p.alpha * acc[i][j];
            if (p.beta != 0.f) v += p.beta * ld<T>(p.y, o);
            st<T>(p.y, o, conflux_epilogue(v, p.epi, n, k, od, oh, ow, sp, OSP));
        }
    }
}
