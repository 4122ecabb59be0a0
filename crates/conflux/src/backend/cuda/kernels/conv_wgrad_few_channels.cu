// Backward-weights of convolutions with few input channels per group (depthwise, ResNeXt-like
// groups, 3-channel stems), 2-D: dw[k][c][r][s] = Σ over n, oh, ow of dy[n][k][oh][ow] ·
// x[n][g·CG + c][oh·SH − PH + r·DH][ow·SW − PW + s·DW], g = k / KG.
//
// wgrad_few_partial: a block's 32 lanes take 32 consecutive output channels k (coalesced
// channels-last loads; lanes of one group share x's address), blockIdx.y RT consecutive filter
// rows (all FH where the thread's CG · FH · FW sums fit in registers: dy is then read once),
// and its 8 warps walk work items — TW consecutive output columns of one (n, oh) row — spread
// over the SPLITS blocks along z. Per item a thread loads its TW dy values once and, per filter
// row, the XW x columns the window spans once per input channel, then does CG · FW · TW
// products from registers. The block adds its warps' sums in warp order and writes them per k
// to its own slot of the partials [slot][c][r][s][k].
// wgrad_few_sum: one block per (c, r, s) and 32 output channels; its 8 warps add interleaved
// slots, then warp 0 adds the 8 warps' sums, always in the same order (reruns are
// bit-identical), and writes dw = α·Σ + β·dw (dw never read when β = 0) in dw's own strides.
//
// Defines: the geometry of conv_geometry_defines, NB (batch), KTOT (all output channels), TW,
// XW = (TW − 1)·SW + (FW − 1)·DW + 1, RT (filter rows per thread: 1 or FH), SPLITS.
typedef CONFLUX_T T;

#define WARPS 8
#define COL_ITEMS ((OW + TW - 1) / TW)
#define ITEMS (NB * OH * COL_ITEMS)
#define SLOTS SPLITS
#define DW_SIZE ((i64)KTOT * CG * FH * FW)
static_assert(FD == 1 && OD == 1 && ID == 1, "2-D convolution");

extern "C" __global__ void __launch_bounds__(256) wgrad_few_partial(const Params p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = blockIdx.x * 32 + lane, r0 = blockIdx.y * RT;
    const bool live = k < KTOT;
    const int xc = k / KG * CG;   // the group's first input channel
    float acc[CG][RT][FW];
#pragma unroll
    for (int c = 0; c < CG; ++c)
#pragma unroll
        for (int rr = 0; rr < RT; ++rr)
#pragma unroll
            for (int s = 0; s < FW; ++s) acc[c][rr][s] = 0.f;

    for (int item = blockIdx.z * WARPS + warp; item < ITEMS; item += SPLITS * WARPS) {
        const int cb = item % COL_ITEMS, row = item / COL_ITEMS;
        const int oh = row % OH, n = row / OH;
        if (!live) continue;
        if (RT == 1) {
            const int ih = oh * SH - PH + r0 * DH;
            if (ih < 0 || ih >= IH) continue;
        }
        const int ow0 = cb * TW, iw0 = ow0 * SW - PW;
        float dy[TW];
#pragma unroll
        for (int j = 0; j < TW; ++j)
            dy[j] = ow0 + j < OW ? ld<T>(p.y, n * (i64)YS_N + k * (i64)YS_C + oh * (i64)YS_H + (ow0 + j) * (i64)YS_W) : 0.f;
#pragma unroll
        for (int rr = 0; rr < RT; ++rr) {
            const int ih = oh * SH - PH + (r0 + rr) * DH;
            if (ih < 0 || ih >= IH) continue;
#pragma unroll
            for (int c = 0; c < CG; ++c) {
                const i64 base = n * (i64)XS_N + (xc + c) * (i64)XS_C + ih * (i64)XS_H;
                float xv[XW];
#pragma unroll
                for (int q = 0; q < XW; ++q) {
                    const int iw = iw0 + q;
                    xv[q] = iw >= 0 && iw < IW ? ld<T>(p.x, base + iw * (i64)XS_W) : 0.f;
                }
#pragma unroll
                for (int s = 0; s < FW; ++s)
#pragma unroll
                    for (int j = 0; j < TW; ++j) acc[c][rr][s] = fmaf(dy[j], xv[j * SW + s * DW], acc[c][rr][s]);
            }
        }
    }
    // The block's 8 warps add their sums in warp order (dead lanes hold zeros) into the block's
    // slot: one slot per block keeps the second pass short.
    __shared__ float red[WARPS][32];
    float* part = (float*)p.aux[0];
    const i64 slot = blockIdx.z;
#pragma unroll
    for (int c = 0; c < CG; ++c)
#pragma unroll
        for (int rr = 0; rr < RT; ++rr)
#pragma unroll
            for (int s = 0; s < FW; ++s) {
                red[warp][lane] = acc[c][rr][s];
                __syncthreads();
                if (warp == 0 && live) {
                    float t = 0.f;
#pragma unroll
                    for (int w = 0; w < WARPS; ++w) t += red[w][lane];
                    part[slot * DW_SIZE + (((i64)c * FH + r0 + rr) * FW + s) * KTOT + k] = t;
                }
                __syncthreads();
            }
}

// Grid: (CG · FH · FW, ⌈KTOT / 32⌉), 256 threads.
extern "C" __global__ void __launch_bounds__(256) wgrad_few_sum(const Params p) {
    __shared__ float red[WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = blockIdx.y * 32 + lane;
    const i64 row = blockIdx.x;   // (c, r, s)
    const float* part = (const float*)p.aux[0];
    float sum = 0.f;
    if (k < KTOT)
        for (int slot = warp; slot < SLOTS; slot += WARPS) sum += part[slot * DW_SIZE + row * KTOT + k];
    red[warp][lane] = sum;
    __syncthreads();
    if (warp != 0 || k >= KTOT) return;
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) total += red[w][lane];
    const int s = (int)(row % FW), r = (int)(row / FW % FH), c = (int)(row / FW / FH);
    const i64 at = k * (i64)WS_K + c * (i64)WS_C + r * (i64)WS_H + s * (i64)WS_W;
    float v = p.alpha * total;
    if (p.beta != 0.f) v += p.beta * ld<T>(p.w, at);
    st<T>((void*)p.w, at, v);
}
