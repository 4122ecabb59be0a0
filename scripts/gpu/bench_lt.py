# Run on the GPU machine: is cuBLASLt (bias + ReLU epilogue) faster than cuDNN's fused conv
# on the 1x1 layers? A stride-1, unpadded 1x1 convolution on NHWC tensors is the GEMM
# y[NHW, K] = relu(x[NHW, C] . w[K, C]^T + b); torch._addmm_activation runs it as one cuBLASLt
# matmul with the RELU_BIAS epilogue. Same timing method as bench_cba.py (do_bench, cold L2).
# Usage: python3 bench_lt.py LIST N [precisions: fp16 bf16 tf32]
import math, sys, torch
from triton.testing import do_bench

lst, N = sys.argv[1], int(sys.argv[2])
precs = sys.argv[3:] or ["fp16", "bf16", "tf32"]
cfgs = [l.strip() for l in open(lst) if l.strip() and not l.startswith("#")]
torch.backends.cudnn.benchmark = True
print("| precision | config | cuDNN fused (us) | cuBLASLt addmm+bias+ReLU (us) | cuBLASLt/cuDNN |")
print("|---|---|---:|---:|---:|")
for prec in precs:
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[prec]
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    rs = []
    for cfg in cfgs:
        C, H, W, K, fy, fx, py, px = map(int, cfg.split("-"))
        if (fy, fx, py, px) != (1, 1, 0, 0):
            continue
        x = torch.randn(N, C, H, W, device="cuda", dtype=dt).to(memory_format=torch.channels_last)
        w = (torch.randn(K, C, 1, 1, device="cuda", dtype=dt) / math.sqrt(C)).to(memory_format=torch.channels_last)
        b = torch.randn(K, device="cuda", dtype=dt)
        t_dnn = do_bench(lambda: torch.cudnn_convolution_relu(x, w, b, (1, 1), (0, 0), (1, 1), 1), warmup=25, rep=100, return_mode="median") * 1e3
        x2, w2 = x.permute(0, 2, 3, 1).reshape(-1, C), w.reshape(K, C)
        ref = torch.cudnn_convolution_relu(x, w, b, (1, 1), (0, 0), (1, 1), 1).permute(0, 2, 3, 1).reshape(-1, K)
        got = torch._addmm_activation(b, x2, w2.t())
        err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        t_lt = do_bench(lambda: torch._addmm_activation(b, x2, w2.t()), warmup=25, rep=100, return_mode="median") * 1e3
        rs.append(t_lt / t_dnn)
        print(f"| {prec} | {cfg} | {t_dnn:.1f} | {t_lt:.1f} | {t_lt / t_dnn:.2f} |  (max rel diff {err:.1e})", flush=True)
    print(f"geomean cuBLASLt/cuDNN {prec} 1x1 layers: {math.exp(sum(map(math.log, rs)) / len(rs)):.2f}")
