#!/usr/bin/env bash
# Build the test binaries (and benchmark programs) here and stage them in .gpu/ (git-ignored)
# for the GPU machine, which has no Rust toolchain. Usage: scripts/gpu/build.sh [cargo test filters]
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .gpu && mkdir -p .gpu/bin
cargo test --release --no-run --message-format=json "$@" 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])
' | while read -r exe; do cp "$exe" .gpu/bin/"$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done
# c_programs compiles C against the cargo target dir: it runs here and in CI, not there
# (capi_smoke.py covers the C ABI on the GPU).
rm -f .gpu/bin/c_programs
# architecture reads the sources at their build path: a CI check, not a device test.
rm -f .gpu/bin/architecture
# CPU-only suites (the CPU solvers and the f64 reference; no device variants) stay here: CI
# runs them, and the staged folder must stay under the 64 MiB a device call carries.
rm -f .gpu/bin/cpu_* .gpu/bin/reference_*
if cargo build --release --examples -q 2>/dev/null; then
  for e in target/release/examples/*; do [ -x "$e" ] && [ -f "$e" ] && case "$e" in *-*) ;; *) mkdir -p .gpu/ex && cp "$e" .gpu/ex/;; esac; done
fi
# The C API library (libMIOpen.so) for scripts/gpu/capi_smoke.py (ctypes, torch pointers).
cargo build --release -p conflux-capi -q
mkdir -p .gpu/lib && cp target/release/libMIOpen.so .gpu/lib/
cargo build --release -p conflux-driver -q && cp target/release/conflux-driver .gpu/
# The Python package as a wheel, with pytest's wheels (the GPU machine has torch but no
# network): scripts/gpu/python_tests.sh installs them there.
if python3 -m pip --version >/dev/null 2>&1; then
  python3 -m pip wheel -q --no-deps . -w .gpu/wheels && python3 -m pip download -q pytest -d .gpu/wheels || echo "python wheel not staged"
fi
cp scripts/gpu/*.sh scripts/gpu/*.py .gpu/ 2>/dev/null || true
cp ../shared/bench/*.txt .gpu/ 2>/dev/null || true
# The 3-D layer list of torchvision's video networks (scripts/gpu/zoo3d.py).
cp bench/zoo3d.txt .gpu/
# The model-zoo yardstick (zoo.py, zoo_bwd.py and their ctypes binding) from the shared bench.
cp ../shared/bench/*.py .gpu/ 2>/dev/null || true
# Debug info and symbols are not needed there, and a device call carries at most 64 MiB.
for f in .gpu/bin/* .gpu/ex/* .gpu/conflux-driver; do strip --strip-all "$f" 2>/dev/null || true; done
for f in .gpu/lib/*; do objcopy --strip-debug "$f" 2>/dev/null || true; done
ls -la .gpu/bin .gpu/lib
du -sh .gpu
# A device call carries at most 64 MiB: the whole folder compressed (about 9 MB) goes as
# .gpu.tar.xz, unpacked there with `tar -xJf .gpu.tar.xz` (carry: [".gpu.tar.xz"]).
tar -cf - .gpu | xz -T2 -3 > .gpu.tar.xz
ls -la .gpu.tar.xz
