# Merge a bench_cba.py table (conflux and cuDNN times, same run) with gap_profile.py's raw
# ncu CSV into the per-problem gap table of bench/results (markdown on stdout).
# Usage: python3 gap_table.py BENCH_CBA_OUTPUT GAP_PROFILE_RAW_CSV
# Floors as in ../shared/bench/ANCHORS.md: max(bytes / 4.3 TB/s, flops / peak). Tiles are
# the ones `tma_heuristic` picks (no perf-db entry): 256 x 64 for K <= 64 or K >= 2 C R S,
# else 128 x 128; waves = tiles / 132 SMs.
import csv, math, sys, collections

PEAK = {"fp16": 990e12, "bf16": 990e12, "tf32": 495e12}
CDT = {"fp16": "f16", "bf16": "bf16", "tf32": "tf32"}
raw = collections.defaultdict(dict)
for cfg, cdt, _lay, _sec, name, _unit, val in csv.reader(open(sys.argv[2])):
    raw[(cdt, cfg)][name] = val
bench = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split("|")]
    if len(f) > 6 and f[1] in PEAK:
        bench.append((f[1], f[2], float(f[3]), float(f[4]), float(f[5])))


def num(m, k):
    try:
        return float(m[k].replace(",", ""))
    except (KeyError, ValueError):
        return float("nan")


print("| precision | problem | cuDNN (us) | conflux (us) | conflux/cuDNN | TFLOP/s | floor (us) | conflux/floor | tile | k-steps | tiles / 132 | SM active / elapsed | tensor pipe / active | DRAM | issue slots | top stalls (warps per issued instr.) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
for prec, cfg, cudnn, ours, ratio in bench:
    C, H, W, K, fy, fx, py, px = map(int, cfg.split("-"))
    N, oh, ow = 64, H + 2 * py - fy + 1, W + 2 * px - fx + 1
    flops = 2 * N * K * oh * ow * C * fy * fx
    size = 4 if prec == "tf32" else 2
    floor = max((N * C * H * W + K * C * fy * fx + N * K * oh * ow) * size / 4.3e12, flops / PEAK[prec]) * 1e6
    bm, bn = (256, 64) if K <= 64 or K >= 2 * C * fy * fx else (128, 128)
    tiles = math.ceil(N * oh * ow / bm) * math.ceil(K / bn)
    ksteps = C * fy * fx * size // 128
    m = raw[(CDT[prec], cfg)]
    active = num(m, "SM Active Cycles") / num(m, "Elapsed Cycles")
    stalls = sorted(((num(m, k), k) for k in m if k.startswith("Stall ")), reverse=True)[:3]
    top = ", ".join(f"{k[6:].lower()} {v:.2f}" for v, k in stalls)
    print(f"| {prec} | {cfg} | {cudnn:.1f} | {ours:.1f} | {ratio:.2f} | {flops / ours / 1e6:.0f} | {floor:.1f} | {ours / floor:.2f} | "
          f"{bm}x{bn} | {ksteps} | {tiles / 132:.2f} | {100 * active:.0f}% | {num(m, 'SM: Pipe Tensor Cycles Active') / active:.0f}% | "
          f"{num(m, 'DRAM Throughput'):.0f}% | {num(m, 'Issue Slots Busy'):.0f}% | {top} |")
