// The implicit-GEMM tile loader of conv_igemm_tc.cu and conv_igemm_wgmma.cu (after
// igemm_common.cuh).
//
// GEMM per group g: M = N·OD·OH·OW output pixels, N = KG output channels, K = FD·FH·FW·CG
// reduction ordered channels fastest, as in memory. CG % 8 == 0 and 16-byte aligned rows
// make every 8-element chunk of a reduction slice one 16-byte cp.async from a single filter
// tap of x (zero-filled outside the image) and of w. Shared tiles are stored row-major (pixel
// or channel rows of BK elements) with the 16-byte chunks of a row XOR-swizzled by row; for
// BK = 64 this is exactly Hopper's 128-byte swizzle, which wgmma descriptors read directly.
// The preamble defines BM, BN, BK and LOADER_THREADS.
#define CHUNKS (BK / 8)
// LOADER_THREADS: the threads that copy tiles (all of them, or a producer warpgroup).
#define A_LOADS (BM * CHUNKS / LOADER_THREADS)
#define B_LOADS (BN * CHUNKS / LOADER_THREADS)
#define A_ELEMS (BM * BK)
#define STAGE_ELEMS ((BM + BN) * BK)
#define N_TILES ((KG + BN - 1) / BN)   // channel tiles per group

static_assert((BM * CHUNKS) % LOADER_THREADS == 0 && (BN * CHUNKS) % LOADER_THREADS == 0, "tile loads per thread");
static_assert(CG % 8 == 0, "channels per group must be a multiple of 8");
static_assert(BK == 32 || BK == 64 || (BK == 128 && sizeof(T) == 1), "BK");

// Element offset of logical chunk `chunk` of tile row `row`: 128-byte rows (BK = 64) swizzle
// by row % 8, 64-byte rows (two per 128 bytes) by (row / 2) % 4.
__device__ __forceinline__ int swz(int row, int chunk) {
    const int s = BK == 64 ? (row & 7) : ((row >> 1) & 3);
    return row * BK + ((chunk ^ s) << 3);
}

// Each thread copies the same chunk column of A_LOADS pixel rows and B_LOADS channel rows in
// every k-tile; the pixel decomposition is done once, when the loader is made.
struct TileLoader {
    i64 a_base[A_LOADS];
    int a_d[A_LOADS], a_h[A_LOADS], a_w[A_LOADS];
    i64 b_base[B_LOADS];
    bool b_ok[B_LOADS];
    int tid, chunk;

    __device__ __forceinline__ TileLoader(int tid_, int m0, int n0, int g, int M) : tid(tid_), chunk(tid_ % CHUNKS) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int m = m0 + (tid + i * LOADER_THREADS) / CHUNKS;
            const Pixel q = pixel_of(m < M ? m : 0);
            a_base[i] = (i64)q.n * XS_N + (i64)g * CG;
            a_d[i] = m < M ? q.od * SD - PD : -(1 << 28);   // an out-of-range row never loads
            a_h[i] = q.oh * SH - PH;
            a_w[i] = q.ow * SW - PW;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int kn = n0 + (tid + i * LOADER_THREADS) / CHUNKS;
            b_ok[i] = kn < KG;
            b_base[i] = (i64)(g * KG + (kn < KG ? kn : 0)) * WS_K;
        }
    }

    // Issue the copies of reduction slice [k0, k0 + BK) into the shared tiles sa (pixels) and
    // sb (channels).
    __device__ __forceinline__ void load(T* sa, T* sb, const T* x, const T* w, int k0) const {
        const int kk = k0 + chunk * 8;
        const bool k_ok = kk < KRED;
        const Tap t = tap_of(k_ok ? kk : 0);
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int row = (tid + i * LOADER_THREADS) / CHUNKS;
            const int id = a_d[i] + t.rd * DD, ih = a_h[i] + t.rh * DH, iw = a_w[i] + t.rw * DW;
            const bool ok = k_ok && (unsigned)id < ID && (unsigned)ih < IH && (unsigned)iw < IW;
            const T* src = ok ? x + a_base[i] + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W + t.c : x;
            cp_async16(smem_addr(sa + swz(row, chunk)), src, ok);
        }
        const i64 w_off = (i64)t.rd * WS_D + (i64)t.rh * WS_H + (i64)t.rw * WS_W + t.c;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int row = (tid + i * LOADER_THREADS) / CHUNKS;
            const bool ok = k_ok && b_ok[i];
            cp_async16(smem_addr(sb + swz(row, chunk)), ok ? w + b_base[i] + w_off : w, ok);
        }
    }
};

