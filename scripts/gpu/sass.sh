#!/usr/bin/env bash
# SASS of the cached kernels whose cache file name matches a filter (run on the GPU machine).
# Usage: bash .gpu/sass.sh CACHE_DIR [file-name filter]   (prints to stdout)
set -uo pipefail
dir=$1; filter=${2:-.}
tmp=$(mktemp -d)
for f in $(find "$dir" -name "*.cubin" | grep -E "$filter"); do
  python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(b[b.index(b"\x7fELF"):])' "$f" "$tmp/k.cubin" || continue
  echo "==== $f"
  cuobjdump -sass "$tmp/k.cubin"
done
rm -rf "$tmp"
