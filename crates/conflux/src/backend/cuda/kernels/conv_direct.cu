// Direct convolution kernels on CUDA cores: correct for every geometry (2-D as D = 1, any
// strides, padding, dilation, groups). One thread per output element, f32 accumulation,
// the generated epilogue applied before the store. Speed comes from conv_igemm.cu.
typedef CONFLUX_T T;

__device__ __forceinline__ float blend(const Params& p, void* out, i64 o, float acc) {
    float v = p.alpha * acc;
    if (p.beta != 0.f) v += p.beta * ld<T>(out, o);   // never read the output when beta = 0
    return v;
}

extern "C" __global__ void conv_fwd_direct(const Params p) {
    const int OD = p.out[0], OH = p.out[1], OW = p.out[2];
    const i64 total = (i64)p.n * p.k * OD * OH * OW;
    const int kg = p.k / p.groups, cg = p.c / p.groups;
    const int sp_size = OD * OH * OW;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 t = i;
        const int ow = t % OW; t /= OW;
        const int oh = t % OH; t /= OH;
        const int od = t % OD; t /= OD;
        const int k = t % p.k;
        const int n = (int)(t / p.k);
        const int c0 = (k / kg) * cg;
        float acc = 0.f;
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
                        acc += ld<T>(p.x, off5(p.xs, n, c0 + c, id, ih, iw)) * ld<T>(p.w, off5(p.ws, k, c, rd, rh, rw));
                    }
                }
            }
        }
        const i64 o = off5(p.ys, n, k, od, oh, ow);
        const int sp = (od * OH + oh) * OW + ow;
        st<T>(p.y, o, conflux_epilogue(blend(p, p.y, o, acc), p.epi, n, k, od, oh, ow, sp, sp_size));
    }
}

// dx = epilogue(alpha * conv_bwd_data(dy, w) + beta * dx). Here x is dx (written), y is dy.
extern "C" __global__ void conv_bwd_data_direct(const Params p) {
    const int ID = p.in[0], IH = p.in[1], IW = p.in[2];
    const i64 total = (i64)p.n * p.c * ID * IH * IW;
    const int kg = p.k / p.groups, cg = p.c / p.groups;
    const int sp_size = ID * IH * IW;
    void* dx = (void*)p.x;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 t = i;
        const int iw = t % IW; t /= IW;
        const int ih = t % IH; t /= IH;
        const int id = t % ID; t /= ID;
        const int c = t % p.c;
        const int n = (int)(t / p.c);
        const int g = c / cg, cl = c % cg;
        float acc = 0.f;
        for (int kl = 0; kl < kg; ++kl) {
            const int k = g * kg + kl;
            for (int rd = 0; rd < p.fil[0]; ++rd) {
                const int td = id + p.pad[0] - rd * p.dil[0];
                if (td < 0 || td % p.str[0]) continue;
                const int od = td / p.str[0];
                if (od >= p.out[0]) continue;
                for (int rh = 0; rh < p.fil[1]; ++rh) {
                    const int th = ih + p.pad[1] - rh * p.dil[1];
                    if (th < 0 || th % p.str[1]) continue;
                    const int oh = th / p.str[1];
                    if (oh >= p.out[1]) continue;
                    for (int rw = 0; rw < p.fil[2]; ++rw) {
                        const int tw = iw + p.pad[2] - rw * p.dil[2];
                        if (tw < 0 || tw % p.str[2]) continue;
                        const int ow = tw / p.str[2];
                        if (ow >= p.out[2]) continue;
                        acc += ld<T>(p.y, off5(p.ys, n, k, od, oh, ow)) * ld<T>(p.w, off5(p.ws, k, cl, rd, rh, rw));
                    }
                }
            }
        }
        const i64 o = off5(p.xs, n, c, id, ih, iw);
        const int sp = (id * IH + ih) * IW + iw;
        st<T>(dx, o, conflux_epilogue(blend(p, dx, o, acc), p.epi, n, c, id, ih, iw, sp, sp_size));
    }
}

// dw = alpha * conv_bwd_weights(x, dy) + beta * dw. One block per filter element; the block
// reduces over N and the output positions in a fixed order (deterministic).
extern "C" __global__ void conv_bwd_weights_direct(const Params p) {
    __shared__ float red[256];
    const int kg = p.k / p.groups, cg = p.c / p.groups;
    const int FD = p.fil[0], FH = p.fil[1], FW = p.fil[2];
    const i64 total_w = (i64)p.k * cg * FD * FH * FW;
    const int OD = p.out[0], OH = p.out[1], OW = p.out[2];
    const i64 red_len = (i64)p.n * OD * OH * OW;
    void* dw = (void*)p.w;
    for (i64 wi = blockIdx.x; wi < total_w; wi += gridDim.x) {
        i64 t = wi;
        const int rw = t % FW; t /= FW;
        const int rh = t % FH; t /= FH;
        const int rd = t % FD; t /= FD;
        const int c = t % cg;
        const int k = (int)(t / cg);
        const int cin = (k / kg) * cg + c;
        float acc = 0.f;
        for (i64 j = threadIdx.x; j < red_len; j += blockDim.x) {
            i64 u = j;
            const int ow = u % OW; u /= OW;
            const int oh = u % OH; u /= OH;
            const int od = u % OD;
            const int n = (int)(u / OD);
            const int id = od * p.str[0] - p.pad[0] + rd * p.dil[0];
            const int ih = oh * p.str[1] - p.pad[1] + rh * p.dil[1];
            const int iw = ow * p.str[2] - p.pad[2] + rw * p.dil[2];
            if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1] || iw < 0 || iw >= p.in[2]) continue;
            acc += ld<T>(p.x, off5(p.xs, n, cin, id, ih, iw)) * ld<T>(p.y, off5(p.ys, n, k, od, oh, ow));
        }
        red[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            const i64 o = off5(p.ws, k, c, rd, rh, rw);
            st<T>(dw, o, blend(p, dw, o, red[0]));
        }
        __syncthreads();
    }
}
