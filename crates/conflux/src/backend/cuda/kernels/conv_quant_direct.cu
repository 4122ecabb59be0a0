// Quantized forward convolution on CUDA cores (src/quant.rs): int8 x and w summed exactly in
// i32, or fp8 x and w decoded exactly and summed in f32; every geometry (2-D as D = 1), any
// strides, groups, padding and dilation. One thread per output element. v = α·sum + β·y_old
// in f32, then the generated epilogue, then y's conversion (st_q). An Int32 y with no
// epilogue (RAW_I32) gets the exact sum when α = 1 and β = 0. The tensor-core kernel
// (conv_igemm_tma.cu) is the fast path; this one serves every other shape and its
// misaligned pointers.
typedef CONFLUX_T TX;
typedef CONFLUX_TW TW;
typedef CONFLUX_TY TY;

extern "C" __global__ void conv_fwd_quant_direct(const Params p) {
    const int OD = p.out[0], OH = p.out[1], OW = p.out[2];
    const i64 total = (i64)p.n * p.k * OD * OH * OW;
    const int kg = p.k / p.groups, cg = p.c / p.groups;
    const int sp_size = OD * OH * OW;
    const TX* x = (const TX*)p.x;
    const TW* w = (const TW*)p.w;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 t = i;
        const int ow = t % OW; t /= OW;
        const int oh = t % OH; t /= OH;
        const int od = t % OD; t /= OD;
        const int k = t % p.k;
        const int n = (int)(t / p.k);
        const int c0 = (k / kg) * cg;
#if QUANT_INT8
        int acc = 0;
#else
        float acc = 0.f;
#endif
        for (int c = 0; c < cg; ++c) {
            for (int rd = 0; rd < p.fil[0]; ++rd) {
                const int id = od * p.str[0] - p.pad[0] + rd * p.dil[0];
                if (id < 0 || id >= p.in[0]) continue;
                for (int rh = 0; rh < p.fil[1]; ++rh) {
                    const int ih = oh * p.str[1] - p.pad[1] + rh * p.dil[1];
                    if (ih < 0 || ih >= p.in[1]) continue;
                    for (int rw = 0; rw < p.fil[2]; ++rw) {
                        const int iw = ow * p.str[2] - p.pad[2] + rw * p.dil[2];
                        if (iw < 0 || iw >= p.in[2]) continue;
                        const TX xv = x[off5(p.xs, n, c0 + c, id, ih, iw)];
                        const TW wv = w[off5(p.ws, k, c, rd, rh, rw)];
#if QUANT_INT8
                        acc += (int)xv.u * (int)wv.u;
#else
                        acc = fmaf(to_f(xv), to_f(wv), acc);
#endif
                    }
                }
            }
        }
        const i64 o = off5(p.ys, n, k, od, oh, ow);
#if RAW_I32
        if (p.alpha == 1.f && p.beta == 0.f) {
            ((s32*)p.y)[o].u = acc;
            continue;
        }
#endif
        float v = p.alpha * (float)acc;
        if (p.beta != 0.f) v += p.beta * to_f(((const TY*)p.y)[o]);   // never read y when β = 0
        const int sp = (od * OH + oh) * OW + ow;
        v = conflux_epilogue(v, p.epi, n, k, od, oh, ow, sp, sp_size);
        st_q<TY>(p.y, o, v, (unsigned long long)i);   // i is the element's logical index
    }
}
