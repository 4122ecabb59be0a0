// Grouped forward convolution with few channels per group (ResNeXt, RegNet: 8–32 per group) on
// tensor cores (mma.sync m16n8k16, f32 accumulation), 16-bit channels-last, fused epilogue.
//
// A block computes BM output pixels × GPB consecutive groups, all KG outputs of each. The
// groups' input channels are contiguous in x, so one 128-byte shared row per pixel and tap
// holds every group's slice (chunk columns j·CPG .. j·CPG + CPG - 1 for group j). Group j's
// filter is a KG × (FS·CG) matrix; the block keeps all GPB of them in shared memory for its
// whole life, so only x streams through the pipeline, TPS taps per stage. Group j's reduction
// runs over its 8-channel chunks q = tap·CPG + c8; an m16n8k16 step takes chunks 2s and 2s + 1,
// which for CG = 8 are two taps: lanes 16–31 of ldmatrix point into the second tap's rows.
// Blocks never multiply the zero blocks a dense block-diagonal filter would hold.
//
// Groups of 2 or 4 channels run as virtual groups of 8 (SUB real groups each; the geometry's
// CG, KG and GROUPS are the virtual ones): x's chunks are unchanged, and each filter chunk is
// built block-diagonal in shared memory, the real CG_W channels of output k's group copied
// into its part and zeros elsewhere, so SUB-fold products buy whole 16-byte chunks.
//
// Preamble: geometry, GROUPS, SUB, CG_W, GPB, BM, WARPS_M, WARPS_N, STAGES, TPS, MIN_BLOCKS,
// PAIR_STORE, MMA_AB; igemm_common.cuh and mma_sync.cuh come first.

#define CPG (CG / 8)                       // 16-byte chunks of one group at one tap
#define BN (GPB * KG)                      // output channels per block
#define THREADS (WARPS_M * WARPS_N * 32)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MT (WM / 16)
#define GW (WN >= KG ? WN / KG : 1)        // groups a warp's columns cover
#define NPG ((WN >= KG ? KG : WN) / 8)     // n8 fragments per covered group
#define TAP_STEPS ((FS + TPS - 1) / TPS)   // pipeline steps
#define FS_PAD (TAP_STEPS * TPS)           // taps past FS are zeros in x and w
#define Q_ROW (FS_PAD * CPG)               // filter chunks per output channel
#define Q_STRIDE (Q_ROW | 1)               // odd: eight consecutive rows hit eight bank groups
#define A_TAP (BM * 8)                     // chunks of one tap's tile: BM rows of 128 bytes
#define A_STAGE (TPS * A_TAP)
#define KSTEPS (TPS * CPG / 2)             // m16n8k16 steps per stage
#define ROWS_PER_THREAD (BM * 8 / THREADS) // x rows each thread copies per tap
#define NTILE_G ((GROUPS + GPB - 1) / GPB) // group tiles

#define KG_W (KG / SUB)                    // real outputs per real group
#define PART_BYTES (SUB == 1 ? 16 : CG_W * 2)   // bytes of one filter copy
static_assert(CG % 8 == 0 && KG % 8 == 0, "whole 16-byte chunks per group");
static_assert(SUB == 1 || (CG == 8 && CG_W * SUB == 8 && KG % SUB == 0), "virtual groups of 8 channels");
static_assert(GPB * CPG <= 8, "a block's channels fit one 128-byte row");
static_assert((TPS * CPG) % 2 == 0, "a stage holds whole m16n8k16 steps");
static_assert(WN % 8 == 0 && (WN % KG == 0 || KG % WN == 0), "warp columns align with groups");
static_assert(BM % (WARPS_M * 16) == 0 && BN % WARPS_N == 0, "tile shape");
static_assert((BM * 8) % THREADS == 0 && THREADS % 8 == 0, "copies per thread");

// Copies of 4, 8 or 16 bytes; `valid == false` writes zeros and reads nothing.
template <int BYTES> __device__ __forceinline__ void cp_async_part(unsigned dst, const void* src, bool valid) {
    if constexpr (BYTES == 16) {
        cp_async16(dst, src, valid);
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES), "r"(valid ? BYTES : 0));
    }
}

// Chunk offset (16-byte units) of chunk column c of row r in a tap tile: rows are 128 bytes,
// chunks XOR-swizzled by r % 8 so that ldmatrix's eight rows hit eight bank groups.
__device__ __forceinline__ int a_chunk(int r, int c) { return r * 8 + (c ^ (r & 7)); }

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_fwd_grouped_tc(const Params p) {
    extern __shared__ __align__(128) uint4 smem[];
    uint4* sb = smem;                          // BN rows of Q_STRIDE filter chunks
    uint4* sa = smem + BN * Q_STRIDE;          // STAGES × TPS tap tiles of x
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
    const int M = p.n * OSP;
    // Group tiles vary fastest: blocks sharing a pixel tile run together and share it in L2.
    const int m0 = (blockIdx.x / NTILE_G) * BM, g0 = (blockIdx.x % NTILE_G) * GPB;
    const T* x = (const T*)p.x;
    const T* w = (const T*)p.w;

    // The block's filters, once: row n = j·KG + kn, chunk q = tap·CPG + c8, in SUB parts of
    // CG_W channels; only the part of output kn's real group is read, the rest are zeros.
    for (int i = tid; i < BN * Q_ROW * SUB; i += THREADS) {
        const int part = i % SUB, n = i / SUB / Q_ROW, q = i / SUB % Q_ROW;
        const int tap = q / CPG, c8 = q % CPG, g = g0 + n / KG, kn = n % KG;
        const bool ok = tap < FS && g < GROUPS && part == kn / KG_W;
        const int rw = tap % FW, rh = (tap / FW) % FH, rd = tap / (FW * FH);
        const T* src = ok ? w + (i64)(g * KG + kn) * WS_K + (i64)rd * WS_D + (i64)rh * WS_H + (i64)rw * WS_W + c8 * 8 : w;
        cp_async_part<PART_BYTES>(smem_addr(sb + n * Q_STRIDE + q) + part * PART_BYTES, src, ok);
    }

    // Each thread copies chunk column `col` of ROWS_PER_THREAD pixel rows at every tap.
    const int col = tid & 7;
    const bool col_ok = col < GPB * CPG && g0 + col / CPG < GROUPS;
    i64 base[ROWS_PER_THREAD];
    int hd[ROWS_PER_THREAD], hh[ROWS_PER_THREAD], hw[ROWS_PER_THREAD];
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
        const int m = m0 + (tid >> 3) + i * (THREADS / 8);
        const Pixel q = pixel_of(m < M ? m : 0);
        base[i] = (i64)q.n * XS_N + (i64)(g0 * CG + col * 8);
        hd[i] = m < M && col_ok ? q.od * SD - PD : -(1 << 28);   // such a row never loads
        hh[i] = q.oh * SH - PH;
        hw[i] = q.ow * SW - PW;
    }
    auto load_step = [&](int step) {
        uint4* s = sa + (step % STAGES) * A_STAGE;
#pragma unroll
        for (int t = 0; t < TPS; ++t) {
            const int tap = step * TPS + t;
            const int rw = tap % FW, rh = (tap / FW) % FH, rd = tap / (FW * FH);
#pragma unroll
            for (int i = 0; i < ROWS_PER_THREAD; ++i) {
                const int r = (tid >> 3) + i * (THREADS / 8);
                const int id = hd[i] + rd * DD, ih = hh[i] + rh * DH, iw = hw[i] + rw * DW;
                const bool ok = tap < FS && (unsigned)id < ID && (unsigned)ih < IH && (unsigned)iw < IW;
                const T* src = ok ? x + base[i] + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W : x;
                if (col < GPB * CPG) cp_async16(smem_addr(s + t * A_TAP + a_chunk(r, col)), src, ok);
            }
        }
    };

    float acc[MT][GW * NPG][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < GW * NPG; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < TAP_STEPS) load_step(s);
        cp_async_commit();   // the filter copies join the first group
    }

    // This warp's first column and first group (block-local).
    const int n_first = warp_n * WN, j_first = n_first / KG;
    for (int step = 0; step < TAP_STEPS; ++step) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();   // stage `step` is visible; every warp is done with step - 1
        if (step + STAGES - 1 < TAP_STEPS) load_step(step + STAGES - 1);
        cp_async_commit();

        const uint4* st = sa + (step % STAGES) * A_STAGE;
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            // Lanes 0–15 address chunk 2·ks of the stage, lanes 16–31 chunk 2·ks + 1.
            const int q = ks * 2 + (lane >> 4);
            const int tl = q / CPG, c8 = q % CPG;
            const int qb = step * TPS * CPG + ks * 2;   // filter chunk of this step
#pragma unroll
            for (int jj = 0; jj < GW; ++jj) {
                const int j = j_first + jj;
                const int nb = WN >= KG ? j * KG : n_first;
                unsigned af[MT][4];
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    const int r = warp_m * WM + mi * 16 + (lane & 15);
                    ldmatrix_x4(af[mi], smem_addr(st + tl * A_TAP + a_chunk(r, j * CPG + c8)));
                }
#pragma unroll
                for (int f = 0; f < NPG; f += 2) {
                    unsigned b[4];
                    if (f + 1 < NPG) {
                        const int n = nb + f * 8 + (lane & 7) + ((lane >> 4) << 3);
                        ldmatrix_x4(b, smem_addr(sb + n * Q_STRIDE + qb + ((lane >> 3) & 1)));
                    } else {
                        const int n = nb + f * 8 + (lane & 7);
                        unsigned b2[2];
                        ldmatrix_x2(b2, smem_addr(sb + n * Q_STRIDE + qb + ((lane >> 3) & 1)));
                        b[0] = b2[0]; b[1] = b2[1]; b[2] = 0u; b[3] = 0u;
                    }
#pragma unroll
                    for (int mi = 0; mi < MT; ++mi) {
                        mma16816(acc[mi][jj * NPG + f], af[mi], b[0], b[1]);
                        if (f + 1 < NPG) mma16816(acc[mi][jj * NPG + f + 1], af[mi], b[2], b[3]);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();

    // Accumulator of each m16n8 tile: rows lane/4 [+8], columns 2·(lane%4) + {0, 1}.
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_m * WM + mi * 16 + (lane >> 2) + h * 8;
            if (m >= M) continue;
            const OutRow r = out_row(m);
#pragma unroll
            for (int jj = 0; jj < GW; ++jj) {
                const int nb = WN >= KG ? (j_first + jj) * KG : n_first;
#pragma unroll
                for (int f = 0; f < NPG; ++f) {
                    const int n = nb + f * 8 + (lane & 3) * 2;
                    const int g = g0 + n / KG;
                    if (g < GROUPS) store_pair(p, r, g, n % KG, acc[mi][jj * NPG + f][h * 2], acc[mi][jj * NPG + f][h * 2 + 1]);
                }
            }
        }
    }
}
