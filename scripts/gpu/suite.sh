#!/usr/bin/env bash
# The whole GPU purpose in one call (run from the repository root on the GPU machine):
# tests, compute-sanitizer over fused kernels, compile-time figures, benchmarks.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
rc=0
if [ "${TESTS:-1}" = 1 ]; then echo "==== tests"; bash .gpu/run_tests.sh; rc=$?; fi
echo "==== compile time: cold (empty cache) then warm (disk cache, new process)"
export CONFLUX_CACHE_DIR=/tmp/conflux-compile-probe; rm -rf $CONFLUX_CACHE_DIR
.gpu/ex/conv_bias_relu | grep -E "compile|rel L2"
.gpu/ex/conv_bias_relu | grep -E "compile|rel L2"
unset CONFLUX_CACHE_DIR
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "==== compute-sanitizer"
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 .gpu/bin/fusion_conv exact_small_integers_cba::cuda resnet_like_layers::cuda 2>&1 | tail -3
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 .gpu/bin/fusion_pointwise na_inference_matrix::cuda 2>&1 | tail -3
  timeout 150 compute-sanitizer --tool racecheck --print-limit 5 .gpu/bin/fusion_pointwise bn_backward_with_activation_backward::cuda 2>&1 | tail -3
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 .gpu/bin/conv_directions hand_picked_geometries::cuda 2>&1 | tail -3
fi
if [ "${BENCH:-1}" = 1 ]; then
  echo "==== NA benchmark"; PYTHONUNBUFFERED=1 python3 .gpu/bench_na.py .gpu/na.txt 2>&1 | tail -20
fi
exit $rc
