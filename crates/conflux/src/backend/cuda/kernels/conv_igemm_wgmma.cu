// Implicit-GEMM forward convolution with Hopper warpgroup MMA (wgmma, sm_90a), f32
// accumulation, for 16-bit channels-last tensors, with the fused epilogue. The GEMM view,
// the loader and the epilogue are in igemm_tile.cuh; the wgmma wrappers in wgmma.cuh (both
// prepended by the solver).
//
// Block tile BM × BN with BK = 64: one warpgroup (128 threads) per 64 pixel rows multiplies
// its 64 × BN slice straight out of shared memory, whose 128-byte swizzled rows are what the
// wgmma descriptors expect. Every thread also copies (cp.async). (A separate producer
// warpgroup feeding the others through mbarriers measured 1.2-1.9x slower on the ResNet
// layers, 2026-11-21: cp.async from 128 threads cannot keep up; that needs TMA.)
//
// Persistent: the grid holds as many blocks as fit on the GPU at once, and block b takes
// output tiles b, b + gridDim.x, ... Its (tile, k-tile) steps form one pipeline of STAGES
// shared buffers with one __syncthreads per step: while step s is multiplied, step s - 1 may
// still be in the tensor cores and steps s + 1 .. s + STAGES - 2 — possibly of the next tile
// — are in flight, so the next tile's loads overlap this tile's epilogue.
// Epilogue: α/β and the generated chain in registers; with STAGE_STORE (channels-last y,
// 16-byte aligned rows, and a tile that fits one pipeline buffer) the results go through the
// buffer just multiplied so every thread stores whole 16-byte row chunks; else two channels
// per store.

#define WGS (BM / 64)
#define ACC (BN / 2)
#define STAGE_BYTES (STAGE_ELEMS * 2)

static_assert(BK == 64, "wgmma tiles use 128-byte rows");
static_assert(BM % 64 == 0 && THREADS == WGS * 128 && LOADER_THREADS == THREADS, "one warpgroup per 64 rows");
static_assert(BN == 64 || BN == 128 || BN == 256, "BN");
static_assert(STAGES >= 3, "STAGES");
static_assert(!STAGE_STORE || BM * BN <= STAGE_ELEMS, "staged output fits in one pipeline buffer");

#if BN == 64
#define WGMMA wgmma_n64
#elif BN == 128
#define WGMMA wgmma_n128
#else
#define WGMMA wgmma_n256
#endif

// The four k16 steps of one 64-deep tile: A rows of warpgroup cw, all BN rows of B.
__device__ __forceinline__ void mma_tile(float (&acc)[ACC], unsigned stage_addr, int cw) {
    const unsigned sa = stage_addr + cw * (64 * BK * 2);
    const unsigned sb = stage_addr + A_ELEMS * 2;
    wgmma_hold(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) WGMMA(acc, wgmma_desc(sa + ks * 32), wgmma_desc(sb + ks * 32));
    wgmma_commit();
    wgmma_hold(acc);
}

// Staged output: row-major BM × BN with the 16-byte chunks of a row XOR-swizzled by row, so
// the fragment writes (8 rows × 4 words per warp) and the row-chunk reads miss each other's
// banks.
__device__ __forceinline__ int out_swz(int row, int chunk) { return row * BN + ((chunk ^ (row & 7)) << 3); }

// Warpgroup cw's accumulators → y. acc[4j + 2h + e] is row 16·(warp % 4) + lane/4 + 8h of
// the warpgroup's 64, channel 8j + 2·(lane % 4) + e. `stage` is a pipeline buffer no copy
// targets until two more steps have passed a __syncthreads.
__device__ __forceinline__ void epilogue(const Params& p, const float (&acc)[ACC], T* stage, int cw, int tid, int m0, int n0, int g, int M) {
    const int lane = tid & 31, warp = (tid >> 5) & 3;
#if STAGE_STORE
    __syncthreads();   // every warpgroup is done multiplying out of `stage`
#endif
    // Channel-outer so each channel's epilogue parameters are loaded once for both rows.
    int rows[2];
    bool live[2];
    OutRow r[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        rows[h] = cw * 64 + warp * 16 + (lane >> 2) + h * 8;
        live[h] = m0 + rows[h] < M;
        r[h] = out_row(live[h] ? m0 + rows[h] : 0);
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = j * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!live[h]) continue;
#if STAGE_STORE
            float v[2];
            epilogue_pair(p, r[h], g, n0 + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], v);
            *(unsigned*)(stage + out_swz(rows[h], j) + (lane & 3) * 2) = pack2(v[0], v[1]);
#else
            store_pair(p, r[h], g, n0 + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
#endif
        }
    }
#if STAGE_STORE
    __syncthreads();
    // Whole 16-byte chunks of output rows, consecutive threads along a row.
    for (int i = tid; i < BM * (BN / 8); i += THREADS) {
        const int row = i / (BN / 8), ch = i % (BN / 8);
        const int m = m0 + row, kn = n0 + ch * 8;
        if (m >= M || kn >= KG) continue;
        const i64 o = y_row_offset(m) + g * KG + kn;
        const T* src = stage + out_swz(row, ch);
        if (kn + 8 <= KG) {
            *(uint4*)((T*)p.y + o) = *(const uint4*)src;
        } else {
            for (int e = 0; e < KG - kn; ++e) ((T*)p.y)[o + e] = src[e];
        }
    }
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_fwd_igemm_wgmma(const Params p) {
    // wgmma's 128-byte swizzle is anchored to 1024-byte aligned tiles; the launch reserves
    // 1 KiB extra so the base can be rounded up.
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_addr(smem_raw);
    unsigned char* base = smem_raw + (((raw + 1023) & ~1023u) - raw);
    const unsigned sbase = smem_addr(base);
    T* smem = (T*)base;

    const int tid = threadIdx.x, wg = tid >> 7;
    const int g = blockIdx.z;
    const int M = p.n * OSP;
    const T* x = (const T*)p.x;
    const T* w = (const T*)p.w;
    const int KT = (KRED + BK - 1) / BK;
    // Channel tiles vary fastest: blocks working at the same time share pixel tiles, which
    // then come from L2 rather than from memory once per channel tile.
    const int tiles = (M + BM - 1) / BM * N_TILES;
    const int my_tiles = tiles > (int)blockIdx.x ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const int steps = my_tiles * KT;   // pipeline steps: (tile, k-tile) pairs in order
    auto tile_m0 = [&](int i) { return ((blockIdx.x + i * gridDim.x) / N_TILES) * BM; };
    auto tile_n0 = [&](int i) { return ((blockIdx.x + i * gridDim.x) % N_TILES) * BN; };

    // Copies run ahead of the multiplies through the steps of all this block's tiles; the
    // loader is remade whenever they enter a new tile.
    int ahead = 0;
    TileLoader loader(tid, tile_m0(0), tile_n0(0), g, M);
    auto copy_next = [&]() {
        if (ahead < steps) {
            const int kt = ahead % KT;
            if (kt == 0 && ahead > 0) loader = TileLoader(tid, tile_m0(ahead / KT), tile_n0(ahead / KT), g, M);
            T* st = smem + (ahead % STAGES) * STAGE_ELEMS;
            loader.load(st, st + A_ELEMS, x, w, kt * BK);
            ++ahead;
        }
        cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) copy_next();

    float acc[ACC];
    int s = 0;   // pipeline step: (tile, k-tile) in order
    for (int i = 0; i < my_tiles; ++i) {
#pragma unroll
        for (int j = 0; j < ACC; ++j) acc[j] = 0.f;
        for (int kt = 0; kt < KT; ++kt, ++s) {
            cp_async_wait<STAGES - 3>();
            fence_proxy_async();
            // Step s is in shared memory for everyone; every warpgroup has retired its
            // multiplies of step s - 2 (wgmma_wait below) and finished any epilogue reading
            // that buffer, so it may be refilled.
            __syncthreads();
            mma_tile(acc, sbase + (s % STAGES) * STAGE_BYTES, wg);
            copy_next();
            if (kt < KT - 1) {
                wgmma_wait<1>();
                wgmma_hold(acc);
            }
        }
        wgmma_wait<0>();
        wgmma_hold(acc);
        epilogue(p, acc, smem + ((s - 1) % STAGES) * STAGE_ELEMS, wg, tid, tile_m0(i), tile_n0(i), g, M);
    }
    cp_async_wait<0>();
}
