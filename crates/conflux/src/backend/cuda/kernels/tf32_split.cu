// The filter of a strict-f32 convolution on TF32 tensor cores, split before the convolution
// runs (tf32_split.cuh): row r of the rows × cols matrix src (rows `ld` elements apart)
// becomes [hi of each element | lo of each element], row r of a packed rows × 2·cols matrix.
// Filters are small next to the data: one plain pass, reads and writes coalesced.

struct SplitArgs {
    const float* src;
    unsigned* dst;
    long long ld;
    int rows, cols;
};

extern "C" __global__ void __launch_bounds__(256) tf32_split_rows(const SplitArgs a) {
    for (int r = blockIdx.y; r < a.rows; r += gridDim.y) {
        const float* s = a.src + r * a.ld;
        unsigned* d = a.dst + (long long)r * 2 * a.cols;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < a.cols; c += gridDim.x * blockDim.x) {
            unsigned hi, lo;
            tf32_split(s[c], hi, lo);
            d[c] = hi;
            d[a.cols + c] = lo;
        }
    }
}
