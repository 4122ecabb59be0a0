// y = beta · y over a strided view of up to five dimensions (any strides, the innermost last),
// y = 0 when beta is 0 (old values, NaN included, are never read then). Covers the dx
// positions of a strided backward-data that no filter tap reaches. Each thread takes VEC
// consecutive elements of the innermost dimension (16 bytes when it is contiguous and
// aligned, else one), so the index arithmetic runs once per 16 bytes, in 32 bits.
typedef CONFLUX_T T;

struct ScaleArgs {
    void* y;
    i64 s[5];      // element strides of the five dimensions
    int len[5];
    float beta;
    int vec;       // elements per thread: 16 bytes' worth, or 1
    i64 total;     // product of len
};

extern "C" __global__ void scale_view(const ScaleArgs a) {
    const unsigned inner = a.len[4] / a.vec;
    const i64 threads = a.total / a.vec;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < threads; i += (i64)gridDim.x * blockDim.x) {
        unsigned t = (unsigned)i;   // threads < 2^32 (host check)
        i64 at = (i64)(t % inner) * a.vec * a.s[4];
        t /= inner;
#pragma unroll
        for (int d = 3; d >= 0; --d) {
            at += (i64)(t % (unsigned)a.len[d]) * a.s[d];
            t /= (unsigned)a.len[d];
        }
        T* y = (T*)a.y + at;
        if (a.vec > 1 && a.beta == 0.f) {
            *(uint4*)y = make_uint4(0, 0, 0, 0);
        } else {
            for (int k = 0; k < a.vec; ++k) st<T>(y, k, a.beta == 0.f ? 0.f : a.beta * ld<T>(y, k));
        }
    }
}
