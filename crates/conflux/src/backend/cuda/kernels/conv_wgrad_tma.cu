// Backward-weights on Hopper (sm_90a): dw[k][tap, c] = Σ over output pixels of
// dy[pixel][k] · x[pixel's window shifted by tap][c], a GEMM with M = KG output channels,
// N = FD·FH·FW·CG filter columns and the reduction over the N·OH·OW output pixels. Prepended by
// the solver: igemm_tile.cuh (geometry, pixel decomposition), tma.cuh, wgmma.cuh (built with
// WGMMA_MN_MAJOR), wgrad_slots.cuh (the split reduction's slots and reduce kernel).
//
// Both operands arrive from the copy engine exactly as the forward TMA kernel reads x: a k-step
// is 64 consecutive output pixels, dy as a box of 64 pixels × 64 output channels of the
// (N·OH·OW) × K matrix, x as im2col boxes of the same 64 pixels × 64 channels for one tap (box
// loads of the (N·H·W) × C matrix for a 1×1, unpadded, stride-1 filter). In shared memory
// each pixel is a 128-byte row of channels: both tiles are MN-major, which wgmma reads with
// its transposed-operand flags. Pixels past the batch arrive as zeros.
//
// The reduction is long and the output small, so it is split: block (unit, group) computes
// tile unit / SPLITS over k-steps [s·KS/SPLITS, (s+1)·KS/SPLITS), s = unit % SPLITS, and writes
// its f32 sums to its own slot, which conv_wgrad_reduce adds up in a fixed order.
// Warp-specialised like the forward kernel: one producer thread, BM/64 consumer warpgroups.

#define CONSUMERS (BM / 64)
#define A_BYTES (BM * 128)
#define B_BYTES (BN * 128)
#define STAGE_BYTES (A_BYTES + B_BYTES)

static_assert(BK == 64, "128-byte rows");
static_assert(THREADS == (CONSUMERS + 1) * 128, "one producer warpgroup plus one per 64 rows");
static_assert(CG % 64 == 0, "a 64-column block is one tap and 64 channels");
#ifndef TMA_3D
#define TMA_3D 0
#endif
static_assert(TMA_3D || (FD == 1 && OD == 1 && ID == 1), "2-D convolution unless TMA_3D (a 5-D im2col map of x)");

static_assert(TILE_K == BM && TILE_COLS == BN, "slots are BM × BN");

// WgradArgs (wgrad_slots.cuh): a is the im2col map of x, dims (C, W, H, N) (TMA_3D: (C, W, H,
// D, N), taps (td, th, tw) with td slowest), 64 channels × 64
// pixels per copy (A_TILED: box map of x as dims (C, N·H·W), 64 × 64 per copy); b is the box
// map of dy, dims (K, N·OH·OW), 64 × 64 per copy.

// One stage: BM/64 dy boxes (64 pixel rows × 64 output channels each), then BN/64 x boxes.
// Consumer cw multiplies its dy box (M = 64) by all of B, four k16 steps of 16 pixel rows.
__device__ __forceinline__ void mma_stage_mn(float (&acc)[BN / 2], unsigned stage_addr, int cw) {
    const unsigned sa = stage_addr + cw * 8192, sb = stage_addr + A_BYTES;
    wgmma_hold(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) WGMMA(acc, wgmma_desc_mn(sa + ks * 2048, 8192), wgmma_desc_mn(sb + ks * 2048, 8192));
    wgmma_commit();
    wgmma_hold(acc);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) conv_wgrad_tma(const __grid_constant__ WgradArgs args) {
    const Params& p = args.p;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const TmaRing ring = tma_ring(smem_raw, STAGES * STAGE_BYTES, STAGES);
    const unsigned sbase = ring.sbase;
    auto full = [&](int s) { return ring.full(s); };
    auto empty = [&](int s) { return ring.empty(s); };

    const int tid = threadIdx.x, wg = tid >> 7;
    const int g = blockIdx.z;
    const SplitShare share = split_share(args, (p.n * OSP + 63) / 64);
    const int kb = share.kb, ke = share.ke;
    const int m0 = share.tile / COL_TILES * BM, n0 = share.tile % COL_TILES * BN;
    tma_ring_init(ring, CONSUMERS * 4);

    if (wg == 0) {
        if (tid != 0) return;
        tma_prefetch_map(&args.a);
        tma_prefetch_map(&args.b);
        for (int kt = kb, it = 0; kt < ke; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(empty(s), ((it / STAGES) & 1) ^ 1);
            mbar_arrive_expect_tx(full(s), STAGE_BYTES);
            const unsigned dst = sbase + s * STAGE_BYTES;
            const int p0 = kt * 64;
            // Boxes past this group's channels read the next group's (or zeros): their rows and
            // columns of the tile are never stored.
#pragma unroll
            for (int i = 0; i < CONSUMERS; ++i) tma_load_2d(dst + i * 8192, &args.b, full(s), g * KG + m0 + 64 * i, p0);
#if !A_TILED
            const Pixel q = pixel_of(p0);
            const int w0 = q.ow * SW - PW, h0 = q.oh * SH - PH;
#endif
#pragma unroll
            for (int i = 0; i < BN / 64; ++i) {
                const int col = min(n0 + 64 * i, COLS - 64);
#if A_TILED
                tma_load_2d(dst + A_BYTES + i * 8192, &args.a, full(s), g * CG + col, p0);
#else
                const int tap = col / CG, c = col % CG;
#if TMA_3D
                tma_load_im2col_5d(dst + A_BYTES + i * 8192, &args.a, full(s), g * CG + c, w0, h0, q.od * SD - PD, q.n, (unsigned short)(tap % FW * DW),
                                   (unsigned short)(tap / FW % FH * DH), (unsigned short)(tap / (FW * FH) * DD));
#else
                tma_load_im2col_4d(dst + A_BYTES + i * 8192, &args.a, full(s), g * CG + c, w0, h0, q.n, (unsigned short)(tap % FW * DW),
                                   (unsigned short)(tap / FW * DH));
#endif
#endif
            }
        }
        return;
    }

    const int cw = wg - 1, lane = tid & 31, warp = (tid >> 5) & 3;
    float acc[BN / 2];
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[j] = 0.f;
    for (int kt = kb, it = 0; kt < ke; ++kt, ++it) {
        mbar_wait(full(it % STAGES), (it / STAGES) & 1);
        mma_stage_mn(acc, sbase + (it % STAGES) * STAGE_BYTES, cw);
        if (it > 0) {
            // The previous step's multiplies have retired: its buffer may be refilled.
            wgmma_wait<1>();
            wgmma_hold(acc);
            if (lane == 0) mbar_arrive(empty((it - 1) % STAGES));
        }
    }
    wgmma_wait<0>();
    wgmma_hold(acc);

    slot_store(wgrad_slot(args, g, blockIdx.x), acc, cw, lane, warp);
}
