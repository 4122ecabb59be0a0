#!/usr/bin/env bash
# Builds the oneDNN int8 forward peer (dnnl_int8) into /tmp. Needs Debian's libdnnl-dev and g++.
# Usage: bash bench/cpu-peer-int8/build.sh, then
#   /tmp/dnnl_int8 1 20 0.3 $(grep -v '^#' ../shared/bench/cba_resnet.txt)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if ! dpkg -s libdnnl-dev >/dev/null 2>&1; then apt-get update -qq && apt-get install -y -qq libdnnl-dev g++ >/dev/null; fi
g++ -O2 -std=c++17 -fopenmp "$here/dnnl_int8.cpp" -o /tmp/dnnl_int8 -ldnnl
echo "built /tmp/dnnl_int8"
