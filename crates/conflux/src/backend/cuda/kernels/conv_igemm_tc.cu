// Implicit-GEMM forward convolution on tensor cores (mma.sync m16n8k16, f32 accumulation)
// for 16-bit channels-last tensors, with the fused epilogue applied in registers.
//
// GEMM per group g: M = N·OD·OH·OW output pixels, N = KG output channels, K = FD·FH·FW·CG
// reduction ordered channels fastest, as in memory. CG % 8 == 0 and 16-byte aligned rows
// make every 8-element chunk of a reduction slice one 16-byte cp.async from a single filter
// tap of x (zero-filled outside the image) and of w. Tiles: BM × BN outputs per block, BK = 32
// (32 or 64) deep, STAGES-deep cp.async pipeline in shared memory, warps of WM × WN outputs.
// Shared tiles are stored row-major (pixel or channel rows of BK elements) with the 16-byte
// chunks of a row XOR-swizzled by row, so ldmatrix reads eight rows without bank conflicts.
// All strides are compile-time constants (XS_*, WS_*, YS_*); only the batch size is not.
typedef CONFLUX_T T;

#define CHUNKS (BK / 8)
#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define THREADS (WARPS_M * WARPS_N * 32)
#define MT (WM / 16)
#define NT (WN / 8)
#define OSP (OD * OH * OW)
#define FS (FD * FH * FW)
#define KRED (CG * FS)
#define A_LOADS (BM * CHUNKS / THREADS)
#define B_LOADS (BN * CHUNKS / THREADS)
#define A_ELEMS (BM * BK)
#define STAGE_ELEMS ((BM + BN) * BK)

static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "tile shape");
static_assert((BM * CHUNKS) % THREADS == 0 && (BN * CHUNKS) % THREADS == 0, "tile loads per thread");
static_assert(CG % 8 == 0, "channels per group must be a multiple of 8");
static_assert(BK == 32 || BK == 64, "BK");

// Element offset of logical chunk `chunk` of tile row `row`: 128-byte rows (BK = 64) swizzle
// by row % 8, 64-byte rows (two per 128 bytes) by (row / 2) % 4.
__device__ __forceinline__ int swz(int row, int chunk) {
    const int s = BK == 64 ? (row & 7) : ((row >> 1) & 3);
    return row * BK + ((chunk ^ s) << 3);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// 16-byte asynchronous copy; `valid == false` writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_AB "." MMA_AB ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Output pixel m → (n, od, oh, ow).
struct Pixel { int n, od, oh, ow; };
__device__ __forceinline__ Pixel pixel_of(int m) {
    Pixel q;
    q.ow = m % OW;
    int t = m / OW;
    q.oh = t % OH;
    t /= OH;
    q.od = t % OD;
    q.n = t / OD;
    return q;
}

// Reduction index kk → (c, rd, rh, rw), channels fastest.
struct Tap { int c, rd, rh, rw; };
__device__ __forceinline__ Tap tap_of(int kk) {
    Tap t;
    t.c = kk % CG;
    int r = kk / CG;
    t.rw = r % FW;
    r /= FW;
    t.rh = r % FH;
    t.rd = r / FH;
    return t;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_fwd_igemm_tc(const Params p) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* smem = (T*)smem_raw;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
    const int g = blockIdx.z;
    const int M = p.n * OSP;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const T* x = (const T*)p.x;
    const T* w = (const T*)p.w;

    // Each thread copies the same chunk column of A_LOADS pixel rows and B_LOADS channel rows
    // in every k-tile; the pixel decomposition is done once.
    const int chunk = tid % CHUNKS;
    i64 a_base[A_LOADS];
    int a_d[A_LOADS], a_h[A_LOADS], a_w[A_LOADS];
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int m = m0 + (tid + i * THREADS) / CHUNKS;
        const Pixel q = pixel_of(m < M ? m : 0);
        a_base[i] = (i64)q.n * XS_N + (i64)g * CG;
        a_d[i] = m < M ? q.od * SD - PD : -(1 << 28);   // an out-of-range row never loads
        a_h[i] = q.oh * SH - PH;
        a_w[i] = q.ow * SW - PW;
    }
    i64 b_base[B_LOADS];
    bool b_ok[B_LOADS];
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int kn = n0 + (tid + i * THREADS) / CHUNKS;
        b_ok[i] = kn < KG;
        b_base[i] = (i64)(g * KG + (kn < KG ? kn : 0)) * WS_K;
    }

    auto load_tile = [&](int stage, int k0) {
        T* sa = smem + stage * STAGE_ELEMS;
        T* sb = sa + A_ELEMS;
        const int kk = k0 + chunk * 8;
        const bool k_ok = kk < KRED;
        const Tap t = tap_of(k_ok ? kk : 0);
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int row = (tid + i * THREADS) / CHUNKS;
            const int id = a_d[i] + t.rd * DD, ih = a_h[i] + t.rh * DH, iw = a_w[i] + t.rw * DW;
            const bool ok = k_ok && (unsigned)id < ID && (unsigned)ih < IH && (unsigned)iw < IW;
            const T* src = ok ? x + a_base[i] + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W + t.c : x;
            cp_async16(smem_addr(sa + swz(row, chunk)), src, ok);
        }
        const i64 w_off = (i64)t.rd * WS_D + (i64)t.rh * WS_H + (i64)t.rw * WS_W + t.c;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int row = (tid + i * THREADS) / CHUNKS;
            const bool ok = k_ok && b_ok[i];
            cp_async16(smem_addr(sb + swz(row, chunk)), ok ? w + b_base[i] + w_off : w, ok);
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    const int KT = (KRED + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_tile(s, s * BK);
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();   // tile kt is visible to all; every warp is done with tile kt - 1
        const int next = kt + STAGES - 1;
        if (next < KT) load_tile(next % STAGES, next * BK);
        cp_async_commit();

        const T* sa = smem + (kt % STAGES) * STAGE_ELEMS;
        const T* sb = sa + A_ELEMS;
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            unsigned af[MT][4], bfr[NT][2];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                const int row = warp_m * WM + mi * 16 + (lane & 15);
                ldmatrix_x4(af[mi], smem_addr(sa + swz(row, ks * 2 + (lane >> 4))));
            }
#pragma unroll
            for (int nj = 0; nj < NT; nj += 2) {
                const int row = warp_n * WN + nj * 8 + (lane & 7) + ((lane >> 4) << 3);
                unsigned r[4];
                ldmatrix_x4(r, smem_addr(sb + swz(row, ks * 2 + ((lane >> 3) & 1))));
                bfr[nj][0] = r[0]; bfr[nj][1] = r[1]; bfr[nj + 1][0] = r[2]; bfr[nj + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < MT; ++mi)
#pragma unroll
                for (int nj = 0; nj < NT; ++nj) mma16816(acc[mi][nj], af[mi], bfr[nj][0], bfr[nj][1]);
        }
    }
    cp_async_wait<0>();

    // Epilogue in registers: accumulator (row lane/4 [+8], columns 2·(lane%4) + {0, 1}) of each
    // m16n8 tile → α/β, the generated chain, store (two channels at once when they are adjacent).
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_m * WM + mi * 16 + (lane >> 2) + h * 8;
            if (m >= M) continue;
            const Pixel q = pixel_of(m);
            const int sp = (q.od * OH + q.oh) * OW + q.ow;
            const i64 row_off = (i64)q.n * YS_N + (i64)q.od * YS_D + (i64)q.oh * YS_H + (i64)q.ow * YS_W;
#pragma unroll
            for (int nj = 0; nj < NT; ++nj) {
                const int kn = n0 + warp_n * WN + nj * 8 + (lane & 3) * 2;
                float v[2] = {0.f, 0.f};
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (kn + e >= KG) continue;   // the epilogue may read per-channel data
                    const int k = g * KG + kn + e;
                    float r = p.alpha * acc[mi][nj][h * 2 + e];
                    if (p.beta != 0.f) r += p.beta * ld<T>(p.y, row_off + (i64)k * YS_C);
                    v[e] = conflux_epilogue(r, p.epi, q.n, k, q.od, q.oh, q.ow, sp, OSP);
                }
                const i64 o = row_off + (i64)(g * KG + kn) * YS_C;
#if PAIR_STORE
                if (kn + 1 < KG) {
                    const unsigned packed = (unsigned)from_f<T>(v[0]).u | ((unsigned)from_f<T>(v[1]).u << 16);
                    *(unsigned*)((T*)p.y + o) = packed;
                    continue;
                }
#endif
                if (kn < KG) st<T>(p.y, o, v[0]);
                if (kn + 1 < KG) st<T>(p.y, o + YS_C, v[1]);
            }
        }
    }
}
