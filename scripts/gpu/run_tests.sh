#!/usr/bin/env bash
# Run on the GPU machine from the repository root: every staged test binary, the CUDA
# variants included, then a one-line summary per binary. Logs go to $OUT when set.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CONFLUX_CACHE_DIR=${CONFLUX_CACHE_DIR:-/tmp/conflux-cache}
# A CUDA test variant that finds no usable GPU fails here instead of reporting itself skipped:
# on this machine a skip would be a vacuous pass.
export CONFLUX_REQUIRE_GPU=1
out=${OUT:-/tmp}
# The driver CLI tests run the staged binary (its build path does not exist here).
[ -x .gpu/conflux-driver ] && export CONFLUX_DRIVER_BIN=$PWD/.gpu/conflux-driver
filter=${1:-}
status=0
summary=""
for t in .gpu/bin/*; do
  name=$(basename "$t")
  case "$name" in *example*|bench_*|conflux_*) continue;; esac
  mkdir -p "$out/tests"; log="$out/tests/$name.log"
  "$t" $filter --test-threads=4 >"$log" 2>&1
  rc=$?
  line=$(grep -E '^test result' "$log" | tail -1)
  summary+="$name: rc=$rc $line"$'\n'
  if [ $rc -ne 0 ]; then status=1; grep -E 'panicked|FAILED|failed' "$log" | head -20; fi
done
echo "==== summary"
printf '%s' "$summary"
exit $status
