// Copy a 16-bit or 32-bit tensor seen as [outer][C][P] (any strides, negative ones included;
// P = the spatial positions in order, rows of W) into a channels-last buffer, channels
// contiguous: dst[o_hi·d_hi + o_lo·d_lo + p·d_pos + c] (packed: dst[(o·P + p)·C + c]). Used to
// feed NCHW x and KCRS w to the tensor-core convolutions, which read channels-last operands,
// and to flip filters for backward-data. The outer index splits as o = hi·outer_lo + lo with a
// stride each (groups × channels of a flipped filter). Shapes are run-time arguments: one
// compiled module serves every problem.
//
// A block moves a 64-channel × 64-position tile of one outer index through shared memory:
// reads walk positions (consecutive threads, consecutive addresses when W is the unit-stride
// dimension), writes walk channels two at a time (paired stores, C is even).

struct ToChannelsLastArgs {
    const void* src;
    void* dst;
    long long base;                                  // source offset of element [0][0][0]
    long long s_hi, s_lo, s_c, s_row, s_col;         // source strides in elements
    long long d_hi, d_lo, d_pos;                     // destination strides (channels: 1)
    int c, p, w, outer_lo;                           // channels, positions, per row, outer split
};

// Two adjacent channels in one store: a word of 16-bit pairs, 8 bytes of 32-bit pairs.
__device__ __forceinline__ void store_pair(unsigned short* d, unsigned short lo, unsigned short hi) { *(unsigned*)d = (unsigned)lo | ((unsigned)hi << 16); }
__device__ __forceinline__ void store_pair(unsigned* d, unsigned lo, unsigned hi) { *(uint2*)d = make_uint2(lo, hi); }

// E: the element's bits (unsigned short for 16-bit types, unsigned for f32).
template <class E> __device__ __forceinline__ void to_channels_last_of(const ToChannelsLastArgs& a) {
    // Odd row length: the column reads of the write phase (channel pairs of one position)
    // fall in different banks.
    __shared__ E tile[64][65];
    const E* src = (const E*)a.src;
    E* dst = (E*)a.dst;
    const int o = blockIdx.z, c0 = blockIdx.y * 64, p0 = blockIdx.x * 64;
    const int t = threadIdx.x;
    const int o_hi = o / a.outer_lo, o_lo = o % a.outer_lo;

    const int px = t & 63, p = p0 + px;
    // All 16 reads of a thread are issued before any is used: narrow reads need many in
    // flight to keep the memory system busy.
    E v[16];
    if (p < a.p) {
        // One division per thread: its position is the same for all the channels it reads.
        const long long at = a.base + o_hi * a.s_hi + o_lo * a.s_lo + (long long)(p / a.w) * a.s_row + (long long)(p % a.w) * a.s_col;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int c = (t >> 6) + 4 * i;
            v[i] = c0 + c < a.c ? src[at + (long long)(c0 + c) * a.s_c] : 0;
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) tile[(t >> 6) + 4 * i][px] = v[i];
    }
    __syncthreads();

    const int cp = 2 * (t & 31);
    if (c0 + cp >= a.c) return;
#pragma unroll 4
    for (int q = t >> 5; q < 64; q += 8) {
        if (p0 + q >= a.p) break;
        store_pair(dst + o_hi * a.d_hi + o_lo * a.d_lo + (long long)(p0 + q) * a.d_pos + c0 + cp, tile[cp][q], tile[cp + 1][q]);
    }
}

extern "C" __global__ void __launch_bounds__(256) to_channels_last(const ToChannelsLastArgs a) { to_channels_last_of<unsigned short>(a); }
extern "C" __global__ void __launch_bounds__(256) to_channels_last_32(const ToChannelsLastArgs a) { to_channels_last_of<unsigned>(a); }
