#!/usr/bin/env bash
# conflux-driver on the GPU (run from the repository root on the GPU machine after
# scripts/gpu/build.sh): every subcommand with verification and timing on small and
# ResNet-sized problems, then the fused-vs-unfused bench with its chart. Prints one line per
# run (exit code + the verdict / timing lines) and writes the chart to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CONFLUX_CACHE_DIR=${CONFLUX_CACHE_DIR:-/tmp/conflux-cache}
out=${OUT:-/tmp}
D=.gpu/conflux-driver
status=0
run() {
  local log; log=$("$D" "$@" --device cuda 2>&1); local rc=$?
  echo "---- rc=$rc: $*"
  echo "$log" | grep -E "Verifies|FAILED|Kernel (Avg )?Time|Fused Kernel Avg|stats: [a-z]|roofline|solver|not supported|error" | head -12
  [ $rc -ne 0 ] && status=1
}
run CBAInfer -F 4 -n 4 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -V 1 -t 1 -i 20
for f in 0 1 2 3 5 6; do run CBAInfer -F $f -n 8 -c 32 -H 14 -W 14 -k 32 -p 1 -q 1 -t 1 -i 10; done
run CBAInferfp16 -F 0 -n 16 -c 64 -H 28 -W 28 -k 64 -p 1 -q 1 -M 1 --layout NHWC -t 1 -i 20
run CBAInferfp16 -F 4 -n 64 -c 256 -H 14 -W 14 -k 256 -p 1 -q 1 --layout NHWC -t 1 -i 20
run conv -n 16 -c 64 -H 28 -W 28 -k 64 -p 1 -q 1 -t 1 -i 10 -s 1 -b 1
"$D" convfp16 -n 16 -c 64 -H 28 -W 28 -k 64 -p 1 -q 1 --layout NHWC -s 1 -F 1 --device cuda 2>&1 | grep -E "^Find|solver" | head -20
run convfp16 -n 8 -c 32 -H 14 -W 14 -k 32 -m trans -u 2 -v 2 -t 1 -i 5
run convbfp16 -n 8 -c 32 -H 14 -W 14 -k 32 -g 2 --layout NHWC -S 0 -t 1 -i 5
run conv -_ 3 -n 2 -c 8 -! 8 -H 8 -W 8 -k 8 -@ 3 -p 1 -q 1 -$ 1 -t 1 -i 5
run conv -n 4 -c 32 -H 14 -W 14 -k 32 -F 1 --list-solvers
run bnorm -n 32 -c 64 -H 28 -W 28 -F 1 -s 1 -r 1 -m 1 -t 1 -i 10
run bnorm -n 32 -c 64 -H 28 -W 28 -F 2 -r 1 -t 1 -i 10
run bnorm -n 32 -c 64 -H 28 -W 28 -b 1 -s 1 -m 1 -t 1 -i 10
run bnormfp16 -n 32 -c 64 -H 28 -W 28 -F 1 -m 1 -t 1
run activ -n 100 -c 64 -H 32 -W 32 -t 1
run activfp16 -n 100 -c 64 -H 32 -W 32 -m 9 -t 1
echo "==== bench (fp32 NCHW, N=64) + chart"
"$D" bench .gpu/cba_resnet.txt --device cuda -n 64 -i 20 --plot "$out/speedup_fp32.svg" || status=1
"$D" bench .gpu/cba_resnet.txt --device cuda -n 64 -i 20 --dtype fp16 --layout NHWC --plot "$out/speedup_fp16_nhwc.png" || status=1
exit $status
