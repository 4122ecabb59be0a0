#!/usr/bin/env bash
# Time every tile configuration of a tensor-core kernel on a problem list (run on the GPU
# machine from the repository root): one CSV block per configuration and a per-problem best
# table. Usage: bash .gpu/tile_sweep.sh LIST N DTYPE [tc|wgmma|tma]   (DTYPE f16 | bf16; NHWC)
# CFGS="label label ..." replaces the kind's list (for example only the clustered tiles).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
list=$1; n=$2; dt=$3; kind=${4:-wgmma}
if [ "$kind" = tc ]; then
  var=CONFLUX_TC_TILE
  cfgs="128x128x32w64x32s4 128x128x64w64x32s3 128x64x32w64x32s4 128x64x64w64x32s3 64x128x32w32x64s4 64x64x64w32x32s4 256x64x32w64x32s4"
elif [ "$kind" = tma ]; then
  var=CONFLUX_TMA_TILE
  cfgs="tma128x128s4 tma128x128s5 tma128x128s4d tma128x128s6d tma128x64s4 tma128x64s6 tma128x64s4d tma256x128s3 tma256x64s4 tma64x128s3 tma64x128s4d"
else
  var=CONFLUX_WGMMA_TILE
  cfgs="wg256x128s4 wg128x128s6 wg128x128s4 wg128x128s3 wg128x64s4 wg128x64s3 wg256x64s4 wgp256x128s4 wgp128x128s6 wgp128x128s4 wgp128x128s3 wgp128x64s4 wgp128x64s3 wgp256x64s4"
fi
cfgs=${CFGS:-$cfgs}
out=$(mktemp)
for cfg in $cfgs; do
  env $var=$cfg .gpu/ex/bench_cba "$list" "$n" "$dt" nhwc 30 | sed "s/^/$cfg,/" >> "$out"
done
echo "==== default heuristic"
.gpu/ex/bench_cba "$list" "$n" "$dt" nhwc 30 | sed "s/^/heuristic,/" | tee -a "$out"
echo "==== per problem: time (us) per tile, best marked"
python3 - "$out" <<'PY'
import sys, collections
t = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 6: t[f[1]][f[0]] = float(f[6])
for prob, row in t.items():
    best = min(v for k, v in row.items() if k != "heuristic")
    cells = " ".join(f"{k}={v:.1f}{'*' if v == best else ''}" for k, v in row.items())
    print(f"{prob:24s} {cells}  heuristic/best={row.get('heuristic', float('nan'))/best:.2f}")
PY
