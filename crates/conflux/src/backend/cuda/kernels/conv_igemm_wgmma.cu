// Implicit-GEMM forward convolution with Hopper warpgroup MMA (wgmma, sm_90a), f32
// accumulation, for 16-bit channels-last tensors, with the fused epilogue. The GEMM view,
// the loader in igemm_tile.cuh, the wgmma wrappers in wgmma.cuh, the epilogue in
// wgmma_epilogue.cuh (all prepended by the solver).
//
// Block tile BM × BN with BK = 64: one warpgroup (128 threads) per 64 pixel rows multiplies
// its 64 × BN slice straight out of shared memory, whose 128-byte swizzled rows are what the
// wgmma descriptors expect. Every thread also copies (cp.async). (A separate producer
// warpgroup feeding the others through mbarriers measured slower on the ResNet layers:
// cp.async from 128 threads cannot keep up; that needs TMA. See
// bench/results/2026-11-21-h200-cba-wgmma.md.)
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
        // The staged output goes through the buffer just multiplied: no copy targets it until
        // two more steps have passed a __syncthreads.
        wg_epilogue<BM, THREADS>(p, acc, smem + ((s - 1) % STAGES) * STAGE_ELEMS, wg * 64, tid & 31, (tid >> 5) & 3, tid,
                                 tile_m0(i), tile_n0(i), g, M, [] { __syncthreads(); });
    }
    cp_async_wait<0>();
}
