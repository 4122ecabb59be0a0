// Backward-weights of convolutions with few input channels per group (depthwise, ResNeXt-like
// groups, 3-channel stems), 2-D: dw[k][c][r][s] = Σ over n, oh, ow of dy[n][k][oh][ow] ·
// x[n][g·CG + c][oh·SH − PH + r·DH][ow·SW − PW + s·DW], g = k / KG.
//
// wgrad_few_partial: a block's 32 lanes take 32 consecutive output channels k (coalesced
// channels-last loads; lanes of one group share x's address), blockIdx.y a filter row r, and
// its 8 warps walk work items — TW consecutive output columns of one (n, oh) row — spread over
// the SPLITS blocks along z. Per item a thread loads its TW dy values and the XW x columns the
// window spans once per input channel, then does CG · FW · TW products from registers. Each
// warp writes its CG × FW sums per k to its own slot of the partials [slot][c][r][s][k].
// wgrad_few_sum adds the slots in slot order (reruns are bit-identical) and writes
// dw = α·Σ + β·dw (dw never read when β = 0) in dw's own strides.
//
// Defines: the geometry of conv_geometry_defines, NB (batch), KTOT (all output channels), TW,
// XW = (TW − 1)·SW + (FW − 1)·DW + 1, SPLITS.
typedef CONFLUX_T T;

#define WARPS 8
#define COL_ITEMS ((OW + TW - 1) / TW)
#define ITEMS (NB * OH * COL_ITEMS)
#define SLOTS (SPLITS * WARPS)
#define DW_SIZE ((i64)KTOT * CG * FH * FW)
static_assert(FD == 1 && OD == 1 && ID == 1, "2-D convolution");

extern "C" __global__ void __launch_bounds__(256) wgrad_few_partial(const Params p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = blockIdx.x * 32 + lane, r = blockIdx.y;
    const bool live = k < KTOT;
    const int xc = k / KG * CG;   // the group's first input channel
    float acc[CG][FW];
#pragma unroll
    for (int c = 0; c < CG; ++c)
#pragma unroll
        for (int s = 0; s < FW; ++s) acc[c][s] = 0.f;

    for (int item = blockIdx.z * WARPS + warp; item < ITEMS; item += SLOTS) {
        const int cb = item % COL_ITEMS, row = item / COL_ITEMS;
        const int oh = row % OH, n = row / OH;
        const int ih = oh * SH - PH + r * DH;
        if (!live || ih < 0 || ih >= IH) continue;
        const int ow0 = cb * TW, iw0 = ow0 * SW - PW;
        float dy[TW];
#pragma unroll
        for (int j = 0; j < TW; ++j)
            dy[j] = ow0 + j < OW ? ld<T>(p.y, n * (i64)YS_N + k * (i64)YS_C + oh * (i64)YS_H + (ow0 + j) * (i64)YS_W) : 0.f;
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
                for (int j = 0; j < TW; ++j) acc[c][s] = fmaf(dy[j], xv[j * SW + s * DW], acc[c][s]);
        }
    }
    if (!live) return;
    float* part = (float*)p.aux[0];
    const i64 slot = blockIdx.z * WARPS + warp;
#pragma unroll
    for (int c = 0; c < CG; ++c)
#pragma unroll
        for (int s = 0; s < FW; ++s) part[slot * DW_SIZE + (((i64)c * FH + r) * FW + s) * KTOT + k] = acc[c][s];
}

extern "C" __global__ void wgrad_few_sum(const Params p) {
    const float* part = (const float*)p.aux[0];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < DW_SIZE; i += (i64)gridDim.x * blockDim.x) {
        const int k = (int)(i % KTOT);
        i64 t = i / KTOT;
        const int s = (int)(t % FW);
        t /= FW;
        const int r = (int)(t % FH), c = (int)(t / FH);
        float sum = 0.f;
        for (int slot = 0; slot < SLOTS; ++slot) sum += part[slot * DW_SIZE + i];
        const i64 at = k * (i64)WS_K + c * (i64)WS_C + r * (i64)WS_H + s * (i64)WS_W;
        float v = p.alpha * sum;
        if (p.beta != 0.f) v += p.beta * ld<T>(p.w, at);
        st<T>((void*)p.w, at, v);
    }
}
