// The sub-filter of a backward-data phase, gathered from w (K × CG × taps, any strides) into
// packed dst[g·CG + c][t][k] (C × taps × KG): tap t = (td, th, tw) of the sub-filter is source
// tap (first_d − td·step_d, first_h − th·step_h, first_w − tw·step_w). One thread per element;
// filters are small and this runs once per call, so it is written for clarity over coalescing
// (the tensor-core path copies through the layout kernel instead). Elements are moved as bits.

struct SubFilterArgs {
    const void* src;
    void* dst;
    long long s_k, s_c, s_tap[3];   // source element strides: K, C, D, H, W
    int first[3], step[3], count[3];
    int kg, cg, elem;               // KG per group, CG per group, bytes per element (2 or 4)
    long long total;                // C · taps · KG
};

extern "C" __global__ void sub_filter(const SubFilterArgs a) {
    const int taps = a.count[0] * a.count[1] * a.count[2];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.total; i += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(i % a.kg);
        const long long rest = i / a.kg;
        const int t = (int)(rest % taps);
        const long long gc = rest / taps;
        const long long g = gc / a.cg, c = gc % a.cg;
        const int tw = t % a.count[2], th = t / a.count[2] % a.count[1], td = t / (a.count[2] * a.count[1]);
        const long long at = (g * a.kg + k) * a.s_k + c * a.s_c + (long long)(a.first[0] - td * a.step[0]) * a.s_tap[0] +
                             (long long)(a.first[1] - th * a.step[1]) * a.s_tap[1] + (long long)(a.first[2] - tw * a.step[2]) * a.s_tap[2];
        if (a.elem == 4) ((unsigned*)a.dst)[i] = ((const unsigned*)a.src)[at];
        else ((unsigned short*)a.dst)[i] = ((const unsigned short*)a.src)[at];
    }
}
