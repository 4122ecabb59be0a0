// Implicit-GEMM forward convolution on Hopper (sm_90a): tiles brought in by the copy engine
// (TMA: im2col loads of x, box loads of w) and multiplied with wgmma, f32 accumulation,
// 16-bit or f32 (TF32 multiplies) channels-last 2-D tensors, fused epilogue. Also int8 (i32
// sums, QUANT_INT8) and fp8 x and w (quant.cuh), whose y type TY differs from x's. Prepended by the solver: igemm_tile.cuh
// (GEMM view, epilogue helpers), tma.cuh, wgmma.cuh, wgmma_epilogue.cuh, tf32_split.cuh,
// wgmma_tf32x3.cuh.
//
// Warp-specialised and persistent: warpgroup 0 is the producer — one thread issues two bulk
// copies per 64-deep k-step into a ring of STAGES buffers and never computes; warpgroups
// 1..BM/64 are consumers, each multiplying 64 pixel rows by BN channels straight out of the
// swizzled buffers and running the epilogue. Buffers are handed over with mbarriers: `full`
// completes when the copy engine has written a stage's bytes, `empty` when every consumer
// warp has retired its multiplies of it. Each block walks output tiles b, b + gridDim.x, ...;
// the producer runs ahead into the next tile while consumers run this tile's epilogue.
//
// 3-D convolutions (TMA_3D) take a 5-D im2col map of x and taps (td, th, tw), td slowest.
//
// GEMM k-step kt = (filter tap, BK-channel slice; BK = 64 for 16-bit data, 32 for f32 on TF32
// tensor cores, 128 for 8-bit data — one 128-byte row each way — or half a row, 64-byte rows
// in the 64-byte swizzle: 32 for 16-bit data with fewer than 64 channels or whose last 64-channel
// slice would be at least half zeros, 64 for 8-bit data whose channels are a multiple of 64 but
// not of 128); a step never straddles taps. CHANNEL_TAIL
// (ungrouped, CG not a multiple of BK): each tap's last slice overhangs the channels and the
// copy engine fills the overhang of x's and w's boxes with zeros (w is then mapped as
// CG × taps × K instead of a K × (FH·FW·CG) matrix). The im2col copy starts at the tile's first output pixel (its filter window's corner
// in x) shifted by the tap, walks BM pixels in output order across rows and images, and
// zero-fills taps that fall in the padding or pixels past the batch; the w copy is rows
// [n0, n0 + BN) of w seen as a K × (FH·FW·CG) matrix, zero past K. A_TILED: a 1×1, unpadded,
// stride-1 convolution over dense pixel rows is a plain GEMM, and x is loaded as BM × 64 boxes
// of the (N·H·W) × C matrix, which the copy engine moves faster than im2col walks.
//
// Output: with TMA_STORE (dense channels-last y; groups whose channel slices are whole BKs)
// each consumer writes its 64 rows into a staging buffer laid out as the copy engine's
// swizzled BK × 64 boxes and one thread hands them to bulk stores, which drain while the
// warpgroup goes on to the next tile; else wg_epilogue (staged row stores or pairs).
//
// F32_SPLIT (strict f32, wgmma_tf32x3.cuh): w arrives split into TF32 hi and lo parts as one
// K × 2·(FH·FW·CG) matrix (hi columns, then lo columns), so a stage holds two w tiles; x is
// split in registers; every k slice is three TF32 products.
//
// WGMMA_B_MN_MAJOR (16-bit backward-data as a forward convolution, bwd_data_tc.rs and, one
// phase of a strided one, bwd_data_strided.rs): w is the caller's filter of the backward
// problem, read in place: for a k-step (tap, channel slice) its rows are the slice's channels
// and the source tap's 64-channel column blocks, an MN-major B tile, so the flipped filter
// needs no copy. Tap (th, tw) reads source tap (TAP0_H − th·TAP_STEP_H, TAP0_W − tw·TAP_STEP_W)
// of a filter SRC_FW taps wide (all taps reversed for stride 1).
//
// SPLITS > 1 (split-K, for grids far smaller than the GPU: batch 1, small images): output tile
// (m0, n0) is computed as SPLITS tiles over consecutive ranges of its k-steps. Each consumer
// warpgroup writes its 64 rows' partial sums to global scratch (`split_reduce`), and the one
// that raises the tile's counter last adds all of them in split order — reruns give the same
// bits whichever finishes last — and runs the epilogue. Nobody waits on another block.
//
// PINGPONG: the two consumer warpgroups take alternate tiles of 64 × BN instead of sharing a
// 128 × BN one, each with its own ring of STAGES buffers (a ring is consumed in order by one
// warpgroup, which the mbarrier parities rely on). The producer fills the rings in tile order,
// so one warpgroup's multiplies run while the other's epilogue stores its last tile: for short
// reductions (1×1 layers with few channels) the epilogue no longer leaves the tensor cores idle.

#if PINGPONG
static_assert(BM == 64, "ping-pong tiles are 64 rows, one per consumer warpgroup");
#define CONSUMERS 2
#define RINGS 2
#else
#define CONSUMERS (BM / 64)
#define RINGS 1
#endif
#define ROW_BYTES (BK * (int)sizeof(T))   // 128, or 64 (half-row k-steps of 8- or 16-bit data)
#define A_BYTES (BM * ROW_BYTES)
#define B_BYTES (BN * ROW_BYTES)
#define B_TILES (1 + F32_SPLIT)
#define STAGE_BYTES (A_BYTES + B_TILES * B_BYTES)
#define C_SLICES ((CG + BK - 1) / BK)
#define KSTEPS (FD * FH * FW * C_SLICES)
#ifndef SPLITS
#define SPLITS 1
#endif
static_assert(SPLITS >= 1 && SPLITS <= KSTEPS, "every split has a k-step");
#define PARTS (PINGPONG ? 1 : CONSUMERS)   // consumer warpgroups per output tile
#define OUT_BYTES (STAGE_STORE ? CONSUMERS * 64 * BN * (int)sizeof(TY) : 0)
#define YBK (128 / (int)sizeof(TY))   // y channels per 128-byte row of a bulk-store box
#define EMPTY_ARRIVALS (PINGPONG ? 4 : CONSUMERS * 4)   // one per consumer warp of the ring

static_assert(ROW_BYTES == 128 || (ROW_BYTES == 64 && sizeof(T) <= 2 && !F32_SPLIT), "128-byte rows (64-byte for 8- and 16-bit data)");
static_assert(THREADS == (CONSUMERS + 1) * 128, "one producer warpgroup plus one per 64 rows");
#ifndef CHANNEL_TAIL
#define CHANNEL_TAIL 0
#endif
static_assert(CG % BK == 0 || (CHANNEL_TAIL && !F32_SPLIT), "a k-step is one tap and BK channels");
#ifndef TMA_3D
#define TMA_3D 0
#endif
static_assert(TMA_3D || (FD == 1 && OD == 1 && ID == 1), "2-D convolution unless TMA_3D (a 5-D im2col map of x)");
static_assert(BN == 64 || BN == 128 || BN == 256, "BN");
#ifndef WGMMA_B_MN_MAJOR
#define WGMMA_B_MN_MAJOR 0
#endif
static_assert(!WGMMA_B_MN_MAJOR || (sizeof(T) == 2 && KG % 8 == 0 && !TMA_3D), "in-place filter reads: 2-D, 16-bit, 16-byte aligned boxes");
#if WGMMA_B_MN_MAJOR
#define MN_BLOCK_BYTES (BK * 128)   // one MN-major B block: BK k-rows × 64 channels of 16 bits
__device__ __forceinline__ int source_tap(int tap) { return (TAP0_H - tap / FW * TAP_STEP_H) * SRC_FW + TAP0_W - tap % FW * TAP_STEP_W; }
#endif

struct __align__(64) TmaArgs {
    TensorMap x;   // im2col map of x: dims (C, W, H, N) (TMA_3D: (C, W, H, D, N)), BK channels × BM pixels per copy
                   // (A_TILED: box map of x as dims (C, N·H·W), BK × BM per copy)
    TensorMap w;   // box map of w: dims (FH·FW·CG, K), BK × BN per copy (F32_SPLIT: dims
                   // (2·FH·FW·CG, K), the lo parts from column FH·FW·CG on)
    TensorMap y;   // box map of y (TMA_STORE): dims (K, N·OH·OW), BK × 64 per copy
    Params p;
    float* partial;       // SPLITS > 1: [group][tile][part][split] slots of 128 × BN/2 floats
    unsigned* counters;   // SPLITS > 1: [group][tile][part] splits finished: zero at launch, left zero
};

// Accumulators as raw 32-bit words (split-K partials) and back.
__device__ __forceinline__ unsigned acc_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned acc_bits(int v) { return (unsigned)v; }
__device__ __forceinline__ void acc_add_bits(float& a, unsigned u) { a += __uint_as_float(u); }
__device__ __forceinline__ void acc_add_bits(int& a, unsigned u) { a += (int)u; }

#if SPLITS > 1
// One consumer warpgroup's share of split-K: store this split's partial sums, count the split
// in, and if it was the tile's last, replace acc by the sum of every split's partial in split
// order. Returns whether this warpgroup runs the epilogue. `flag` is a shared word of its own.
__device__ __forceinline__ bool split_reduce(const TmaArgs& a, Acc (&acc)[BN / 2], int slot, int split, int t, int barrier, volatile unsigned* flag) {
    float* base = a.partial + (size_t)slot * SPLITS * (128 * (BN / 2));
    uint4* mine = (uint4*)(base + (size_t)split * (128 * (BN / 2)));
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
        __stcg(mine + j * 128 + t, make_uint4(acc_bits(acc[4 * j]), acc_bits(acc[4 * j + 1]), acc_bits(acc[4 * j + 2]), acc_bits(acc[4 * j + 3])));
    __threadfence();   // the partial is visible GPU-wide before the count says so
    named_barrier(barrier, 128);
    if (t == 0) {
        const unsigned done = atomicAdd(a.counters + slot, 1u);
        __threadfence();
        *flag = done == SPLITS - 1;
        // Every split of this tile has counted in: zero the counter again for the next launch
        // (the host keeps counter blocks between launches instead of zeroing them each time).
        if (done == SPLITS - 1) a.counters[slot] = 0;
    }
    named_barrier(barrier, 128);
    // (The next write of the flag comes after every thread has passed the next call's first
    // barrier, so after this read.)
    if (!*flag) return false;
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[j] = 0;
    for (int s = 0; s < SPLITS; ++s) {
        const uint4* src = (const uint4*)(base + (size_t)s * (128 * (BN / 2)));
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const uint4 v = __ldcg(src + j * 128 + t);
            acc_add_bits(acc[4 * j], v.x);
            acc_add_bits(acc[4 * j + 1], v.y);
            acc_add_bits(acc[4 * j + 2], v.z);
            acc_add_bits(acc[4 * j + 3], v.w);
        }
    }
    return true;
}
#endif

#if TMA_STORE
static_assert(STAGE_STORE && Y_PIXEL_LINEAR && YS_C == 1 && !Y_SEG && (sizeof(TY) == 2 || sizeof(TY) == 4), "bulk stores need dense channels-last y of 16- or 32-bit values");
// One warpgroup's 64 × BN results → staging boxes → bulk stores. `stage` is the warpgroup's
// 1024-byte aligned buffer (plain stores into it, so the compiler may interleave them with
// the epilogue's loads); `issuer` the thread that owns its bulk-store groups.
__device__ __forceinline__ void tma_epilogue(const TmaArgs& a, const float (&acc)[BN / 2], unsigned char* stage, bool issuer, int barrier, int lane, int warp, int m0, int n0, int g, int M) {
    const Params& p = a.p;
    if (issuer) bulk_wait_read<0>();   // the previous tile's stores have left the buffer
    named_barrier(barrier, 128);
    const FragRows f(0, lane, warp, m0, M);   // rows past the batch are clipped by the store
    for_each_pair(p, acc, f, lane, n0, g, [&](int j, int h, const float (&v)[2]) {
        // Boxes of YBK channels × 64 rows; 128-byte rows whose 16-byte chunks are XOR-swizzled
        // by row. 16-bit: channel group j (8 channels) is chunk j % 8 of box j / 8; f32: it is
        // chunks 2·(j % 4) and the next of box j / 4, this thread's pair in one of them.
        const int row = f.rows[h];
        if constexpr (sizeof(TY) == 4) {
            const int chunk = (j & 3) * 2 + ((lane & 3) >> 1);
            *(float2*)(stage + (j >> 2) * 8192 + row * 128 + ((chunk ^ (row & 7)) << 4) + (lane & 1) * 8) = make_float2(v[0], v[1]);
        } else {
            *(unsigned*)(stage + (j >> 3) * 8192 + row * 128 + (((j & 7) ^ (row & 7)) << 4) + (lane & 3) * 4) = pack2(v[0], v[1]);
        }
    });
    fence_proxy_async();   // the writes above are read by the copy engine
    named_barrier(barrier, 128);
    if (issuer) {
#pragma unroll
        for (int b = 0; b < BN / YBK; ++b)
            if (n0 + YBK * b < KG) tma_store_2d(&a.y, smem_addr(stage) + b * 8192, g * KG + n0 + YBK * b, m0);
        bulk_commit();
    }
}
#endif

#if QUANT_INT8 && RAW_I32
static_assert(!STAGE_STORE, "an Int32 y is stored from registers");
// An Int32 y with no epilogue at α = 1, β = 0: the exact sums, stored from registers.
__device__ __forceinline__ void raw_store(const Params& p, const Acc (&acc)[BN / 2], int lane, int warp, int m0, int n0, int g, int M) {
    const FragRows f(0, lane, warp, m0, M);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int kn = n0 + j * 8 + (lane & 3) * 2;
            if (!f.live[h] || kn >= KG) continue;
            s32* y = (s32*)p.y + f.r[h].off + y_chan(g * KG + kn);
            y[0].u = acc[4 * j + 2 * h];
            if (kn + 1 < KG) y[YS_C].u = acc[4 * j + 2 * h + 1];
        }
    }
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_fwd_igemm_tma(const __grid_constant__ TmaArgs args) {
    const Params& p = args.p;
    // Buffers: RINGS × STAGES × [A | B], then the consumers' output staging, then the barriers. The
    // 128-byte swizzle is anchored to 1024-byte aligned tiles: the launch reserves 1 KiB extra.
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_addr(smem_raw);
    unsigned char* base = smem_raw + (((raw + 1023) & ~1023u) - raw);
    const unsigned sbase = smem_addr(base);
    const unsigned bars = sbase + RINGS * STAGES * STAGE_BYTES + OUT_BYTES;
    // After the barriers: one word per consumer warpgroup for split-K's "last split" flag.
    volatile unsigned* split_flags = (volatile unsigned*)(base + RINGS * STAGES * STAGE_BYTES + OUT_BYTES + 16 * RINGS * STAGES);
    // Stage s of ring r: buffer, `full` and `empty` barriers.
    auto buffer = [&](int r, int s) { return sbase + (r * STAGES + s) * STAGE_BYTES; };
    auto full = [&](int r, int s) { return bars + 8 * (r * STAGES + s); };
    auto empty = [&](int r, int s) { return bars + 8 * (RINGS * STAGES + r * STAGES + s); };

    const int tid = threadIdx.x, wg = tid >> 7;
    const int g = blockIdx.z;
    const int M = p.n * OSP;
    // Channel tiles fastest, as in the other kernels; a tile's splits next to each other.
    const int tiles = (M + BM - 1) / BM * N_TILES * SPLITS;
    const int my_tiles = tiles > (int)blockIdx.x ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;

    if (tid == 0) {
        for (int r = 0; r < RINGS; ++r)
            for (int s = 0; s < STAGES; ++s) {
                mbar_init(full(r, s), 1);
                mbar_init(empty(r, s), EMPTY_ARRIVALS);
            }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        if (tid != 0) return;
        tma_prefetch_map(&args.x);
        tma_prefetch_map(&args.w);
        int steps[RINGS] = {};   // pipeline steps of each ring: (tile, k-step) in order
        for (int i = 0; i < my_tiles; ++i) {
            const int t = blockIdx.x + i * gridDim.x, tt = t / SPLITS, split = t % SPLITS;
            const int m0 = tt / N_TILES * BM, n0 = tt % N_TILES * BN;
            const Pixel q = pixel_of(m0);
            const int w0 = q.ow * SW - PW, h0 = q.oh * SH - PH;
            const int r = PINGPONG ? i & 1 : 0;
            for (int kt = split * KSTEPS / SPLITS; kt < (split + 1) * KSTEPS / SPLITS; ++kt) {
                const int it = steps[r]++, s = it % STAGES;
                mbar_wait(empty(r, s), ((it / STAGES) & 1) ^ 1);
                mbar_arrive_expect_tx(full(r, s), STAGE_BYTES);
                const int tap = kt / C_SLICES;
                const unsigned dst = buffer(r, s);
#if A_TILED
                tma_load_2d(dst, &args.x, full(r, s), g * CG + kt * BK, m0);
#elif TMA_3D
                tma_load_im2col_5d(dst, &args.x, full(r, s), g * CG + kt % C_SLICES * BK, w0, h0, q.od * SD - PD, q.n, (unsigned short)(tap % FW * DW),
                                   (unsigned short)(tap / FW % FH * DH), (unsigned short)(tap / (FW * FH) * DD));
#else
                tma_load_im2col_4d(dst, &args.x, full(r, s), g * CG + kt % C_SLICES * BK, w0, h0, q.n, (unsigned short)(tap % FW * DW),
                                   (unsigned short)(tap / FW * DH));
#endif
#if WGMMA_B_MN_MAJOR
                // w is the caller's backward-data filter, rows = its output channels (this
                // convolution's input channels), columns = (tap, channel): tap reversed, BK
                // rows of the k-step's channel slice, 64 channels per box.
#pragma unroll
                for (int j = 0; j < BN / 64; ++j)
                    tma_load_2d(dst + A_BYTES + j * MN_BLOCK_BYTES, &args.w, full(r, s), source_tap(tap) * KG + n0 + 64 * j, g * CG + kt % C_SLICES * BK);
#elif CHANNEL_TAIL
                tma_load_3d(dst + A_BYTES, &args.w, full(r, s), kt % C_SLICES * BK, tap, g * KG + n0);
#else
                tma_load_2d(dst + A_BYTES, &args.w, full(r, s), kt * BK, g * KG + n0);
#endif
#if F32_SPLIT
                tma_load_2d(dst + A_BYTES + B_BYTES, &args.w, full(r, s), FS * CG + kt * BK, g * KG + n0);
#endif
            }
        }
        return;
    }

    const int cw = wg - 1, lane = tid & 31, warp = (tid >> 5) & 3;
    TY* stage = (TY*)(base + RINGS * STAGES * STAGE_BYTES) + cw * 64 * BN;
    // Ping-pong: this warpgroup's ring, the whole A tile of each stage; else ring 0 and rows
    // 64·cw.. of every stage's A tile.
    const int r = PINGPONG ? cw : 0, a_part = PINGPONG ? 0 : cw, row0 = PINGPONG ? 0 : cw * 64;
    Acc acc[BN / 2];
    int it = 0;
    for (int i = 0; i < my_tiles; ++i) {
        if (PINGPONG && (i & 1) != cw) continue;
        const int t = blockIdx.x + i * gridDim.x, tt = t / SPLITS, split = t % SPLITS;
        const int m0 = tt / N_TILES * BM, n0 = tt % N_TILES * BN;
        const int k_begin = split * KSTEPS / SPLITS, k_end = (split + 1) * KSTEPS / SPLITS;
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[j] = 0;
#if F32_SPLIT
        // Each stage's products retire inside mma_tile_split (they read A registers) into a
        // fresh partial, added here with f32 rounding (the other consumer warpgroups keep the
        // tensor cores busy meanwhile).
        for (int kt = k_begin; kt < k_end; ++kt, ++it) {
            float part[BN / 2];
            mbar_wait(full(r, it % STAGES), (it / STAGES) & 1);
            mma_tile_split(part, buffer(r, it % STAGES), a_part, lane, warp);
            if (lane == 0) mbar_arrive(empty(r, it % STAGES));
#pragma unroll
            for (int j = 0; j < BN / 2; ++j) acc[j] += part[j];
        }
#else
        for (int kt = k_begin; kt < k_end; ++kt, ++it) {
            mbar_wait(full(r, it % STAGES), (it / STAGES) & 1);
            mma_tile(acc, buffer(r, it % STAGES), a_part);
            if (kt > k_begin) {
                // The previous step's multiplies have retired: its buffer may be refilled.
                wgmma_wait<1>();
                wgmma_hold(acc);
                if (lane == 0) mbar_arrive(empty(r, (it - 1) % STAGES));
            }
        }
        wgmma_wait<0>();
        wgmma_hold(acc);
        if (lane == 0) mbar_arrive(empty(r, (it - 1) % STAGES));
#endif
#if SPLITS > 1
        const int slot = (g * ((M + BM - 1) / BM * N_TILES) + tt) * PARTS + (PINGPONG ? 0 : cw);
        if (!split_reduce(args, acc, slot, split, tid & 127, 1 + cw, split_flags + cw)) continue;
#endif
#if QUANT_INT8
#if RAW_I32
        if (p.alpha == 1.f && p.beta == 0.f) {
            raw_store(p, acc, lane, warp, m0 + row0, n0, g, M);
            continue;
        }
#endif
        // The epilogue works in f32: v = α·sum + β·y_old, rounded once (quant.rs).
        float sums[BN / 2];
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) sums[j] = (float)acc[j];
#else
        float (&sums)[BN / 2] = acc;
#endif
#if TMA_STORE
        tma_epilogue(args, sums, (unsigned char*)stage, (tid & 127) == 0, 1 + cw, lane, warp, m0 + row0, n0, g, M);
#else
        wg_epilogue<64, 128>(p, sums, stage, 0, lane, warp, tid & 127, m0 + row0, n0, g, M, [cw] { named_barrier(1 + cw, 128); });
#endif
    }
#if TMA_STORE
    if ((tid & 127) == 0) bulk_wait<0>();   // shared memory must outlive the stores reading it
#endif
}
