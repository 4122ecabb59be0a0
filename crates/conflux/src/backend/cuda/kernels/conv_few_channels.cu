// Forward convolution for groups with few input channels (depthwise: one channel per group;
// ResNeXt-like groups of a few channels) on CUDA cores. A GEMM would reduce over only
// CG·FD·FH·FW products per output, so these layers are bound by memory traffic, not
// multiplies: each thread computes TW consecutive output columns of VEC consecutive output
// channels, keeps a filter row in registers and slides over the input row, so every loaded
// input value feeds every output it touches. The geometry is compile-time (preamble defines);
// the batch size is a run-time argument.
//
// Defines: the geometry of conv_geometry_defines (OD.., ID.., FD.., SD.., PD.., DD.., CG, KG,
// XS_*, WS_*, YS_*), KTOT (output channels), VEC (output channels per thread), TW (output
// columns per thread), CH_INNER (1: threads walk channels fastest, for channel-innermost y;
// 0: columns fastest, for planar y), GSHARE (1: groups of KG = CG channels lie inside a
// thread's VEC channels, whose inputs are then loaded once for every c), XVEC / YVEC (1: x / y
// read and written as 16-byte vectors of VEC elements at channel k0; only in the `_vec`
// kernel (VECTOR_KERNEL 1), whose launch checks the alignment), MINB (blocks per SM the registers are capped for).
typedef CONFLUX_T T;

constexpr int KCH = KTOT / VEC;                 // channel chunks
constexpr int OWT = (OW + TW - 1) / TW;         // column tiles
constexpr int SPAN = (TW - 1) * SW + (FW - 1) * DW + 1;   // input columns one tile reads

// The filter row (k0.., c, rd, rh, 0..FW) of a thread's VEC output channels.
__device__ __forceinline__ void load_filter_row(const Params& p, int k0, int c, int rd, int rh, float (&wr)[FW][VEC]) {
#pragma unroll
    for (int r = 0; r < FW; ++r)
#pragma unroll
        for (int v = 0; v < VEC; ++v)
            wr[r][v] = ldp<T>(p.w, (i64)(k0 + v) * WS_K + c * WS_C + rd * WS_D + rh * WS_H + r * WS_W);
}

template <bool VMEM> __device__ __forceinline__ void few_channels(const Params& p) {
    const i64 item = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    i64 t = item;
    int kc, owt;
    if (CH_INNER) {
        kc = t % KCH; t /= KCH;
        owt = t % OWT; t /= OWT;
    } else {
        owt = t % OWT; t /= OWT;
        kc = t % KCH; t /= KCH;
    }
    const int oh = t % OH; t /= OH;
    const int od = t % OD;
    const int n = (int)(t / OD);
    if (n >= p.n) return;
    const int k0 = kc * VEC, ow0 = owt * TW;

    float acc[TW][VEC];
#pragma unroll
    for (int i = 0; i < TW; ++i)
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[i][v] = 0.f;

    for (int rd = 0; rd < FD; ++rd) {
        const int id = od * SD - PD + rd * DD;
        if (id < 0 || id >= ID) continue;
#pragma unroll 1
        for (int rh = 0; rh < FH; ++rh) {
            const int ih = oh * SH - PH + rh * DH;
            if (ih < 0 || ih >= IH) continue;
            const i64 xrow = (i64)n * XS_N + (i64)id * XS_D + (i64)ih * XS_H;
            if constexpr (GSHARE) {
                // Groups of KG = CG channels inside the thread's VEC channels: their inputs are
                // the same VEC channels (k0..), loaded once per column for every c.
                float xs[SPAN][VEC];
#pragma unroll
                for (int j = 0; j < SPAN; ++j) {
                    const int iw = ow0 * SW - PW + j;
                    if (iw < 0 || iw >= IW) {
#pragma unroll
                        for (int v = 0; v < VEC; ++v) xs[j][v] = 0.f;
                    } else if constexpr (VMEM && XVEC) {
                        load_vec(p.x, xrow + (i64)iw * XS_W + k0, xs[j]);
                    } else {
#pragma unroll
                        for (int v = 0; v < VEC; ++v) xs[j][v] = ldp<T>(p.x, xrow + (i64)iw * XS_W + (i64)(k0 + v) * XS_C);
                    }
                }
#pragma unroll
                for (int c = 0; c < CG; ++c) {
                    float wr[FW][VEC];
                    load_filter_row(p, k0, c, rd, rh, wr);
#pragma unroll
                    for (int j = 0; j < SPAN; ++j)
#pragma unroll
                        for (int i = 0; i < TW; ++i) {
                            const int q = j - i * SW;
                            if (q >= 0 && q % DW == 0 && q / DW < FW) {
#pragma unroll
                                for (int v = 0; v < VEC; ++v) acc[i][v] = fmaf(xs[j][(v / KG) * KG + c], wr[q / DW][v], acc[i][v]);
                            }
                        }
                }
                continue;
            }
#pragma unroll
            for (int c = 0; c < CG; ++c) {
                float wr[FW][VEC];
                load_filter_row(p, k0, c, rd, rh, wr);
#pragma unroll
                for (int j = 0; j < SPAN; ++j) {
                    const int iw = ow0 * SW - PW + j;
                    float xv[VEC];
                    if (iw < 0 || iw >= IW) {
#pragma unroll
                        for (int v = 0; v < VEC; ++v) xv[v] = 0.f;
                    } else if constexpr (VMEM && XVEC) {
                        load_vec(p.x, xrow + (i64)iw * XS_W + k0, xv);
                    } else {
#pragma unroll
                        for (int v = 0; v < VEC; ++v)
                            xv[v] = ldp<T>(p.x, xrow + (i64)iw * XS_W + (i64)(((k0 + v) / KG) * CG + c) * XS_C);
                    }
                    // Input column j meets output column i at filter tap (j - i·SW) / DW.
#pragma unroll
                    for (int i = 0; i < TW; ++i) {
                        const int q = j - i * SW;
                        if (q >= 0 && q % DW == 0 && q / DW < FW) {
#pragma unroll
                            for (int v = 0; v < VEC; ++v) acc[i][v] = fmaf(xv[v], wr[q / DW][v], acc[i][v]);
                        }
                    }
                }
            }
        }
    }

    constexpr int SP = OD * OH * OW;
#pragma unroll
    for (int i = 0; i < TW; ++i) {
        const int ow = ow0 + i;
        if (ow >= OW) break;
        const i64 base = (i64)n * YS_N + (i64)od * YS_D + (i64)oh * YS_H + (i64)ow * YS_W;
        const int sp = (od * OH + oh) * OW + ow;
        float out[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
            const int k = k0 + v;
            const i64 o = base + (i64)k * YS_C;
            float val = p.alpha * acc[i][v];
            if (p.beta != 0.f) val += p.beta * ld<T>(p.y, o);   // never read y when beta = 0
            out[v] = conflux_epilogue(val, p.epi, n, k, od, oh, ow, sp, SP);
        }
        if constexpr (VMEM && YVEC) {
            store_vec(p.y, base + k0, out);
        } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) st<T>(p.y, base + (i64)(k0 + v) * YS_C, out[v]);
        }
    }
}

// Each entry is its own module (VECTOR_KERNEL), so a layout compiles only the one it runs.
#if VECTOR_KERNEL
// x and y 16-byte aligned (checked at launch): vector loads and stores where XVEC / YVEC.
extern "C" __global__ void __launch_bounds__(256, MINB) conv_few_channels_vec(const Params p) { few_channels<true>(p); }
#else
// Any alignment: element loads and stores.
extern "C" __global__ void __launch_bounds__(256, MINB) conv_few_channels(const Params p) { few_channels<false>(p); }
#endif
