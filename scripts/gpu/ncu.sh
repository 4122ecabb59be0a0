#!/usr/bin/env bash
# Profile the fused conv kernel with Nsight Compute on two ResNet layers at N = 64, f16 NHWC:
# a 1x1 (memory-bound for cuDNN) and a 3x3 (compute-bound). Run on the GPU machine from the
# repository root after scripts/gpu/build.sh; full reports go to $OUT/ncu_*.txt.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
printf "64-55-55-256-1-1-0-0\n" > .gpu/p1x1.txt
printf "256-14-14-256-3-3-1-1\n" > .gpu/p3x3.txt
for p in p1x1 p3x3; do
  echo "==== $p"
  timeout 200 ncu --kernel-name regex:igemm --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis .gpu/ex/bench_cba .gpu/$p.txt 64 f16 nhwc 5 > "$out/ncu_$p.txt" 2>&1
  grep -E "Duration|Throughput|Issued|Eligible|Occupancy|Block Limit|L2 Hit|No Eligible" "$out/ncu_$p.txt" | head -30
done
