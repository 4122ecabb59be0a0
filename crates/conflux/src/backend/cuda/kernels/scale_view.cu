// y = alpha · src + beta · y over a strided view of up to five dimensions (any strides, the
// innermost last; src optional: without it y = beta · y), with beta = 0 never reading y (old
// values, NaN included, do not leak). Covers the dx positions of a strided backward-data that
// no filter tap reaches, and writes results computed into scratch back to a caller's tensor.
// Each thread takes VEC consecutive elements of the innermost dimension (16 bytes when both
// views are contiguous and aligned there, else one), so the index arithmetic runs once per
// 16 bytes, in 32 bits.
typedef CONFLUX_T T;

struct ScaleArgs {
    void* y;
    const void* src;   // null: no source term
    i64 s[5];          // element strides of y's five dimensions
    i64 ss[5];         // the same dimensions' strides in src
    int len[5];
    float alpha, beta;
    int vec;           // elements per thread: 16 bytes' worth, or 1
    int unused;
    i64 total;         // product of len
};

extern "C" __global__ void scale_view(const ScaleArgs a) {
    const unsigned inner = a.len[4] / a.vec;
    const i64 threads = a.total / a.vec;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < threads; i += (i64)gridDim.x * blockDim.x) {
        unsigned t = (unsigned)i;   // threads < 2^32 (host check)
        const i64 col = (i64)(t % inner) * a.vec;
        i64 at = col * a.s[4], from = col * a.ss[4];
        t /= inner;
#pragma unroll
        for (int d = 3; d >= 0; --d) {
            const unsigned q = t % (unsigned)a.len[d];
            at += (i64)q * a.s[d];
            from += (i64)q * a.ss[d];
            t /= (unsigned)a.len[d];
        }
        T* y = (T*)a.y + at;
        if (a.vec > 1 && a.beta == 0.f && !a.src) {
            *(uint4*)y = make_uint4(0, 0, 0, 0);
            continue;
        }
        for (int k = 0; k < a.vec; ++k) {
            float v = a.src ? a.alpha * ld<T>(a.src, from + k * a.ss[4]) : 0.f;
            if (a.beta != 0.f) v += a.beta * ld<T>(y, k);
            st<T>(y, k, v);
        }
    }
}
