// TF32 wgmma with A from registers. Strict f32 (F32_SPLIT, and the f32 backward-weights
// kernel): A is split into TF32 hi and lo parts as it is read out of the swizzled stage
// (tf32_split.cuh); B's hi and lo parts are two tiles of the stage, split ahead of the
// convolution. Each 8-deep k slice is three products into the same f32 accumulators:
// lo(A)·hi(B), hi(A)·lo(B), hi(A)·hi(B). Reading A through registers also lets a kernel take
// A tiles in either orientation (the backward-weights kernel's are M-major).
//
// Register A fragment of m64nNk8 tf32 (per warp w, lane l): a[v] holds row
// 16w + l/4 + 8·(v & 1), column l%4 + 4·(v >> 1) of the 64 × 8 slice.

__device__ __forceinline__ void wgmma_tf32_rs_n64(float (&d)[32], const unsigned (&a)[4], unsigned long long db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" WG_R32 "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : WG_D32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_tf32_rs_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" WG_R64 "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : WG_D64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

#if MMA_TF32 && (BN == 64 || BN == 128)
#if BN == 64
#define WGMMA_RS wgmma_tf32_rs_n64
#else
#define WGMMA_RS wgmma_tf32_rs_n128
#endif

__device__ __forceinline__ float ld_shared_f32(unsigned addr) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
    return v;
}

// One stage of four 8-deep k slices: this warpgroup's 64 rows of A, read out of shared memory
// at frag(ks, v) (the address of register v of slice ks, in the layout above), times the
// K-major B tile at sb (128-byte rows, 128-byte swizzle) into `part`. SPLIT: A is split in
// registers and B's lo parts are the tile at sb_lo; three products per slice, the first of the
// stage overwriting `part` when `fresh`. Else one product per slice on A's f32 bits (the
// tensor cores read them as TF32). Two halves of two slices each; each half's multiplies
// retire before the next half's loads reuse the A registers they read.
//
// Why a fresh partial per stage when split: the tensor cores' f32 accumulation does not round
// to nearest (its error grows with the number of products a sum runs over, one way), so the
// caller adds each stage's partial into its own sums with ordinary f32 additions; a long
// reduction then keeps the accuracy of f32 on CUDA cores.
template <bool SPLIT, class Frag>
__device__ __forceinline__ void mma_rs_stage(float (&part)[BN / 2], Frag frag, unsigned sb, unsigned sb_lo, bool fresh) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        unsigned hi[2][4], lo[2][4];
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                const float a = ld_shared_f32(frag(2 * half + k, v));
                if constexpr (SPLIT) tf32_split(a, hi[k][v], lo[k][v]);
                else hi[k][v] = __float_as_uint(a);
            }
        wgmma_hold(part);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const unsigned off = (2 * half + k) * 32;
            if constexpr (SPLIT) {
                WGMMA_RS(part, lo[k], wgmma_desc(sb + off), fresh ? half + k : 1);
                WGMMA_RS(part, hi[k], wgmma_desc(sb_lo + off), 1);
            }
            WGMMA_RS(part, hi[k], wgmma_desc(sb + off), 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(part);
    }
}
#endif

#if F32_SPLIT
static_assert(BN <= 128, "split TF32 tiles are at most 128 channels wide");

// The forward stage [BM pixel rows | BN channel rows (hi) | BN channel rows (lo)] of 128-byte
// rows (32 f32, K-major): warpgroup cw's 64 pixel rows of A times all of B, split.
__device__ __forceinline__ void mma_tile_split(float (&part)[BN / 2], unsigned stage_addr, int cw, int lane, int warp) {
    const unsigned sa = stage_addr + cw * (64 * 128);
    const unsigned sb = stage_addr + BM * 128;
    mma_rs_stage<true>(part, [&](int ks, int v) {
        // 16-byte chunk 2·ks + (v >> 1) of the row, XOR-swizzled by row % 8 (= lane / 4).
        const int row = warp * 16 + (lane >> 2) + (v & 1) * 8;
        const int chunk = (2 * ks + (v >> 1)) ^ (lane >> 2);
        return sa + row * 128 + chunk * 16 + (lane & 3) * 4;
    }, sb, sb + BN * 128, true);
}
#endif
