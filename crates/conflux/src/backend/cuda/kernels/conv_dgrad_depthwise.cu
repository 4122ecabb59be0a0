// Backward-data of depthwise convolutions (one input and one output channel per group), any
// stride, dilation and padding, in one launch on CUDA cores: dx = α·conv_bwd_data(dy, w) + β·dx
// then the epilogue. Each thread computes TW consecutive dx columns of VEC consecutive channels.
// The tile's first column is a multiple of the column stride, so which filter column meets
// which dy column is known at compile time: the thread walks the dy columns its tile reads,
// loads each once, and multiplies it only into the dx columns it reaches. The phases of a
// strided layer (dx columns of each residue mod the stride) are interleaved inside every tile
// instead of being launched one after another.
//
// Defines: the geometry of conv_geometry_defines (the forward problem's: O* = dy, I* = dx),
// CTOT (channels), VEC (channels per thread), TW (dx columns per thread, a multiple of SW),
// CH_INNER (1: threads walk channels fastest, for channel-innermost dx; 0: columns fastest),
// XVEC / YVEC (1: dx / dy moved as 16-byte vectors of VEC elements; only in the `_vec` kernel
// (VECTOR_KERNEL 1), whose launch checks the alignment), MINB (blocks per SM the registers are capped for).
typedef CONFLUX_T T;

constexpr int KCH = CTOT / VEC;                 // channel chunks
constexpr int IWT = (IW + TW - 1) / TW;         // dx column tiles
static_assert(TW % SW == 0, "a tile starts on a multiple of the column stride");

// Floor division for the compile-time column arithmetic (numerators may be negative).
__host__ __device__ constexpr int fdiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// dx column i of a tile and filter column rw meet dy column (tile0 / SW + Q / SW) when
// Q = i + PW - rw·DW is a multiple of SW. The dy columns a tile reads, relative to tile0 / SW:
constexpr int JLO = fdiv(PW - (FW - 1) * DW, SW);
constexpr int JHI = fdiv(TW - 1 + PW, SW);
constexpr int DSPAN = JHI - JLO + 1;

template <bool VMEM> __device__ __forceinline__ void dgrad_depthwise(const Params& p) {
    const i64 item = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    i64 t = item;
    int kc, iwt;
    if (CH_INNER) {
        kc = t % KCH; t /= KCH;
        iwt = t % IWT; t /= IWT;
    } else {
        iwt = t % IWT; t /= IWT;
        kc = t % KCH; t /= KCH;
    }
    const int ih = t % IH; t /= IH;
    const int id = t % ID;
    const int n = (int)(t / ID);
    if (n >= p.n) return;
    const int c0 = kc * VEC, iw0 = iwt * TW, ow0 = iw0 / SW;

    float acc[TW][VEC];
#pragma unroll
    for (int i = 0; i < TW; ++i)
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[i][v] = 0.f;

    for (int rd = 0; rd < FD; ++rd) {
        const int td = id + PD - rd * DD;
        if (td < 0 || td % SD != 0 || td / SD >= OD) continue;
        const int od = td / SD;
#pragma unroll 1
        for (int rh = 0; rh < FH; ++rh) {
            const int th = ih + PH - rh * DH;
            if (th < 0 || th % SH != 0 || th / SH >= OH) continue;
            const int oh = th / SH;
            float wr[FW][VEC];
#pragma unroll
            for (int rw = 0; rw < FW; ++rw)
#pragma unroll
                for (int v = 0; v < VEC; ++v) wr[rw][v] = ldp<T>(p.w, (i64)(c0 + v) * WS_K + rd * WS_D + rh * WS_H + rw * WS_W);
            const i64 yrow = (i64)n * YS_N + (i64)od * YS_D + (i64)oh * YS_H;
#pragma unroll
            for (int j = 0; j < DSPAN; ++j) {
                const int ow = ow0 + JLO + j;
                float yv[VEC];
                if (ow < 0 || ow >= OW) continue;
                if constexpr (VMEM && YVEC) {
                    load_vec(p.y, yrow + (i64)ow * YS_W + c0, yv);
                } else {
#pragma unroll
                    for (int v = 0; v < VEC; ++v) yv[v] = ldp<T>(p.y, yrow + (i64)ow * YS_W + (i64)(c0 + v) * YS_C);
                }
                // dy column JLO + j reaches dx column i through filter column
                // rw = (i + PW − SW·(JLO + j)) / DW where that divides and lies in the filter.
#pragma unroll
                for (int i = 0; i < TW; ++i) {
                    const int q = i + PW - SW * (JLO + j);
                    if (q >= 0 && q % DW == 0 && q / DW < FW) {
#pragma unroll
                        for (int v = 0; v < VEC; ++v) acc[i][v] = fmaf(yv[v], wr[q / DW][v], acc[i][v]);
                    }
                }
            }
        }
    }

    constexpr int SP = ID * IH * IW;
    void* dx = (void*)p.x;
#pragma unroll
    for (int i = 0; i < TW; ++i) {
        const int iw = iw0 + i;
        if (iw >= IW) break;
        const i64 base = (i64)n * XS_N + (i64)id * XS_D + (i64)ih * XS_H + (i64)iw * XS_W;
        const int sp = (id * IH + ih) * IW + iw;
        float out[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
            const int c = c0 + v;
            const i64 o = base + (i64)c * XS_C;
            float val = p.alpha * acc[i][v];
            if (p.beta != 0.f) val += p.beta * ld<T>(dx, o);   // never read dx when beta = 0
            out[v] = conflux_epilogue(val, p.epi, n, c, id, ih, iw, sp, SP);
        }
        if constexpr (VMEM && XVEC) {
            store_vec(dx, base + c0, out);
        } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) st<T>(dx, base + (i64)(c0 + v) * XS_C, out[v]);
        }
    }
}

// Each entry is its own module (VECTOR_KERNEL), so a layout compiles only the one it runs.
#if VECTOR_KERNEL
// dx and dy 16-byte aligned (checked at launch): vector loads and stores where XVEC / YVEC.
extern "C" __global__ void __launch_bounds__(256, MINB) conv_dgrad_depthwise_vec(const Params p) { dgrad_depthwise<true>(p); }
#else
// Any alignment: element loads and stores.
extern "C" __global__ void __launch_bounds__(256, MINB) conv_dgrad_depthwise(const Params p) { dgrad_depthwise<false>(p); }
#endif
