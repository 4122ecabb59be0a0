// Epilogue of the wgmma kernels (conv_igemm_wgmma.cu, conv_igemm_tma.cu): one warpgroup's
// 64 × BN accumulators through α/β and the generated chain to y. acc[4j + 2h + e] is row
// 16·warp + lane/4 + 8h of the warpgroup's 64, channel 8j + 2·(lane % 4) + e (wgmma.cuh).
//
// With STAGE_STORE the results go through a shared staging buffer so that consecutive threads
// store consecutive addresses: for channels-last y as pixel rows of 16-byte channel chunks; with
// STAGE_CM (each channel's pixels contiguous in y, as in NCHW) as channel rows of pixels, stored
// as 16-byte runs of 8 pixels (CM_VEC: images hold a multiple of 8 pixels) or element by
// element along the pixels. Without staging, two channels per store straight from registers.

// Staging buffer: row-major rows of BN values with the 16-byte chunks of a row (OUT_CHUNK
// values: 8 of 16 bits, 16 of 8 bits) XOR-swizzled by row, so the fragment writes (8 rows × 4
// pairs per warp) and the row-chunk reads miss each other's banks.
#define OUT_CHUNK (16 / (int)sizeof(TY))
#define OUT_SWZ_MASK ((BN / OUT_CHUNK < 8 ? BN / OUT_CHUNK : 8) - 1)
static_assert(!Y_SEG || !(STAGE_STORE || STAGE_CM) || (!STAGE_CM && Y_SEG % OUT_CHUNK == 0), "staged rows of a split y: whole 16-byte chunks per channel run");
__device__ __forceinline__ int out_swz(int row, int chunk) { return row * BN + (chunk ^ (row & OUT_SWZ_MASK)) * OUT_CHUNK; }
// Where channel `ch` of a staged row starts.
__device__ __forceinline__ int out_at(int row, int ch) { return out_swz(row, ch / OUT_CHUNK) + ch % OUT_CHUNK; }
// Two adjacent channels' finished values into the staging buffer (16-bit values as one word,
// 8-bit ones as one 16-bit store).
// (A template so that f32 kernels, which never call it, compile.)
template <class U = TY> __device__ __forceinline__ void stage_pair(U* at, const float (&v)[2]) {
    if constexpr (sizeof(U) == 1) {
        *(unsigned short*)at = (unsigned short)((unsigned char)from_f<U>(v[0]).u | ((unsigned)(unsigned char)from_f<U>(v[1]).u << 8));
    } else {
        *(unsigned*)at = pack2<U>(v[0], v[1]);
    }
}

// Channel-major staging of ROWS pixels per channel: channel rows with 16-byte (8-pixel)
// chunks XOR-swizzled by channel, so the fragment writes (4 channel pairs × 8 pixels per
// warp) and the run reads fall in different banks.
template <int ROWS> __device__ __forceinline__ int cm_swz(int ch, int row) { return ch * ROWS + ((((row >> 3) ^ (ch & 7))) << 3) + (row & 7); }

// Channel-major staged tile → y along each channel's pixels. y offset of pixel m, channel
// k: n·YS_N + k·YS_C + (m − n·OSP), since an image's pixels are contiguous.
template <int ROWS, int NT>
__device__ __forceinline__ void store_runs(const Params& p, const TY* stage, int t, int m0, int n0, int g, int M) {
#if CM_VEC
    // A run of 8 pixels never leaves its image (OSP % 8 == 0, m0 % 8 == 0).
    for (int i = t; i < BN * (ROWS / 8); i += NT) {
        const int ch = i / (ROWS / 8), c8 = i % (ROWS / 8);
        const int m = m0 + c8 * 8, kn = n0 + ch;
        if (m >= M || kn >= KG) continue;
        const int n = m / OSP;
        const i64 o = (i64)n * YS_N + (i64)(g * KG + kn) * YS_C + (m - n * OSP);
        *(uint4*)((TY*)p.y + o) = *(const uint4*)(stage + cm_swz<ROWS>(ch, c8 * 8));
    }
#else
    for (int i = t; i < BN * ROWS; i += NT) {
        const int ch = i / ROWS, r = i % ROWS;
        const int m = m0 + r, kn = n0 + ch;
        if (m >= M || kn >= KG) continue;
        const int n = m / OSP;
        ((TY*)p.y)[(i64)n * YS_N + (i64)(g * KG + kn) * YS_C + (m - n * OSP)] = stage[cm_swz<ROWS>(ch, r)];
    }
#endif
}

// The two accumulator rows a thread holds (h = 0, 1: rows row0 + 16·warp + lane/4 + 8h of the
// buffer, output pixels m0 + that), whether they exist, and where they go in y.
struct FragRows {
    int rows[2];
    bool live[2];
    OutRow r[2];
    __device__ __forceinline__ FragRows(int row0, int lane, int warp, int m0, int M) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            rows[h] = row0 + warp * 16 + (lane >> 2) + h * 8;
            live[h] = m0 + rows[h] < M;
            r[h] = out_row(live[h] ? m0 + rows[h] : 0);
        }
    }
};

// Every live output pair of one warpgroup's accumulators through α/β and the generated chain,
// channel-outer so each channel's epilogue parameters are loaded once for both rows: calls
// put(j, h, v) with the values of channels n0 + 8j + 2·(lane % 4) + {0, 1} of row h.
template <class Put>
__device__ __forceinline__ void for_each_pair(const Params& p, const float (&acc)[BN / 2], const FragRows& f, int lane, int n0, int g, Put put) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!f.live[h]) continue;
            float v[2];
            epilogue_pair(p, f.r[h], g, n0 + j * 8 + (lane & 3) * 2, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], v);
            put(j, h, v);
        }
    }
}

// `stage` holds ROWS output rows, row 0 being output pixel m0; this warpgroup's rows start at
// `row0`. The NT threads that share the buffer store all of it; `t` is this thread's index
// among them and `sync()` a barrier over exactly them. The caller guarantees nobody else
// touches the buffer until the next sync after this returns.
template <int ROWS, int NT, class Sync>
__device__ __forceinline__ void wg_epilogue(const Params& p, const float (&acc)[BN / 2], TY* stage, int row0, int lane, int warp, int t, int m0, int n0, int g, int M, Sync sync) {
#if STAGE_STORE
    sync();   // the buffer's previous readers (multiplies or stores) are done
#endif
    const FragRows f(row0, lane, warp, m0, M);
    for_each_pair(p, acc, f, lane, n0, g, [&](int j, int h, const float (&v)[2]) {
#if STAGE_CM
        const int ch = j * 8 + (lane & 3) * 2;
        stage[cm_swz<ROWS>(ch, f.rows[h])] = from_f<TY>(v[0]);
        stage[cm_swz<ROWS>(ch + 1, f.rows[h])] = from_f<TY>(v[1]);
#elif STAGE_STORE
        stage_pair(stage + out_at(f.rows[h], j * 8 + (lane & 3) * 2), v);
#else
        put_pair(p, f.r[h], g, n0 + j * 8 + (lane & 3) * 2, v);
#endif
    });
#if STAGE_CM
    sync();
    store_runs<ROWS, NT>(p, stage, t, m0, n0, g, M);
#elif STAGE_STORE
    sync();
    for (int i = t; i < ROWS * (BN / OUT_CHUNK); i += NT) {
        const int row = i / (BN / OUT_CHUNK), ch = i % (BN / OUT_CHUNK);
        const int m = m0 + row, kn = n0 + ch * OUT_CHUNK;
        if (m >= M || kn >= KG) continue;
        const i64 o = y_row_offset(m) + y_chan(g * KG + kn);
        const TY* src = stage + out_swz(row, ch);
        if (kn + OUT_CHUNK <= KG) {
            *(uint4*)((TY*)p.y + o) = *(const uint4*)src;
        } else {
            for (int e = 0; e < KG - kn; ++e) ((TY*)p.y)[o + e] = src[e];
        }
    }
#endif
}
