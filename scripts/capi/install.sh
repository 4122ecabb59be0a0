#!/usr/bin/env bash
# Build libMIOpen (release) and install it with its headers and a pkg-config file:
#   bash scripts/capi/install.sh [PREFIX]        (default PREFIX: ./dist)
# then:  PKG_CONFIG_PATH=PREFIX/lib/pkgconfig cc app.c $(pkg-config --cflags --libs MIOpen)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"

cargo build --release -p conflux-capi --manifest-path "$root/Cargo.toml"
target="$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"

install -d "$prefix/lib/pkgconfig" "$prefix/include/miopen"
install -m 755 "$target/release/libMIOpen.so" "$prefix/lib/"
install -m 644 "$target/release/libMIOpen.a" "$prefix/lib/"
install -m 644 "$root"/crates/conflux-capi/include/miopen/*.h "$prefix/include/miopen/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$root/crates/conflux-capi/MIOpen.pc.in" >"$prefix/lib/pkgconfig/MIOpen.pc"
echo "installed libMIOpen $version into $prefix"
