// The split reduction of the tensor-core backward-weights kernels (conv_wgrad_tma.cu: 16-bit,
// conv_wgrad_tf32.cu: f32 on TF32 tensor cores). dw is cut into tiles of TILE_K output channels
// × TILE_COLS filter columns (tap, channel); the pixel reduction of a tile is split across
// `splits` blocks, block (tile·splits + s, group) writing its f32 sums to its own slot, and
// conv_wgrad_reduce adds a tile's slots in split order, so every run gives the same bits.
// A slot is row-major over (k, column), or over (column, k) when SLOT_COL_MAJOR: each kernel
// writes it in the order of its accumulators. The solver defines TILE_K, TILE_COLS and
// SLOT_COL_MAJOR.

#define COLS (FH * FW * CG)   // filter columns (tap, channel), channels fastest
#define K_TILES ((KG + TILE_K - 1) / TILE_K)
#define COL_TILES ((COLS + TILE_COLS - 1) / TILE_COLS)
#define SLOT_ELEMS (TILE_K * TILE_COLS)

struct __align__(64) WgradArgs {
    TensorMap a;    // the first operand's map (the kernel file says which)
    TensorMap b;    // the second operand's map
    Params p;       // p.x is x, p.w is dw, p.y is dy
    float* partial; // [group][tile][split] slots of SLOT_ELEMS f32 sums
    int splits, pad[3];
};

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

// dw = α·(sum of a tile's slots, in split order) + β·dw, columns fastest (the order of a KRSC
// filter's memory), any dw layout and type.
extern "C" __global__ void __launch_bounds__(256) conv_wgrad_reduce(const __grid_constant__ WgradArgs args) {
    const Params& p = args.p;
    const long long total = (long long)p.groups * KG * COLS;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const int col = (int)(i % COLS), k = (int)(i / COLS % KG), g = (int)(i / ((long long)COLS * KG));
        const int tile = k / TILE_K * COL_TILES + col / TILE_COLS;
        const int at = SLOT_COL_MAJOR ? col % TILE_COLS * TILE_K + k % TILE_K : k % TILE_K * TILE_COLS + col % TILE_COLS;
        const float* src = wgrad_slot(args, g, tile * args.splits) + at;
        float sum = 0.f;
        for (int s = 0; s < args.splits; ++s) sum += __ldcg(src + (size_t)s * SLOT_ELEMS);
        const int tap = col / CG, c = col % CG;
        const i64 o = (i64)(g * KG + k) * WS_K + (i64)c * WS_C + (i64)(tap / FW) * WS_H + (i64)(tap % FW) * WS_W;
        float v = p.alpha * sum;
        if (p.beta != 0.f) v += p.beta * ld<T>(p.w, o);
        st<T>((void*)p.w, o, v);
    }
}
