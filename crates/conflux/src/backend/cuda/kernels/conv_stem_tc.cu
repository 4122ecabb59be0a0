// Ungrouped forward convolutions with few input channels (the stems of image networks: a
// 3-channel 7×7 stride 2, 3×3 stride 2, 4×4 stride 4; at most 8 channels) on tensor cores
// (mma.sync m16n8k16, f32 accumulation), x, w and y in any layout, fused epilogue.
//
// The reduction runs over 16-byte chunks of TPC horizontally adjacent taps × CP channels (CP is
// the channel count rounded up to a power of two, TPC = 8 / CP): a 3-channel 7×7 filter is 7
// rows of 4 chunks (taps 0–1, 2–3, 4–5, 6 and a zero tap), 224 products per output where
// padding the channels to 8 costs 392. Each block copies x once per tile into a shared patch
// whose 16-byte slot at (layer, row, col) holds the pixels col, col + DW, … (TPC of them, CP
// channels each): the A rows of a chunk are then whole slots, 16-byte ldmatrix rows at any
// stride and dilation. Slot columns are ordered by residue modulo the stride, so that the eight
// pixels of one ldmatrix phase read eight consecutive slots (no bank conflicts). The block's
// filter tile stays in shared memory while the block walks its pixel tiles (a grid of about
// as many blocks as fit the GPU at once), so only x and y move per tile.
//
// Preamble: geometry, CP, TPC, QR (chunks per filter row), TH × TW (output rows × columns per
// tile), WARPS_M, WARPS_N, BN (output channels per block), MIN_BLOCKS, PAIR_STORE, MMA_AB;
// igemm_common.cuh and mma_sync.cuh come first.

#define BM (TH * TW)                                  // output pixels per tile
#define THREADS (WARPS_M * WARPS_N * 32)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MT (WM / 16)
#define NT (WN / 8)
#define Q_REAL (FD * FH * QR)                         // chunks of the reduction
#define Q_ALL ((Q_REAL + 1) / 2 * 2)                  // whole m16n8k16 steps
#define Q_STRIDE (Q_ALL | 1)                          // odd: ldmatrix's eight filter rows hit eight bank groups
#define KSTEPS (Q_ALL / 2)
#define P_LAYERS ((FD - 1) * DD + 1)                  // patch depth
#define P_ROWS ((TH - 1) * SH + (FH - 1) * DH + 1)    // patch rows
#define S_COLS ((TW - 1) * SW + (QR - 1) * TPC * DW + 1)   // slot columns that A rows start at
#define L_COLS (S_COLS + (TPC - 1) * DW)              // pixel columns a tile reads
#define S_RES ((S_COLS + SW - 1) / SW)                // slot columns per residue modulo SW
#define S_ROW (SW * S_RES)                            // slots per patch row
#define P_SLOTS (P_LAYERS * P_ROWS * S_ROW)                 // slots of one patch buffer
#define FILL (P_LAYERS * P_ROWS * L_COLS)                   // pixels a tile reads
#define FILL_ITERS ((FILL + THREADS - 1) / THREADS)
#define WORDS ((CP + 1) / 2)                                 // 32-bit words of one pixel's channels
#define TILES_H ((OH + TH - 1) / TH)
#define TILES_W ((OW + TW - 1) / TW)
static_assert(CP * TPC == 8 && CG <= CP, "a chunk is TPC taps of CP channels");
static_assert(TW % 8 == 0 && BM % (WARPS_M * 16) == 0, "an ldmatrix phase is eight pixels of one output row");
static_assert(BN % (WARPS_N * 8) == 0, "whole n8 fragments per warp");

typedef unsigned short bits16;

// Slot of the patch holding pixel column `col` of row `row` (layer folded into `row`).
__device__ __forceinline__ int slot_of(int row, int col) { return row * S_ROW + (col % SW) * S_RES + col / SW; }

// Offset (slots) of chunk q's first tap from the slot of a pixel's top-left tap. A padding
// chunk (q = Q_REAL) reads chunk Q_REAL - 1's finite data against zero weights.
__device__ __forceinline__ int chunk_offset(int q) {
    if (q >= Q_REAL) q = Q_REAL - 1;
    const int cq = q % QR, f = q / QR, ky = f % FH, kd = f / FH;
    const int cx = cq * TPC * DW;   // patch column of the chunk's first tap, from the pixel's
    return (kd * DD * P_ROWS + ky * DH) * S_ROW + (cx % SW) * S_RES + cx / SW;
}

// Part t (CP channels, packed in words) of a slot: one store.
__device__ __forceinline__ void put_part(uint4* slot, int t, const unsigned (&wd)[WORDS]) {
    if constexpr (CP == 1) ((bits16*)slot)[t] = (bits16)wd[0];
    else if constexpr (CP == 2) ((unsigned*)slot)[t] = wd[0];
    else if constexpr (CP == 4) ((uint2*)slot)[t] = make_uint2(wd[0], wd[1]);
    else *slot = make_uint4(wd[0], wd[1], wd[2], wd[3]);
}

// A pixel tile: image, output layer and first output row and column.
struct TileAt { int n, od, oh0, ow0; };
__device__ __forceinline__ TileAt tile_at(int t) {
    TileAt a;
    a.ow0 = t % TILES_W * TW;
    t /= TILES_W;
    a.oh0 = t % TILES_H * TH;
    t /= TILES_H;
    a.od = t % OD;
    a.n = t / OD;
    return a;
}

// This thread's pixels of tile `at` (pixel i = tid + it·THREADS of the patch, columns fastest),
// CP channels each, zeros outside the image and past the channel count.
__device__ __forceinline__ void fetch(const bits16* x, const TileAt& at, unsigned (&v)[FILL_ITERS][WORDS]) {
    const int id0 = at.od * SD - PD, ih0 = at.oh0 * SH - PH, iw0 = at.ow0 * SW - PW;
#pragma unroll
    for (int it = 0; it < FILL_ITERS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        const int col = i % L_COLS, row = i / L_COLS;   // row runs over layers × patch rows
        const int id = id0 + row / P_ROWS, ih = ih0 + row % P_ROWS, iw = iw0 + col;
        const bool in = i < FILL && (unsigned)id < ID && (unsigned)ih < IH && (unsigned)iw < IW;
        const bits16* src = x + (i64)at.n * XS_N + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W;
#pragma unroll
        for (int w = 0; w < WORDS; ++w) {
            const int c = 2 * w;
            const unsigned lo = in && c < CG ? src[(i64)c * XS_C] : 0u;
            const unsigned hi = in && c + 1 < CG ? src[(i64)(c + 1) * XS_C] : 0u;
            v[it][w] = lo | hi << 16;
        }
    }
}

// The fetched pixels into the patch: pixel column col is part t of slot column col - t·DW.
__device__ __forceinline__ void store_patch(uint4* patch, const unsigned (&v)[FILL_ITERS][WORDS]) {
#pragma unroll
    for (int it = 0; it < FILL_ITERS; ++it) {
        const int i = threadIdx.x + it * THREADS;
        if (i >= FILL) break;
        const int col = i % L_COLS, row = i / L_COLS;
#pragma unroll
        for (int part = 0; part < TPC; ++part) {
            const int sc = col - part * DW;
            if (sc >= 0 && sc < S_COLS) put_part(patch + slot_of(row, sc), part, v[it]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_fwd_stem_tc(const Params p) {
    extern __shared__ __align__(128) uint4 smem[];
    uint4* sb = smem;                       // BN rows of Q_STRIDE filter chunks
    uint4* sa = smem + BN * Q_STRIDE;       // two patch buffers
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
    const int k0 = blockIdx.y * BN;
    const bits16* x = (const bits16*)p.x;
    const bits16* w = (const bits16*)p.w;

    // The filter tile, once: element e of chunk q of row n is tap cq·TPC + e / CP, channel e % CP.
    bits16* sbh = (bits16*)sb;
    for (int i = tid; i < BN * Q_STRIDE * 8; i += THREADS) {
        const int e = i % 8, q = i / 8 % Q_STRIDE, n = i / 8 / Q_STRIDE;
        const int c = e % CP, cq = q % QR, f = q / QR, ky = f % FH, kd = f / FH, kx = cq * TPC + e / CP;
        const int k = k0 + n;
        const bool real = q < Q_REAL && c < CG && kx < FW && k < KG;
        sbh[i] = real ? w[(i64)k * WS_K + (i64)c * WS_C + (i64)kd * WS_D + (i64)ky * WS_H + (i64)kx * WS_W] : (bits16)0;
    }

    // Every chunk's slot offset, read per step (a fully unrolled reduction of a 7×7 filter holds
    // too many fragments in flight for the registers of several blocks per SM).
    __shared__ int chunk_off[Q_ALL];
    for (int q = tid; q < Q_ALL; q += THREADS) chunk_off[q] = chunk_offset(q);

    // This lane's A row in each m16 tile: the slot of its pixel's top-left tap.
    int pix[MT];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
        const int pl = warp_m * WM + mi * 16 + (lane & 15);
        pix[mi] = slot_of(pl / TW * SH, pl % TW * SW);
    }
    const int n_first = warp_n * WN;

    // The patch is double-buffered and each tile's pixels are fetched into registers while the
    // block multiplies the previous tile, so global latency hides behind the MMAs.
    const int tiles = p.n * OD * TILES_H * TILES_W;
    unsigned fetched[FILL_ITERS][WORDS];
    if (blockIdx.x < tiles) fetch(x, tile_at(blockIdx.x), fetched);
    for (int tile = blockIdx.x, j = 0; tile < tiles; tile += gridDim.x, ++j) {
        const TileAt at = tile_at(tile);
        uint4* patch = sa + (j & 1) * P_SLOTS;
        // Buffer j & 1 was last read in iteration j - 2: every warp finished that before it
        // passed the barrier of iteration j - 1.
        store_patch(patch, fetched);
        __syncthreads();   // the patch (and, the first time, the filter) is written
        if (tile + gridDim.x < tiles) fetch(x, tile_at(tile + gridDim.x), fetched);

        float acc[MT][NT][4];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
            for (int f = 0; f < NT; ++f)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[mi][f][e] = 0.f;

#pragma unroll 2
        for (int ks = 0; ks < KSTEPS; ++ks) {
            // Lanes 0–15 address chunk 2·ks, lanes 16–31 chunk 2·ks + 1.
            const int off = chunk_off[2 * ks + (lane >> 4)];
            unsigned af[MT][4];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) ldmatrix_x4(af[mi], smem_addr(patch + pix[mi] + off));
#pragma unroll
            for (int f = 0; f < NT; f += 2) {
                unsigned b[4];
                if (f + 1 < NT) {
                    const int nr = n_first + f * 8 + (lane & 7) + ((lane >> 4) << 3);
                    ldmatrix_x4(b, smem_addr(sb + nr * Q_STRIDE + 2 * ks + ((lane >> 3) & 1)));
                } else {
                    unsigned b2[2];
                    ldmatrix_x2(b2, smem_addr(sb + (n_first + f * 8 + (lane & 7)) * Q_STRIDE + 2 * ks + ((lane >> 3) & 1)));
                    b[0] = b2[0]; b[1] = b2[1]; b[2] = 0u; b[3] = 0u;
                }
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    mma16816(acc[mi][f], af[mi], b[0], b[1]);
                    if (f + 1 < NT) mma16816(acc[mi][f + 1], af[mi], b[2], b[3]);
                }
            }
        }

        // Accumulator of each m16n8 tile: rows lane/4 [+8], columns 2·(lane%4) + {0, 1}.
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int pl = warp_m * WM + mi * 16 + (lane >> 2) + h * 8;
                const int oh = at.oh0 + pl / TW, ow = at.ow0 + pl % TW;
                if (oh >= OH || ow >= OW) continue;
                const OutRow r = out_row(((at.n * OD + at.od) * OH + oh) * OW + ow);
#pragma unroll
                for (int f = 0; f < NT; ++f) store_pair(p, r, 0, k0 + n_first + f * 8 + (lane & 3) * 2, acc[mi][f][h * 2], acc[mi][f][h * 2 + 1]);
            }
        }
    }
}
