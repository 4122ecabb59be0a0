#!/usr/bin/env bash
# Registers, spills and shared memory of every kernel in a conflux disk cache (run on the GPU
# machine). Usage: bash .gpu/cubin_usage.sh CACHE_DIR [kernel-name filter]
set -uo pipefail
dir=$1; filter=${2:-.}
tmp=$(mktemp -d)
for f in $(find "$dir" -name "*.cubin"); do
  # Strip the cache header: the payload is the ELF image.
  python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(b[b.index(b"\x7fELF"):])' "$f" "$tmp/k.cubin" || continue
  cuobjdump --dump-resource-usage "$tmp/k.cubin" 2>/dev/null | grep -A1 "Function" | grep -v "^--" | paste - - | grep -E "$filter" \
    | sed -E 's/.*Function ([^:]*):.*REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+).*/\1 REG=\2 STACK=\3 SHARED=\4/'
done | sort | uniq -c
rm -rf "$tmp"
