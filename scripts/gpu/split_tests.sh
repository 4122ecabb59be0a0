#!/usr/bin/env bash
# The whole GPU test suite split over every GPU of the machine (run from the repository root on
# the GPU machine after `tar -xJf .gpu.tar.xz`): binaries dealt round-robin to the GPUs, seven at
# a time per GPU, three test threads each, each GPU with its own kernel cache (a fresh machine
# compiles every kernel cold, which one GPU's call cannot fit in). Logs and a sorted rc list go to $OUT/logs (tar them:
# a call returns at most 8 files per folder); exit status 1 when any binary failed.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CONFLUX_REQUIRE_GPU=1 CONFLUX_DRIVER_BIN=$PWD/.gpu/conflux-driver
out=${OUT:-/tmp}/logs
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
ls .gpu/bin | grep -v -E "example|^bench_|^conflux_" > /tmp/split_all.txt
for g in $(seq 0 $((gpus - 1))); do
  awk -v n="$gpus" -v g="$g" 'NR % n == g' /tmp/split_all.txt |
    CUDA_VISIBLE_DEVICES=$g CONFLUX_CACHE_DIR=/tmp/conflux-cache-$g OUTDIR="$out" xargs -P 7 -I{} sh -c \
      'timeout 420 .gpu/bin/{} --test-threads=3 > "$OUTDIR/{}.log" 2>&1; echo "{} rc=$?" >> "$OUTDIR/rcs.txt"' &
done
wait
sort "$out/rcs.txt"
! grep -v "rc=0" "$out/rcs.txt" >/dev/null
