// A tensor copied into packed channels-last order with each group's channel count padded
// (zeros in the added channels): dst[o][d][h][w][g·CP + c'] = c' < C ? src(o, g·C + c', d, h, w)
// : 0, for any source strides. Lets the tensor-core kernels, which read whole 16-byte channel
// chunks (or 128-byte boxes per group), take convolutions with a few input channels
// (3-channel stems) or groups of channels that do not fill a box.
typedef CONFLUX_T T;

struct PadArgs {
    const void* src;
    void* dst;
    i64 s[5];          // source strides: outer (N or K), C, D, H, W
    int c, cp, d, h, w, groups;   // channels per group before and after padding
    i64 total;         // outer · D · H · W · groups · cp
};

extern "C" __global__ void pad_channels(const PadArgs a) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < a.total; i += (i64)gridDim.x * blockDim.x) {
        const int gc = (int)(i % ((i64)a.groups * a.cp));
        const int g = gc / a.cp, c = gc % a.cp;
        i64 t = i / ((i64)a.groups * a.cp);
        const int w = (int)(t % a.w); t /= a.w;
        const int h = (int)(t % a.h); t /= a.h;
        const int d = (int)(t % a.d);
        const i64 o = t / a.d;
        float v = 0.f;
        if (c < a.c) v = ld<T>(a.src, o * a.s[0] + (i64)(g * a.c + c) * a.s[1] + d * a.s[2] + h * a.s[3] + w * a.s[4]);
        st<T>(a.dst, i, v);
    }
}
