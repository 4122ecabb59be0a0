#!/usr/bin/env bash
# Run on the GPU machine from the repository root: compute-sanitizer over staged test binaries,
# several at a time, each with its own log, then one line per binary (exit status, the
# sanitizer's summary, the test result). A tool's error makes the binary exit 9.
#   bash .gpu/sanitize.sh TOOL SECONDS JOBS BINARY[:FILTER] ...
# TOOL is memcheck, racecheck, initcheck or synccheck; SECONDS bounds each binary (racecheck is
# slow: give it a filter, e.g. conv_few_channels:every_geometry); JOBS binaries run at once (the
# GPU is shared; 6–10 is fine for memcheck). Logs go to $OUT/sanitize (or /tmp/sanitize).
# Findings of 2026-11-29: bench/results/2026-11-29-h200-sanitizer.md.
set -uo pipefail
tool=$1 secs=$2 jobs=$3
shift 3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CONFLUX_REQUIRE_GPU=1 CONFLUX_CACHE_DIR=${CONFLUX_CACHE_DIR:-/tmp/conflux-cache-sanitize}
[ -x .gpu/conflux-driver ] && export CONFLUX_DRIVER_BIN=$PWD/.gpu/conflux-driver
dir=${OUT:-/tmp}/sanitize
mkdir -p "$dir"
san=/usr/local/cuda/bin/compute-sanitizer
run_one() {
  local spec=$1 bin=${1%%:*} filter=cuda
  [ "$spec" != "$bin" ] && filter=${spec#*:}
  local log="$dir/$bin.$tool.log"
  timeout "$secs" "$san" --tool "$tool" --error-exitcode 9 --print-limit 20 ".gpu/bin/$bin" "$filter" --test-threads=2 >"$log" 2>&1
  local rc=$?
  local summary result
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Internal Sanitizer Error" "$log" | tail -1 | sed 's/=* *//')
  result=$(grep -E "^test result" "$log" | tail -1)
  echo "$bin ($filter): rc=$rc ${summary:-no summary (timed out?)} | ${result:-no test result}"
}
export -f run_one
export tool secs dir san
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} | sort
