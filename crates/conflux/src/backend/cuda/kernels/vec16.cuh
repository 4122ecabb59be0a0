// VEC elements of the kernel's type as one 16-byte vector, or an 8-byte one where VEC holds
// half as many (used only where VEC · sizeof(T) is 16 or 8), converted to and from f32
// registers. Prepended to the templates that move channels-last rows as vectors; needs VEC
// defined and CONFLUX_T.
constexpr int VEC_BYTES = VEC * (int)sizeof(CONFLUX_T);

union Vec16 {
    uint4 r;
    uint2 h;
    CONFLUX_T e[VEC];
};

__device__ __forceinline__ void load_vec(const void* p, i64 off, float (&v)[VEC]) {
    Vec16 u;
    if constexpr (VEC_BYTES == 8) {
        u.h = ldp8((const CONFLUX_T*)p + off);
    } else {
        u.r = ldp16((const CONFLUX_T*)p + off);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = to_f(u.e[j]);
}

__device__ __forceinline__ void store_vec(void* p, i64 off, const float (&v)[VEC]) {
    Vec16 u;
#pragma unroll
    for (int j = 0; j < VEC; ++j) u.e[j] = from_f<CONFLUX_T>(v[j]);
    if constexpr (VEC_BYTES == 8) {
        *(uint2*)((CONFLUX_T*)p + off) = u.h;
    } else {
        *(uint4*)((CONFLUX_T*)p + off) = u.r;
    }
}
