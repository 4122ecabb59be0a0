// The split reduction of the tensor-core backward-weights kernels (conv_wgrad_tma.cu: 16-bit,
// conv_wgrad_tf32.cu: f32 on TF32 tensor cores). dw is cut into tiles of TILE_K output channels
// × TILE_COLS filter columns (tap, channel); the pixel reduction of a tile is split across
// `splits` blocks, block (tile·splits + s, group) writing its f32 sums to its own slot, and
// conv_wgrad_reduce adds a tile's slots in a fixed order, so every run gives the same bits.
// A slot is row-major over (k, column). The solver defines TILE_K and TILE_COLS.
//
// The 16-bit kernel may run a geometry whose channels per group (CG) are the problem's
// (REAL_CG) rounded up to whole 64-channel boxes, or MERGE neighbouring groups computed as one
// dense group: the reduction then stores only the columns of real channels, and of merged
// groups only the diagonal blocks (output channel k belongs to sub-group k / (KG / MERGE)).
#ifndef MERGE
#define MERGE 1
#endif
#ifndef REAL_CG
#define REAL_CG CG
#endif
static_assert(KG % MERGE == 0 && REAL_CG * MERGE <= CG, "merged groups fill the computed group");

#define COLS (FD * FH * FW * CG)   // filter columns (tap, channel), channels fastest
#define K_TILES ((KG + TILE_K - 1) / TILE_K)
#define COL_TILES ((COLS + TILE_COLS - 1) / TILE_COLS)
#define SLOT_ELEMS (TILE_K * TILE_COLS)

struct __align__(64) WgradArgs {
    TensorMap a;    // the first operand's map (the kernel file says which)
    TensorMap b;    // the second operand's map
    Params p;       // p.x is x, p.w is dw, p.y is dy
    float* partial; // [group][tile][split] slots of SLOT_ELEMS f32 sums
    int splits;
    int reduce_runs; // 128-element runs per reduction chunk (1 or 4)
    int pad[2];
};

// This block's share of the split reduction: its tile and k-steps [kb, ke) of `ksteps`.
struct SplitShare { int tile, kb, ke; };
__device__ __forceinline__ SplitShare split_share(const WgradArgs& a, int ksteps) {
    const int split = blockIdx.x % a.splits;
    return SplitShare{(int)blockIdx.x / a.splits, (int)((long long)ksteps * split / a.splits), (int)((long long)ksteps * (split + 1) / a.splits)};
}

// The slot of block `block` (= tile · splits + split) of group g.
__device__ __forceinline__ float* wgrad_slot(const WgradArgs& a, int g, int block) {
    return a.partial + ((size_t)g * K_TILES * COL_TILES * a.splits + block) * SLOT_ELEMS;
}

// A consumer warpgroup's wgmma accumulators (acc[4j + 2h + e]: row 16·warp + lane/4 + 8h of
// its 64, column 8j + 2·(lane%4) + e; N = 2R columns) into rows 64·cw.. of a slot whose rows
// are N wide.
template <int R> __device__ __forceinline__ void slot_store(float* out, const float (&acc)[R], int cw, int lane, int warp) {
    constexpr int N = 2 * R;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = cw * 64 + warp * 16 + (lane >> 2) + h * 8, col = j * 8 + (lane & 3) * 2;
            __stcg((float2*)(out + row * N + col), make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]));
        }
    }
}

// The same accumulators into a slot whose rows are the wgmma's columns (M = 64·warpgroups
// wide): row r, column c of the tile goes to out[c·M + r]. Each store's 32 lanes cover four
// runs of 8 consecutive floats, whole 32-byte sectors.
template <int M, int R> __device__ __forceinline__ void slot_store_transposed(float* out, const float (&acc)[R], int cw, int lane, int warp) {
#pragma unroll
    for (int j = 0; j < R / 4; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int row = cw * 64 + warp * 16 + (lane >> 2) + h * 8, col = j * 8 + (lane & 3) * 2 + e;
                __stcg(out + col * M + row, acc[4 * j + 2 * h + e]);
            }
}

// dw = α·(sum of a tile's slots) + β·dw, any dw layout and type. A block takes chunks of
// 128·runs consecutive slot elements (runs = 1 or 4, args.reduce_runs); thread (x, y) reads
// 16 bytes of each run at 4x, y being a split lane that sums its contiguous share of the splits
// in order; the lanes' sums are then added in lane order, and the chunk's elements written by
// all threads, along slot rows. The order is fixed by the plan (splits, lanes), so every run
// gives the same bits; many 16-byte loads in flight per thread keep it near bandwidth.
extern "C" __global__ void __launch_bounds__(512) conv_wgrad_reduce(const __grid_constant__ WgradArgs args) {
    __shared__ float4 lane_sums[16 * 32];   // [lane][chunk element], lanes · 128 · runs ≤ 2048 floats
    const Params& p = args.p;
    const int x = threadIdx.x, y = threadIdx.y, lanes = blockDim.y, runs = args.reduce_runs, threads = 32 * lanes;
    const int chunk = 128 * runs, per_slot = SLOT_ELEMS / chunk;
    constexpr int TILES = K_TILES * COL_TILES;
    static_assert(SLOT_ELEMS % 512 == 0, "whole chunks per slot");
    const long long chunks = (long long)p.groups * TILES * per_slot;
    const int s0 = y * args.splits / lanes, s1 = (y + 1) * args.splits / lanes;
    float* sums = (float*)lane_sums;
    for (long long ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
        const int e0 = (int)(ch % per_slot) * chunk;
        const int tile = (int)(ch / per_slot % TILES), g = (int)(ch / ((long long)per_slot * TILES));
        const float* src = wgrad_slot(args, g, tile * args.splits) + e0 + 4 * x;
        float4 acc[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 2
        for (int s = s0; s < s1; ++s)
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (u < runs) {
                    const float4 v = __ldcg((const float4*)(src + (size_t)s * SLOT_ELEMS + 128 * u));
                    acc[u].x += v.x, acc[u].y += v.y, acc[u].z += v.z, acc[u].w += v.w;
                }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (u < runs) lane_sums[y * 32 * runs + u * 32 + x] = acc[u];
        __syncthreads();
        for (int i = y * 32 + x; i < chunk; i += threads) {
            float sum = sums[i];
            for (int l = 1; l < lanes; ++l) sum += sums[l * chunk + i];
            const int e = e0 + i;
            const int k = tile / COL_TILES * TILE_K + e / TILE_COLS, col = tile % COL_TILES * TILE_COLS + e % TILE_COLS;
            if (k >= KG || col >= COLS) continue;
            const int tap = col / CG, c = col % CG - k / (KG / MERGE) * REAL_CG;
            if (c < 0 || c >= REAL_CG) continue;
            const i64 o = (i64)(g * KG + k) * WS_K + (i64)c * WS_C + (i64)(tap / (FW * FH)) * WS_D + (i64)(tap / FW % FH) * WS_H + (i64)(tap % FW) * WS_W;
            float v = p.alpha * sum;
            if (p.beta != 0.f) v += p.beta * ld<T>(p.w, o);
            st<T>((void*)p.w, o, v);
        }
        __syncthreads();
    }
}
