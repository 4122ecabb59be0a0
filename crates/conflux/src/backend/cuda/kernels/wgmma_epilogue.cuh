// Epilogue of the wgmma kernels (conv_igemm_wgmma.cu, conv_igemm_tma.cu): one warpgroup's
// 64 × BN accumulators through α/β and the generated chain to y. acc[4j + 2h + e] is row
// 16·warp + lane/4 + 8h of the warpgroup's 64, channel 8j + 2·(lane % 4) + e (wgmma.cuh).
//
// With STAGE_STORE (channels-last y, 16-byte aligned rows) the results go through a shared
// staging buffer so that stores are whole 16-byte row chunks, consecutive threads along a
// row; else two channels per store straight from registers.

// Staging buffer: row-major rows of BN values with the 16-byte chunks of a row XOR-swizzled
// by row, so the fragment writes (8 rows × 4 words per warp) and the row-chunk reads miss
// each other's banks.
__device__ __forceinline__ int out_swz(int row, int chunk) { return row * BN + ((chunk ^ (row & 7)) << 3); }

// `stage` holds ROWS output rows, row 0 being output pixel m0; this warpgroup's rows start at
// `row0`. The NT threads that share the buffer store all of it; `t` is this thread's index
// among them and `sync()` a barrier over exactly them. The caller guarantees nobody else
// touches the buffer until the next sync after this returns.
template <int ROWS, int NT, class Sync>
__device__ __forceinline__ void wg_epilogue(const Params& p, const float (&acc)[BN / 2], T* stage, int row0, int lane, int warp, int t, int m0, int n0, int g, int M, Sync sync) {
#if STAGE_STORE
    sync();   // the buffer's previous readers (multiplies or stores) are done
#endif
    // Channel-outer so each channel's epilogue parameters are loaded once for both rows.
    int rows[2];
    bool live[2];
    OutRow r[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        rows[h] = row0 + warp * 16 + (lane >> 2) + h * 8;
        live[h] = m0 + rows[h] < M;
        r[h] = out_row(live[h] ? m0 + rows[h] : 0);
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = j * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!live[h]) continue;
#if STAGE_STORE
            float v[2];
            epilogue_pair(p, r[h], g, n0 + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], v);
            *(unsigned*)(stage + out_swz(rows[h], j) + (lane & 3) * 2) = pack2(v[0], v[1]);
#else
            store_pair(p, r[h], g, n0 + col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
#endif
        }
    }
#if STAGE_STORE
    sync();
    for (int i = t; i < ROWS * (BN / 8); i += NT) {
        const int row = i / (BN / 8), ch = i % (BN / 8);
        const int m = m0 + row, kn = n0 + ch * 8;
        if (m >= M || kn >= KG) continue;
        const i64 o = y_row_offset(m) + g * KG + kn;
        const T* src = stage + out_swz(row, ch);
        if (kn + 8 <= KG) {
            *(uint4*)((T*)p.y + o) = *(const uint4*)src;
        } else {
            for (int e = 0; e < KG - kn; ++e) ((T*)p.y)[o + e] = src[e];
        }
    }
#endif
}
