// Hopper warpgroup MMA (sm_90a): D[64×N] += A[64×16] · B[16×N]ᵀ with A and B read from
// shared memory through descriptors, f32 accumulators in registers. One wrapper per N the
// wgmma kernel uses; the operand lists are long because every accumulator is a register.
// Accumulator layout (per warp w of the warpgroup, lane l): d[4j + 2h + e] is row
// 16w + l/4 + 8h, column 8j + 2(l%4) + e — the mma.sync m16n8 layout repeated along N.

// Shared-memory matrix descriptor of a K-major tile with 128-byte rows in Hopper's 128-byte
// swizzle (the tile base 1024-byte aligned): start address, stride between 8-row groups
// (1024 bytes), swizzle mode 1. The leading offset is unused for this layout.
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned smem_byte_addr) {
    return (unsigned long long)((smem_byte_addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}
// The same for 64-byte rows in the 64-byte swizzle (half-row k-steps: 64 8-bit or 32 16-bit
// channels): 8-row groups 512 bytes apart, swizzle mode 2.
__device__ __forceinline__ unsigned long long wgmma_desc64(unsigned smem_byte_addr) {
    return (unsigned long long)((smem_byte_addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(512 >> 4) << 32) | (2ull << 62);
}

// Descriptor of an MN-major tile (each row of 128 bytes holds 64 consecutive M or N elements
// of one k; rows XOR-swizzled as above): 8-row groups along k 1024 bytes apart, blocks of 64
// M/N elements `block_bytes` apart. Used with the transposed operand flags (WGMMA_MN_MAJOR).
__device__ __forceinline__ unsigned long long wgmma_desc_mn(unsigned smem_byte_addr, unsigned block_bytes) {
    return (unsigned long long)((smem_byte_addr & 0x3FFFF) >> 4) | ((unsigned long long)(block_bytes >> 4) << 16) | ((unsigned long long)(1024 >> 4) << 32) |
           (1ull << 62);
}

// Operand majorness and types of every wgmma below: K-major A and B, or both MN-major
// (transposed). Each instruction multiplies 32 bytes of a 128-byte row: k16 for 16-bit data,
// k8 for TF32 (MMA_AB "tf32", f32 data), k32 for 8-bit data — so descriptors and the k-step
// walk are the same for every type. TF32 and 8-bit types are K-major only, which the
// instruction states by having no transpose operands; int8 (MMA_I8) accumulates in s32
// registers and has no operand scales either. fp8 A and B may differ (MMA_B: e4m3 / e5m2).
// WGMMA_B_MN_MAJOR: K-major A, MN-major B (backward-data reading the caller's filter).
#ifndef MMA_B
#define MMA_B MMA_AB
#endif
#if defined(MMA_I8) && MMA_I8
#define WGMMA_K "k32"
#define WGMMA_D "s32"
#define WGMMA_TAIL ""
#elif defined(MMA_F8) && MMA_F8
#define WGMMA_K "k32"
#define WGMMA_D "f32"
#define WGMMA_TAIL ", 1, 1"
#elif defined(MMA_TF32) && MMA_TF32
#define WGMMA_K "k8"
#define WGMMA_D "f32"
#define WGMMA_TAIL ", 1, 1"
#elif defined(WGMMA_MN_MAJOR) && WGMMA_MN_MAJOR
#define WGMMA_K "k16"
#define WGMMA_D "f32"
#define WGMMA_TAIL ", 1, 1, 1, 1"
#elif defined(WGMMA_B_MN_MAJOR) && WGMMA_B_MN_MAJOR
#define WGMMA_K "k16"
#define WGMMA_D "f32"
#define WGMMA_TAIL ", 1, 1, 0, 1"
#else
#define WGMMA_K "k16"
#define WGMMA_D "f32"
#define WGMMA_TAIL ", 1, 1, 0, 0"
#endif
// Accumulator element: i32 for int8 products, f32 otherwise.
#if defined(MMA_I8) && MMA_I8
typedef int Acc;
#define ACC_REG(v) "+r"(v)
#else
typedef float Acc;
#define ACC_REG(v) "+f"(v)
#endif

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Generic-proxy writes to shared memory (cp.async) made visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving accumulator reads or writes across wgmma issue and wait.
template <int R> __device__ __forceinline__ void wgmma_hold(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R> __device__ __forceinline__ void wgmma_hold(int (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Operand lists of the wrappers below: the accumulator registers d[0..R) as in-out operands
// (WG_D<R>: f32 accumulators; WG_ACC<R>: the kernel's Acc type) and their names %0..%R-1 in
// the instruction (WG_R<R>).
#define WG_D8(o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), "+f"(d[o + 7])
#define WG_D32 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
#define WG_D64 WG_D32, WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
#define WG_ACC8(o) ACC_REG(d[o]), ACC_REG(d[o + 1]), ACC_REG(d[o + 2]), ACC_REG(d[o + 3]), ACC_REG(d[o + 4]), ACC_REG(d[o + 5]), ACC_REG(d[o + 6]), \
    ACC_REG(d[o + 7])
#define WG_ACC32 WG_ACC8(0), WG_ACC8(8), WG_ACC8(16), WG_ACC8(24)
#define WG_ACC64 WG_ACC32, WG_ACC8(32), WG_ACC8(40), WG_ACC8(48), WG_ACC8(56)
#define WG_ACC128 WG_ACC64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88), WG_ACC8(96), WG_ACC8(104), WG_ACC8(112), WG_ACC8(120)
#define WG_R32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_R64 WG_R32 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_R128 WG_R64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

__device__ __forceinline__ void wgmma_n64(Acc (&d)[32], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64" WGMMA_K "." WGMMA_D "." MMA_AB "." MMA_B " {" WG_R32 "}, %32, %33, p" WGMMA_TAIL ";\n}\n"
        : WG_ACC32
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_n128(Acc (&d)[64], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128" WGMMA_K "." WGMMA_D "." MMA_AB "." MMA_B " {" WG_R64 "}, %64, %65, p" WGMMA_TAIL ";\n}\n"
        : WG_ACC64
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_n256(Acc (&d)[128], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256" WGMMA_K "." WGMMA_D "." MMA_AB "." MMA_B " {" WG_R128 "}, %128, %129, p" WGMMA_TAIL ";\n}\n"
        : WG_ACC128
        : "l"(da), "l"(db), "r"(1));
}

#if BN == 64
#define WGMMA wgmma_n64
#elif BN == 128
#define WGMMA wgmma_n128
#else
#define WGMMA wgmma_n256
#endif

// The 32-byte k slices (k16; k8 for TF32, k32 for 8-bit types) of one stage laid out as [BM
// pixel rows | BN channel rows] of BK elements — 128 bytes (four slices), or 64 bytes (two) for
// 8- or 16-bit data in half-row k-steps: A rows of warpgroup cw, all BN rows of B.
// WGMMA_B_MN_MAJOR: B is BN/64 blocks of BK k-rows × 64 channels instead (BK · 128 bytes
// apart), a k16 slice being 16 of those rows.
__device__ __forceinline__ void mma_tile(Acc (&acc)[BN / 2], unsigned stage_addr, int cw) {
    constexpr int ROW = BK * (int)sizeof(T);
    static_assert(ROW == 128 || (ROW == 64 && sizeof(T) <= 2), "one 128-byte row (64 for 8- and 16-bit data) per pixel or channel");
    const unsigned sa = stage_addr + cw * (64 * ROW);
    const unsigned sb = stage_addr + BM * ROW;
    wgmma_hold(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < ROW / 32; ++ks) {
#if defined(WGMMA_B_MN_MAJOR) && WGMMA_B_MN_MAJOR
        const unsigned long long da = ROW == 64 ? wgmma_desc64(sa + ks * 32) : wgmma_desc(sa + ks * 32);
        WGMMA(acc, da, wgmma_desc_mn(sb + ks * 2048, BK * 128));
#else
        if constexpr (ROW == 64) {
            WGMMA(acc, wgmma_desc64(sa + ks * 32), wgmma_desc64(sb + ks * 32));
        } else {
            WGMMA(acc, wgmma_desc(sa + ks * 32), wgmma_desc(sb + ks * 32));
        }
#endif
    }
    wgmma_commit();
    wgmma_hold(acc);
}
