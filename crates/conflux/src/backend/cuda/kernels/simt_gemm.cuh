// Pieces shared by the CUDA-core implicit-GEMM kernels (conv_igemm.cu, conv_wgrad_simt.cu),
// after the preamble's geometry defines.

// A filter column (c, tap) — the forward kernel's reduction index, backward-weights' output
// column — as (c, rd, rh, rw): channels fastest for channels-last x (CHANNEL_INNER), else taps.
__device__ __forceinline__ void split_tap_channel(int col, int& c, int& rd, int& rh, int& rw) {
#if CHANNEL_INNER
    c = col % CG;
    int r = col / CG;
#else
    int r = col % (FD * FH * FW);
    c = col / (FD * FH * FW);
#endif
    rw = r % FW;
    r /= FW;
    rh = r % FH;
    rd = r / FH;
}

// One BK-deep slice of a CUDA-core GEMM tile: the thread
// (tx, ty) of a 16 × 16 grid accumulates its TM × TN outputs from the staged slices As
// (BK × BM, rows of the output) and Bs (BK × BN, its columns), f32 fused multiply-adds.
template <int BK_, int BM_, int BN_, int TM_, int TN_>
__device__ __forceinline__ void simt_slice(const float (&As)[BK_][BM_], const float (&Bs)[BK_][BN_], int tx, int ty, float (&acc)[TM_][TN_]) {
#pragma unroll
    for (int kk = 0; kk < BK_; ++kk) {
        float a[TM_], b[TN_];
#pragma unroll
        for (int i = 0; i < TM_; i += 4) *(float4*)&a[i] = *(const float4*)&As[kk][tx * TM_ + i];
#pragma unroll
        for (int j = 0; j < TN_; j += 4) *(float4*)&b[j] = *(const float4*)&Bs[kk][ty * TN_ + j];
#pragma unroll
        for (int i = 0; i < TM_; ++i)
#pragma unroll
            for (int j = 0; j < TN_; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}
