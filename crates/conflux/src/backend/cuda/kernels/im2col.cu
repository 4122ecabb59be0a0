// im2col of x for backward-weights as one GEMM (solver/cuda/wgrad_im2col_lt.rs). Row p of col
// is output pixel p of the batch (n, oh, ow); its column j = (r·FW + s)·CG + c holds
// x[n][c][oh·SH − PH + r·DH][ow·SW − PW + s·DW], or 0 where that lies in the padding. Rows are
// LD elements, COLS of them real and the rest zeros (each row starts on 16 bytes). One thread
// writes 16 bytes of a row; elements are moved as bits (ELEM_BYTES each), so any type works.
// The solver defines the geometry (conv_geometry_defines: O*, I*, F*, S*, P*, D*, CG, XS_*),
// COLS, LD and ELEM_BYTES.

#if ELEM_BYTES == 2
typedef unsigned short E;
#else
typedef unsigned int E;
#endif
#define VEC (16 / ELEM_BYTES)

static_assert(LD % VEC == 0 && LD >= COLS, "whole 16-byte chunks per row");

struct Im2colArgs {
    const E* x;
    E* col;
    long long pixels;
};

// One thread per 16-byte chunk, in a grid-stride loop. The index arithmetic runs in I: 32-bit
// unsigned where the chunk count allows: its divisions by the constant sizes become multiplies,
// where 64-bit ones are emulated in long instruction sequences per chunk.
template <typename I>
__device__ __forceinline__ void im2col_chunks(const E* __restrict__ x, E* __restrict__ col, I total) {
    constexpr int CHUNKS = LD / VEC;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const I p = i / CHUNKS;
        const int j0 = (int)(i % CHUNKS) * VEC;
        const int ow = (int)(p % OW), oh = (int)(p / OW % OH);
        const I n = p / ((I)OW * OH);
        const E* xn = x + (long long)n * XS_N;
        union { uint4 v; E e[VEC]; } out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            const int j = j0 + e, c = j % CG, tap = j / CG;
            const int h = oh * SH - PH + tap / FW * DH, w = ow * SW - PW + tap % FW * DW;
            const bool inside = j < COLS && h >= 0 && h < IH && w >= 0 && w < IW;
            out.e[e] = inside ? xn[(long long)c * XS_C + (long long)h * XS_H + (long long)w * XS_W] : (E)0;
        }
        *(uint4*)(col + (long long)p * LD + j0) = out.v;
    }
}

extern "C" __global__ void im2col_rows(const Im2colArgs a) {
    const long long total = a.pixels * (LD / VEC);
    if (total < 0x7fffffffLL - 0x10000000LL) {
        im2col_chunks<unsigned>(a.x, a.col, (unsigned)total);
    } else {
        im2col_chunks<unsigned long long>(a.x, a.col, (unsigned long long)total);
    }
}

// dw = α·Σ over splits of partial[split] + β·dw. partial[split] holds KG rows of LD f32 sums
// (columns (tap, channel) as in col), one per share of the pixels. A block of 32 × SUM_LANES
// threads takes 32 consecutive outputs: lane y adds splits [y·S/L, (y+1)·S/L) in order, then
// the lanes' sums are added in lane order, so reruns give the same bits. dw has any layout
// (WS_* strides) and type CONFLUX_T.
typedef CONFLUX_T T;
#define SUM_LANES 8

struct SplitSumArgs {
    const float* partial;
    void* dw;
    int splits;
    float alpha, beta;
};

extern "C" __global__ void __launch_bounds__(32 * SUM_LANES) im2col_dw_sum(const SplitSumArgs a) {
    __shared__ float lane_sums[SUM_LANES][32];
    const int x = threadIdx.x, y = threadIdx.y;
    const int s0 = y * a.splits / SUM_LANES, s1 = (y + 1) * a.splits / SUM_LANES;
    for (int base = blockIdx.x * 32; base < KG * COLS; base += gridDim.x * 32) {
        const int i = base + x, k = i / COLS, j = i % COLS;
        float sum = 0.f;
        if (i < KG * COLS)
            for (int s = s0; s < s1; ++s) sum += a.partial[((long long)s * KG + k) * LD + j];
        lane_sums[y][x] = sum;
        __syncthreads();
        if (y == 0 && i < KG * COLS) {
            for (int l = 1; l < SUM_LANES; ++l) sum += lane_sums[l][x];
            const int c = j % CG, tap = j / CG;
            const i64 o = (i64)k * WS_K + (i64)c * WS_C + (i64)(tap / FW) * WS_H + (i64)(tap % FW) * WS_W;
            float v = a.alpha * sum;
            if (a.beta != 0.f) v += a.beta * ld<T>(a.dw, o);
            st<T>(a.dw, o, v);
        }
        __syncthreads();
    }
}
