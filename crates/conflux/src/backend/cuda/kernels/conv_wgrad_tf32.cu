// Backward-weights of f32 convolutions on TF32 tensor cores (sm_90a): dw[k][tap, c] = Σ over
// output pixels of dy[pixel][k] · x[pixel's window shifted by tap][c], TF32 products (TF32
// allowed) or split TF32 products with f32 accuracy (strict f32, F32_SPLIT). Prepended by the
// solver: igemm_tile.cuh, tma.cuh, wgmma.cuh, tf32_split.cuh, wgmma_tf32x3.cuh,
// wgrad_slots.cuh.
//
// Why a transposed operand: both operands are pixel-major in channels-last memory, and TF32
// wgmma reads B from shared memory only K-major (here: pixel-contiguous). So one operand,
// "T", is first copied by wgrad_transpose (from any layout) into a scratch matrix of channel
// rows × pixel columns (with its TF32 lo parts below when split), and the other, "R", is
// loaded as it is and read into registers (A may come from registers in any orientation). R
// is x, through the forward kernel's im2col loads, and T is dy; for a 1×1, unpadded, stride-1
// filter whose x has fewer channels than dy, and whose dy loads as boxes (channels-last), the
// roles swap (R_IS_X = 0), so the smaller tensor is the one copied.
//
// GEMM per group: M = R's channels (filter columns when R is x), N = T's channels, reduction
// over the N·OH·OW output pixels in k-steps of 32 (one 128-byte row of T per channel). A stage
// holds BM/32 R boxes (32 pixel rows × 32 channels, 128-byte swizzle) and BN T rows (and BN
// lo rows). Warp-specialised like the 16-bit kernel: one producer thread, BM/64 consumer
// warpgroups; the split reduction and its slots are the 16-bit kernel's (wgrad_slots.cuh),
// stored transposed when R is x.

#define CONSUMERS (BM / 64)
#define R_BOX 4096   // 32 pixels × 32 channels × 4 bytes
#define A_BYTES (BM * 128)
#define B_BYTES (BN * 128)
#define STAGE_BYTES (A_BYTES + (1 + F32_SPLIT) * B_BYTES)
#define T_ROWS (R_IS_X ? KG : CG)   // T channels per group

static_assert(BK == 32 && sizeof(T) == 4, "f32 data, 32-pixel k-steps");
static_assert(THREADS == (CONSUMERS + 1) * 128, "one producer warpgroup plus one per 64 rows");
static_assert(BN == 64 || BN == 128, "register-A TF32 wgmma is at most 128 wide here");
static_assert(CG % 32 == 0, "an R box is one tap and 32 channels");
static_assert(FD == 1 && OD == 1 && ID == 1, "2-D convolution");
static_assert(R_IS_X || (FH == 1 && FW == 1 && A_TILED), "T = x only for a plain 1×1 GEMM");
static_assert(TILE_K == (R_IS_X ? BN : BM) && TILE_COLS == (R_IS_X ? BM : BN), "a slot is (dy channel, x column) of the R × T tile");

// WgradArgs (wgrad_slots.cuh): a is R's map — im2col of x, dims (C, W, H, N), 32 channels × 32
// pixels per copy; A_TILED: box map of the (N·H·W) × C matrix; R = dy: box map of the
// (N·OH·OW) × K matrix — b is the T scratch's box map, dims (pixels, rows), 32 pixels × BN rows.

// Address of A register v of k slice ks for warp `warp`, lane `lane` of a consumer whose 64 R
// channels are the two boxes at sa: row m is channel m % 32 of box m / 32, k slice ks pixels
// 8·ks.. are rows of the box, each a 128-byte row of 32 channels, 16-byte chunks XOR-swizzled
// by pixel % 8.
__device__ __forceinline__ unsigned r_frag(unsigned sa, int ks, int v, int lane, int warp) {
    const int m = warp * 16 + (lane >> 2) + (v & 1) * 8;
    const int pix = ks * 8 + (lane & 3) + (v >> 1) * 4;
    return sa + (m >> 5) * R_BOX + pix * 128 + ((((m & 31) >> 2) ^ (pix & 7)) << 4) + (m & 3) * 4;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) conv_wgrad_tf32(const __grid_constant__ WgradArgs args) {
    const Params& p = args.p;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const TmaRing ring = tma_ring(smem_raw, STAGES * STAGE_BYTES, STAGES);
    const unsigned sbase = ring.sbase;
    auto full = [&](int s) { return ring.full(s); };
    auto empty = [&](int s) { return ring.empty(s); };

    const int tid = threadIdx.x, wg = tid >> 7;
    const int g = blockIdx.z;
    const SplitShare share = split_share(args, (p.n * OSP + 31) / 32);
    const int kb = share.kb, ke = share.ke;
    // Tiles are numbered (k tile, column tile) as the reduce kernel reads them.
    const int k_tile = share.tile / COL_TILES, col_tile = share.tile % COL_TILES;
    const int m0 = R_IS_X ? col_tile * BM : k_tile * BM, n0 = R_IS_X ? k_tile * BN : col_tile * BN;
    tma_ring_init(ring, CONSUMERS * 4);

    if (wg == 0) {
        if (tid != 0) return;
        tma_prefetch_map(&args.a);
        tma_prefetch_map(&args.b);
        const int lo_rows = p.groups * T_ROWS;   // the lo parts' first row in T
        for (int kt = kb, it = 0; kt < ke; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(empty(s), ((it / STAGES) & 1) ^ 1);
            mbar_arrive_expect_tx(full(s), STAGE_BYTES);
            const unsigned dst = sbase + s * STAGE_BYTES;
            const int p0 = kt * 32;
            // Boxes past this group's channels read the next group's (or zeros): their rows
            // and columns of the tile are never stored.
#if R_IS_X && !A_TILED
            const Pixel q = pixel_of(p0);
            const int w0 = q.ow * SW - PW, h0 = q.oh * SH - PH;
#endif
#pragma unroll
            for (int i = 0; i < BM / 32; ++i) {
#if !R_IS_X
                tma_load_2d(dst + i * R_BOX, &args.a, full(s), g * KG + m0 + 32 * i, p0);
#elif A_TILED
                tma_load_2d(dst + i * R_BOX, &args.a, full(s), g * CG + min(m0 + 32 * i, COLS - 32), p0);
#else
                const int col = min(m0 + 32 * i, COLS - 32), tap = col / CG, c = col % CG;
                tma_load_im2col_4d(dst + i * R_BOX, &args.a, full(s), g * CG + c, w0, h0, q.n, (unsigned short)(tap % FW * DW),
                                   (unsigned short)(tap / FW * DH));
#endif
            }
            tma_load_2d(dst + A_BYTES, &args.b, full(s), p0, g * T_ROWS + n0);
#if F32_SPLIT
            tma_load_2d(dst + A_BYTES + B_BYTES, &args.b, full(s), p0, lo_rows + g * T_ROWS + n0);
#endif
        }
        return;
    }

    const int cw = wg - 1, lane = tid & 31, warp = (tid >> 5) & 3;
    float acc[BN / 2];
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[j] = 0.f;
    for (int kt = kb, it = 0; kt < ke; ++kt, ++it) {
        const unsigned stage = sbase + (it % STAGES) * STAGE_BYTES, sa = stage + cw * 2 * R_BOX, sb = stage + A_BYTES;
        const auto frag = [&](int ks, int v) { return r_frag(sa, ks, v, lane, warp); };
        mbar_wait(full(it % STAGES), (it / STAGES) & 1);
#if F32_SPLIT
        // A fresh partial per stage, added with f32 rounding (see mma_rs_stage); the other
        // consumer warpgroup keeps the tensor cores busy meanwhile.
        float part[BN / 2];
        mma_rs_stage<true>(part, frag, sb, sb + B_BYTES, true);
        if (lane == 0) mbar_arrive(empty(it % STAGES));
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[j] += part[j];
#else
        mma_rs_stage<false>(acc, frag, sb, 0, false);
        if (lane == 0) mbar_arrive(empty(it % STAGES));
#endif
    }
#if R_IS_X
    slot_store_transposed<BM>(wgrad_slot(args, g, blockIdx.x), acc, cw, lane, warp);
#else
    slot_store(wgrad_slot(args, g, blockIdx.x), acc, cw, lane, warp);
#endif
}

struct TransposeArgs {
    const float* src;   // p.y (T = dy) or p.x (T = x)
    unsigned* dst;      // rows × ld, then (F32_SPLIT) the lo parts' rows × ld
    long long ld;       // elements between rows (pixels rounded up to 16 bytes)
    int rows, pixels;   // groups · T_ROWS channels; N·OH·OW
};

#if R_IS_X
#define TS_N YS_N
#define TS_C YS_C
#define TS_H YS_H
#define TS_W YS_W
#else
#define TS_N XS_N
#define TS_C XS_C
#define TS_H XS_H
#define TS_W XS_W
#endif
// Channels-last source with 16-byte aligned pixel rows: read 4 channels per load.
#define TS_VEC (TS_C == 1 && TS_W % 4 == 0 && TS_H % 4 == 0 && TS_N % 4 == 0)
#define TP 128   // pixels per transpose tile

__device__ __forceinline__ i64 t_offset(int pix) {
    const Pixel q = pixel_of(pix);
    return (i64)q.n * TS_N + (i64)q.oh * TS_H + (i64)q.ow * TS_W;
}

// T operand: dst[channel][pixel] = src's element, as TF32 hi (and lo) parts when split, else
// the f32 bits. Tiles of 32 channels × 128 pixels go through shared memory so both sides move
// along their contiguous axis: 16-byte loads along a channels-last source's channels (else
// lanes along pixels) and 16-byte stores along T's pixel rows.
extern "C" __global__ void __launch_bounds__(256) wgrad_transpose(const TransposeArgs a) {
    __shared__ float tile[32][TP + 1];   // [channel][pixel]
    const int t = threadIdx.x, p0 = blockIdx.x * TP, c0 = blockIdx.y * 32;
#if TS_VEC
#pragma unroll
    for (int i = 0; i < TP / 32; ++i) {
        // Thread t: channels 4·(t % 8).. of pixel t / 8 (+ 32 per pass).
        const int pl = t / 8 + 32 * i, cl = (t % 8) * 4, pix = p0 + pl, c = c0 + cl;
        if (pix >= a.pixels) continue;
        const float* s = a.src + t_offset(pix) + c;
        float v[4];
        if (c + 3 < a.rows) {
            const float4 q = __ldg((const float4*)s);
            v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = c + j < a.rows ? s[j] : 0.f;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) tile[cl + j][pl] = v[j];
    }
#else
#pragma unroll 4
    for (int i = 0; i < 16; ++i) {
        const int pl = t % TP, cl = t / TP + 2 * i, pix = p0 + pl, c = c0 + cl;
        if (pix < a.pixels && c < a.rows) tile[cl][pl] = a.src[t_offset(pix) + (i64)c * TS_C];
    }
#endif
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        // Thread t: pixels 4·(t % 32).. of channel t / 32 (+ 8 per pass).
        const int cl = t / 32 + 8 * i, pl = (t % 32) * 4, c = c0 + cl, pix = p0 + pl;
        if (c >= a.rows || pix >= a.pixels) continue;
        unsigned hi[4], lo[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float v = tile[cl][pl + j];
#if F32_SPLIT
            tf32_split(v, hi[j], lo[j]);
#else
            hi[j] = __float_as_uint(v), lo[j] = 0;
#endif
        }
        unsigned* d = a.dst + c * a.ld + pix;
        const long long lo_at = (long long)a.rows * a.ld;
        if (pix + 3 < a.pixels) {
            *(uint4*)d = make_uint4(hi[0], hi[1], hi[2], hi[3]);
            if (F32_SPLIT) *(uint4*)(d + lo_at) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        } else {
            for (int j = 0; j < 4 && pix + j < a.pixels; ++j) {
                d[j] = hi[j];
                if (F32_SPLIT) d[lo_at + j] = lo[j];
            }
        }
    }
}
