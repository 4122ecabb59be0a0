// Strict f32 on TF32 tensor cores (F32_SPLIT): A from registers, split into TF32 hi and lo
// parts as it is read out of the swizzled stage (tf32_split.cuh); B's hi and lo parts are two
// tiles of the stage, split ahead by tf32_split.cu. Each 8-deep k slice is three products
// into the same f32 accumulators: lo(A)·hi(B), hi(A)·lo(B), hi(A)·hi(B).
//
// Register A fragment of m64nNk8 tf32 (per warp w, lane l): a[v] holds row
// 16w + l/4 + 8·(v & 1), column l%4 + 4·(v >> 1) of the 64 × 8 slice.

__device__ __forceinline__ void wgmma_tf32_rs_n64(float (&d)[32], const unsigned (&a)[4], unsigned long long db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_tf32_rs_n128(float (&d)[64], const unsigned (&a)[4], unsigned long long db, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

#if F32_SPLIT
#if BN == 64
#define WGMMA_RS wgmma_tf32_rs_n64
#elif BN == 128
#define WGMMA_RS wgmma_tf32_rs_n128
#endif
static_assert(BN <= 128, "split TF32 tiles are at most 128 channels wide");

__device__ __forceinline__ float ld_shared_f32(unsigned addr) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
    return v;
}

// One stage [BM pixel rows | BN channel rows (hi) | BN channel rows (lo)] of 128-byte rows
// (32 f32): warpgroup cw's 64 rows of A times all of B, into `part`, which the first product
// overwrites. Two halves of two k slices each; each half's multiplies retire before the next
// half's loads reuse the A registers they read.
//
// Why a fresh partial per stage: the tensor cores' f32 accumulation does not round to nearest
// (its error grows with the number of products a sum runs over, one way), so the caller adds
// each stage's partial into its own sums with ordinary f32 additions; a long reduction then
// keeps the accuracy of f32 on CUDA cores.
__device__ __forceinline__ void mma_tile_split(float (&part)[BN / 2], unsigned stage_addr, int cw, int lane, int warp) {
    const unsigned sa = stage_addr + cw * (64 * 128);
    const unsigned sb = stage_addr + BM * 128, sb_lo = sb + BN * 128;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        unsigned hi[2][4], lo[2][4];
#pragma unroll
        for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                // 16-byte chunk 2·ks + (v >> 1) of the row, XOR-swizzled by row % 8 (= lane / 4).
                const int row = warp * 16 + (lane >> 2) + (v & 1) * 8;
                const int chunk = (2 * (2 * half + k) + (v >> 1)) ^ (lane >> 2);
                tf32_split(ld_shared_f32(sa + row * 128 + chunk * 16 + (lane & 3) * 4), hi[k][v], lo[k][v]);
            }
        wgmma_hold(part);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const unsigned off = (2 * half + k) * 32;
            WGMMA_RS(part, lo[k], wgmma_desc(sb + off), half + k);
            WGMMA_RS(part, hi[k], wgmma_desc(sb_lo + off), 1);
            WGMMA_RS(part, hi[k], wgmma_desc(sb + off), 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(part);
    }
}
#endif
