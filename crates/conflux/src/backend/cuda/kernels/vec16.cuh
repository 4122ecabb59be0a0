// VEC elements of the kernel's type as one 16-byte vector (used only where VEC · sizeof(T) is
// 16), converted to and from f32 registers. Prepended to the templates that move channels-last
// rows as 16-byte vectors; needs VEC defined and CONFLUX_T.
union Vec16 {
    uint4 r;
    CONFLUX_T e[VEC];
};

__device__ __forceinline__ void load_vec(const void* p, i64 off, float (&v)[VEC]) {
    Vec16 u;
    u.r = ldp16((const CONFLUX_T*)p + off);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = to_f(u.e[j]);
}

__device__ __forceinline__ void store_vec(void* p, i64 off, const float (&v)[VEC]) {
    Vec16 u;
#pragma unroll
    for (int j = 0; j < VEC; ++j) u.e[j] = from_f<CONFLUX_T>(v[j]);
    *(uint4*)((CONFLUX_T*)p + off) = u.r;
}

