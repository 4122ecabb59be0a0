// Backward-weights on CUDA cores, any geometry, layout and type: per group, dw[k][col] =
// Σ over the N·OD·OH·OW output pixels r of dy[r][k] · x_im2col[r][col], col = (c, tap) — a
// GEMM with M = KG, N = CG·taps and a long reduction. Tiles of BM × BN per block, BK-pixel
// slices staged in shared memory (double buffered through registers), TM × TN per thread,
// f32 accumulation. The reduction is split: block (tile, split, group) sums its share of the
// pixels into its own f32 slot; conv_wgrad_simt_reduce adds a tile's slots in split order
// (the same result on every run) and writes dw = α·sum + β·dw through dw's strides.
// Geometry and strides are compile-time (preamble); the batch size is p.n.
typedef CONFLUX_T T;

#define THREADS 256
#define TM (BM / 16)
#define TN (BN / 16)
#define OSP (OD * OH * OW)
#define FS (FD * FH * FW)
#define COLS (CG * FS)
#define M_TILES ((KG + BM - 1) / BM)
#define N_TILES ((COLS + BN - 1) / BN)
#define A_PER_THREAD (BM * BK / THREADS)
#define B_PER_THREAD (BN * BK / THREADS)

struct WgradSimtArgs {
    Params p;        // p.x is x, p.y is dy, p.w is dw
    float* partial;  // [group][tile][split][BM][BN] f32 sums
    int splits, pad;
};

// Output pixel r → (n, od, oh, ow).
struct Px { int n, od, oh, ow; };
__device__ __forceinline__ Px px_of(int r) {
    Px q;
    q.ow = r % OW;
    int t = r / OW;
    q.oh = t % OH;
    t /= OH;
    q.od = t % OD;
    q.n = t / OD;
    return q;
}

// The filter tap and channel of one column, as offsets into x (or none past the columns).
struct Col { i64 c_off; int rd, rh, rw; bool live; };

extern "C" __global__ void __launch_bounds__(THREADS) conv_wgrad_simt(const WgradSimtArgs args) {
    const Params& p = args.p;
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x;
    const int g = blockIdx.z, split = blockIdx.y;
    const int tile = blockIdx.x;
    const int m0 = tile / N_TILES * BM, n0 = tile % N_TILES * BN;
    const int R = p.n * OSP;
    // This split's pixel range, in whole BK slices.
    const int slices = (R + BK - 1) / BK;
    const int s0 = (int)((long long)slices * split / args.splits), s1 = (int)((long long)slices * (split + 1) / args.splits);

    // Staged elements: A = dy (pixel kk, channel mm), along channels when dy is channels-last
    // (DY_CHANNEL_INNER) else along pixels; B = x (pixel kk, column nn) along columns when x is
    // channels-last, else along pixels.
    auto a_coord = [&](int i, int& kk, int& mm) {
        const int e = tid + i * THREADS;
#if DY_CHANNEL_INNER
        mm = e % BM; kk = e / BM;
#else
        kk = e % BK; mm = e / BK;
#endif
    };
    auto b_coord = [&](int i, int& kk, int& nn) {
        const int e = tid + i * THREADS;
#if CHANNEL_INNER
        nn = e % BN; kk = e / BN;
#else
        kk = e % BK; nn = e / BK;
#endif
    };
    // A thread's columns are the same in every slice: decompose them once.
    Col cols[B_PER_THREAD];
#pragma unroll
    for (int i = 0; i < B_PER_THREAD; ++i) {
        int kk, nn;
        b_coord(i, kk, nn);
        const int col = n0 + nn;
        int c = 0, rd = 0, rh = 0, rw = 0;
        if (col < COLS) split_tap_channel(col, c, rd, rh, rw);
        cols[i] = Col{(i64)(g * CG + c) * XS_C, rd, rh, rw, col < COLS};
    }
    float ra[A_PER_THREAD], rb[B_PER_THREAD];
    auto fetch = [&](int s) {
        const int r0 = s * BK;
#pragma unroll
        for (int i = 0; i < A_PER_THREAD; ++i) {
            int kk, mm;
            a_coord(i, kk, mm);
            const int r = r0 + kk, k = m0 + mm;
            float v = 0.f;
            if (r < R && k < KG) {
                const Px q = px_of(r);
                v = ld<T>(p.y, (i64)q.n * YS_N + (i64)(g * KG + k) * YS_C + (i64)q.od * YS_D + (i64)q.oh * YS_H + (i64)q.ow * YS_W);
            }
            ra[i] = v;
        }
#pragma unroll
        for (int i = 0; i < B_PER_THREAD; ++i) {
            int kk, nn;
            b_coord(i, kk, nn);
            const int r = r0 + kk;
            float v = 0.f;
            if (r < R && cols[i].live) {
                const Px q = px_of(r);
                const int id = q.od * SD - PD + cols[i].rd * DD, ih = q.oh * SH - PH + cols[i].rh * DH, iw = q.ow * SW - PW + cols[i].rw * DW;
                if ((unsigned)id < ID && (unsigned)ih < IH && (unsigned)iw < IW)
                    v = ld<T>(p.x, (i64)q.n * XS_N + cols[i].c_off + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W);
            }
            rb[i] = v;
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < A_PER_THREAD; ++i) { int kk, mm; a_coord(i, kk, mm); As[buf][kk][mm] = ra[i]; }
#pragma unroll
        for (int i = 0; i < B_PER_THREAD; ++i) { int kk, nn; b_coord(i, kk, nn); Bs[buf][kk][nn] = rb[i]; }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    const int tx = tid % 16, ty = tid / 16;   // tx picks rows (output channels), ty columns
    if (s0 < s1) {
        fetch(s0);
        stash(0);
    }
    __syncthreads();
    int buf = 0;
    for (int s = s0; s < s1; ++s) {
        const bool more = s + 1 < s1;
        if (more) fetch(s + 1);   // global loads in flight during the math below
        simt_slice(As[buf], Bs[buf], tx, ty, acc);
        if (more) {
            stash(buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
    }

    float* out = args.partial + ((size_t)(g * M_TILES * N_TILES + tile) * args.splits + split) * (BM * BN);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            __stcg((float4*)(out + (tx * TM + i) * BN + ty * TN + j), make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

// dw = α·(a tile's split slots summed in split order) + β·dw, columns fastest.
extern "C" __global__ void __launch_bounds__(256) conv_wgrad_simt_reduce(const WgradSimtArgs args) {
    const Params& p = args.p;
    const long long total = (long long)p.groups * KG * COLS;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
        const int col = (int)(e % COLS), k = (int)(e / COLS % KG), g = (int)(e / ((long long)COLS * KG));
        const int tile = k / BM * N_TILES + col / BN;
        const float* src = args.partial + ((size_t)(g * M_TILES * N_TILES + tile) * args.splits) * (BM * BN) + (k % BM) * BN + col % BN;
        float sum = 0.f;
        for (int s = 0; s < args.splits; ++s) sum += __ldcg(src + (size_t)s * (BM * BN));
        int c, rd, rh, rw;
        split_tap_channel(col, c, rd, rh, rw);
        const i64 o = (i64)(g * KG + k) * WS_K + (i64)c * WS_C + (i64)rd * WS_D + (i64)rh * WS_H + (i64)rw * WS_W;
        float v = p.alpha * sum;
        if (p.beta != 0.f) v += p.beta * ld<T>(p.w, o);
        st<T>((void*)p.w, o, v);
    }
}
