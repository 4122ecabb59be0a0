// Forward convolution with few output channels (KTOT ≤ 8) and any number of input channels,
// ungrouped, on CUDA cores: the backward-data phases of few-channel stems (dx has 3 channels,
// dy 64) and image-producing output layers. A tensor-core tile would run with 3 of its 64
// columns live; here each output needs C·filter products for only KTOT channels, so the whole
// filter (as f32, KTOT padded to KP) sits in shared memory and every loaded input value is
// multiplied by KP weights of one 16-byte shared load.
//
// Work: a tile is TW consecutive output columns of one output row; LC lanes share a tile and
// split its input channels in chunks of VEC (chunk ch = lane, lane + LC, ...), then sum their
// partials with a fixed butterfly (reruns are bit-identical). Blocks stride over the tiles so
// the filter is staged once per block.
//
// Defines: the geometry of conv_geometry_defines (OD.., ID.., FD.., SD.., PD.., DD.., CG (= C),
// KG (= KTOT), XS_*, WS_*, YS_*), KTOT, KP (KTOT rounded up to 4), VEC (channels per chunk),
// NCH (chunks: C / VEC rounded up), LC (lanes per tile, a power of two ≤ NCH), TW (columns
// per tile), XVEC (1: x chunks read as 16-byte vectors; only in the `_vec` kernel (VECTOR_KERNEL 1), whose
// launch checks the alignment).
typedef CONFLUX_T T;

constexpr int TPB = 256 / LC;                               // tiles per block and pass
constexpr int OWT = (OW + TW - 1) / TW;                     // column tiles per row
constexpr int SPAN = (TW - 1) * SW + (FW - 1) * DW + 1;     // input columns one tile reads
constexpr int TAPS = FD * FH * FW;
constexpr int KQ = KP / 4;                                  // float4 words per (tap, channel)

union Vec16 {
    uint4 r;
    T e[VEC];
};

// Shared filter word of (tap, channel ch·VEC + v): chunks of one v lie side by side, so the LC
// lanes of a tile (consecutive ch) read consecutive 16-byte words.
__device__ __forceinline__ int filter_word(int tap, int v, int ch) { return ((tap * VEC + v) * NCH + ch) * KQ; }

__device__ __forceinline__ void stage_filter(const Params& p, float4* sw) {
    float* s = (float*)sw;
    for (int i = threadIdx.x; i < TAPS * VEC * NCH * KP; i += blockDim.x) {
        const int k = i % KP;
        int r = i / KP;
        const int ch = r % NCH; r /= NCH;
        const int v = r % VEC;
        const int tap = r / VEC;
        const int c = ch * VEC + v;
        const int rw = tap % FW, rh = tap / FW % FH, rd = tap / (FW * FH);
        s[i] = (k < KTOT && c < CG) ? ldp<T>(p.w, (i64)k * WS_K + c * WS_C + rd * WS_D + rh * WS_H + rw * WS_W) : 0.f;
    }
}

template <bool VMEM> __device__ __forceinline__ void load_chunk(const Params& p, i64 xrow, int iw, int ch, float (&xv)[VEC]) {
    if (iw < 0 || iw >= IW) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) xv[v] = 0.f;
    } else if constexpr (VMEM && XVEC) {
        Vec16 u;
        u.r = *(const uint4*)((const T*)p.x + xrow + (i64)iw * XS_W + ch * VEC);
#pragma unroll
        for (int v = 0; v < VEC; ++v) xv[v] = to_f(u.e[v]);
    } else {
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
            const int c = ch * VEC + v;
            xv[v] = c < CG ? ld<T>(p.x, xrow + (i64)iw * XS_W + (i64)c * XS_C) : 0.f;
        }
    }
}

template <bool VMEM> __device__ __forceinline__ void few_outputs(const Params& p) {
    extern __shared__ float4 sw[];
    stage_filter(p, sw);
    __syncthreads();

    const int lane = threadIdx.x % LC;
    const i64 tiles = (i64)p.n * OD * OH * OWT;
    // Every thread of the block takes the same number of passes, so the shuffles below see
    // whole warps; a thread past the last tile computes zeros and stores nothing.
    for (i64 base = (i64)blockIdx.x * TPB; base < tiles; base += (i64)gridDim.x * TPB) {
        const i64 tile = base + threadIdx.x / LC;
        i64 t = tile;
        const int owt = t % OWT; t /= OWT;
        const int oh = t % OH; t /= OH;
        const int od = t % OD;
        const int n = (int)(t / OD);
        const int ow0 = owt * TW;

        float acc[TW][KP];
#pragma unroll
        for (int i = 0; i < TW; ++i)
#pragma unroll
            for (int k = 0; k < KP; ++k) acc[i][k] = 0.f;

        if (tile < tiles) {
            for (int rd = 0; rd < FD; ++rd) {
                const int id = od * SD - PD + rd * DD;
                if (id < 0 || id >= ID) continue;
#pragma unroll 1
                for (int rh = 0; rh < FH; ++rh) {
                    const int ih = oh * SH - PH + rh * DH;
                    if (ih < 0 || ih >= IH) continue;
                    const i64 xrow = (i64)n * XS_N + (i64)id * XS_D + (i64)ih * XS_H;
                    const int tap0 = (rd * FH + rh) * FW;
#pragma unroll 1
                    for (int ch = lane; ch < NCH; ch += LC) {
                        float xs[SPAN][VEC];
#pragma unroll
                        for (int j = 0; j < SPAN; ++j) load_chunk<VMEM>(p, xrow, ow0 * SW - PW + j, ch, xs[j]);
#pragma unroll
                        for (int rw = 0; rw < FW; ++rw)
#pragma unroll
                            for (int v = 0; v < VEC; ++v) {
                                const float4* wq = sw + filter_word(tap0 + rw, v, ch);
#pragma unroll
                                for (int q = 0; q < KQ; ++q) {
                                    const float4 w4 = wq[q];
#pragma unroll
                                    for (int i = 0; i < TW; ++i) {
                                        const float xv = xs[i * SW + rw * DW][v];
                                        acc[i][4 * q + 0] = fmaf(xv, w4.x, acc[i][4 * q + 0]);
                                        acc[i][4 * q + 1] = fmaf(xv, w4.y, acc[i][4 * q + 1]);
                                        acc[i][4 * q + 2] = fmaf(xv, w4.z, acc[i][4 * q + 2]);
                                        acc[i][4 * q + 3] = fmaf(xv, w4.w, acc[i][4 * q + 3]);
                                    }
                                }
                            }
                    }
                }
            }
        }

#pragma unroll
        for (int off = LC / 2; off > 0; off /= 2)
#pragma unroll
            for (int i = 0; i < TW; ++i)
#pragma unroll
                for (int k = 0; k < KTOT; ++k) acc[i][k] += __shfl_xor_sync(0xffffffffu, acc[i][k], off);

        if (tile >= tiles || lane != 0) continue;
        constexpr int SP = OD * OH * OW;
#pragma unroll
        for (int i = 0; i < TW; ++i) {
            const int ow = ow0 + i;
            if (ow >= OW) break;
            const i64 at = (i64)n * YS_N + (i64)od * YS_D + (i64)oh * YS_H + (i64)ow * YS_W;
            const int sp = (od * OH + oh) * OW + ow;
#pragma unroll
            for (int k = 0; k < KTOT; ++k) {
                float val = p.alpha * acc[i][k];
                if (p.beta != 0.f) val += p.beta * ld<T>(p.y, at + (i64)k * YS_C);   // never read y when beta = 0
                st<T>(p.y, at + (i64)k * YS_C, conflux_epilogue(val, p.epi, n, k, od, oh, ow, sp, SP));
            }
        }
    }
}

// Each entry is its own module (VECTOR_KERNEL), so a layout compiles only the one it runs.
#if VECTOR_KERNEL
// x 16-byte aligned (checked at launch): chunks read as vectors where XVEC.
extern "C" __global__ void __launch_bounds__(256) conv_few_outputs_vec(const Params p) { few_outputs<true>(p); }
#else
// Any alignment: element loads.
extern "C" __global__ void __launch_bounds__(256) conv_few_outputs(const Params p) { few_outputs<false>(p); }
#endif
