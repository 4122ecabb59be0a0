#!/usr/bin/env bash
# Builds the oneDNN backward peer (dnnl_bwd) into /tmp. Needs Debian's libdnnl-dev and g++.
# Usage: bash bench/cpu-peer-bwd/build.sh, then
#   target/release/examples/bench_cpu bwd LIST N /tmp/dnnl_bwd
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if ! dpkg -s libdnnl-dev >/dev/null 2>&1; then apt-get update -qq && apt-get install -y -qq libdnnl-dev g++ >/dev/null; fi
g++ -O2 -std=c++17 -fopenmp "$here/dnnl_bwd.cpp" -o /tmp/dnnl_bwd -ldnnl
echo "built /tmp/dnnl_bwd"
