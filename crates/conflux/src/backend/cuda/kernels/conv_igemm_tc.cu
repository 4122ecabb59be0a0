// Implicit-GEMM forward convolution on tensor cores (mma.sync m16n8k16, f32 accumulation)
// for 16-bit channels-last tensors, with the fused epilogue applied in registers. The GEMM
// view and the loader are in igemm_tile.cuh, the store in igemm_common.cuh, the MMA and
// ldmatrix wrappers in mma_sync.cuh (all prepended by the solver).
// Tiles: BM × BN outputs per block, BK = 32 or 64 deep, STAGES-deep cp.async pipeline in
// shared memory, warps of WM × WN outputs reading their fragments with ldmatrix.

#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define MT (WM / 16)
#define NT (WN / 8)

static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "tile shape");
static_assert(THREADS == WARPS_M * WARPS_N * 32, "threads per block");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_fwd_igemm_tc(const Params p) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* smem = (T*)smem_raw;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
    const int g = blockIdx.z;
    const int M = p.n * OSP;
    // Channel tiles vary fastest: blocks that share a pixel tile run together and read it
    // from L2 rather than from memory once per channel tile.
    const int m0 = (blockIdx.x / N_TILES) * BM, n0 = (blockIdx.x % N_TILES) * BN;
    const T* x = (const T*)p.x;
    const T* w = (const T*)p.w;
    const TileLoader loader(tid, m0, n0, g, M);

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
        if (s < KT) loader.load(smem + s * STAGE_ELEMS, smem + s * STAGE_ELEMS + A_ELEMS, x, w, s * BK);
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();   // tile kt is visible to all; every warp is done with tile kt - 1
        const int next = kt + STAGES - 1;
        if (next < KT) {
            T* s = smem + (next % STAGES) * STAGE_ELEMS;
            loader.load(s, s + A_ELEMS, x, w, next * BK);
        }
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

    // Accumulator of each m16n8 tile: rows lane/4 [+8], columns 2·(lane%4) + {0, 1}.
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_m * WM + mi * 16 + (lane >> 2) + h * 8;
            if (m >= M) continue;
            const OutRow r = out_row(m);
#pragma unroll
            for (int nj = 0; nj < NT; ++nj) {
                const int kn = n0 + warp_n * WN + nj * 8 + (lane & 3) * 2;
                store_pair(p, r, g, kn, acc[mi][nj][h * 2], acc[mi][nj][h * 2 + 1]);
            }
        }
    }
}
