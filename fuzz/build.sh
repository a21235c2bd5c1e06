#!/usr/bin/env bash
# Builds the libFuzzer targets without SwiftPM and without touching Package.swift:
#   1. the C shims (CCurlShim, CSystemShims, CLibSecretLoader) with clang, coverage + ASan;
#   2. the library sources (Sources/ChatGPTCredential) once, as one module object with
#      -enable-testing so targets can `@testable import` internals;
#   3. one executable per fuzz/targets/<name>.swift, linked with libFuzzer's main.
# Usage: fuzz/build.sh [TARGET…]   (default: every target). Output: fuzz/.build/fuzz-<name>.
# Needs only what `make deps` installs (libsecret-1-dev, libsodium-dev, pkg-config) and the
# Swift toolchain (swiftc, and the clang that ships with it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${FUZZ_BUILD_DIR:-$ROOT/fuzz/.build}
SWIFTC=${SWIFTC:-$(command -v swiftc 2>/dev/null || echo /opt/swift/usr/bin/swiftc)}
CLANG=${CLANG:-$(dirname "$SWIFTC")/clang}
[ -x "$CLANG" ] || CLANG=$(command -v clang)
mkdir -p "$OUT/modules/CCurlShim" "$OUT/modules/CSystemShims"

PKG_CFLAGS=$(pkg-config --cflags libsecret-1 libsodium)
PKG_LIBS=$(pkg-config --libs libsecret-1 libsodium)
XCC=()
for f in $PKG_CFLAGS; do XCC+=(-Xcc "$f"); done

# SwiftPM generates module maps for C targets; do the same here.
cat >"$OUT/modules/CCurlShim/module.modulemap" <<MAP
module CCurlShim { header "$ROOT/Sources/CCurlShim/include/ccurl_shim.h"
  export * }
MAP
cat >"$OUT/modules/CSystemShims/module.modulemap" <<MAP
module CSystemShims { header "$ROOT/Sources/CSystemShims/include/CSystemShims.h"
  export * }
MAP
INCLUDES=(-I "$ROOT/Sources/CLibSecret" -I "$ROOT/Sources/CSodium"
          -I "$OUT/modules/CCurlShim" -I "$OUT/modules/CSystemShims" -I "$OUT")

SAN=(-sanitize=fuzzer,address)
LIB_SOURCES=$(find "$ROOT/Sources/ChatGPTCredential" -name '*.swift' | sort)
C_SOURCES=("$ROOT/Sources/CCurlShim/ccurl_shim.c" "$ROOT/Sources/CSystemShims/shims.c"
           "$ROOT/Sources/CLibSecretLoader/libsecret_loader.c")

# Rebuild the library object only when a source changed.
STAMP_INPUTS=$(cat $LIB_SOURCES "${C_SOURCES[@]}" "$0" | cksum)
if [ ! -f "$OUT/lib.stamp" ] || [ "$(cat "$OUT/lib.stamp")" != "$STAMP_INPUTS" ]; then
    echo "== building library (fuzz instrumented)" >&2
    "$CLANG" -c -O1 -g -fsanitize=fuzzer-no-link,address -I "$ROOT/Sources/CCurlShim/include" \
        "$ROOT/Sources/CCurlShim/ccurl_shim.c" -o "$OUT/ccurl_shim.o"
    "$CLANG" -c -O1 -g -fsanitize=fuzzer-no-link,address -I "$ROOT/Sources/CSystemShims/include" \
        "$ROOT/Sources/CSystemShims/shims.c" -o "$OUT/shims.o"
    # shellcheck disable=SC2086
    "$CLANG" -c -O1 -g -fsanitize=fuzzer-no-link,address $PKG_CFLAGS \
        "$ROOT/Sources/CLibSecretLoader/libsecret_loader.c" -o "$OUT/libsecret_loader.o"
    # shellcheck disable=SC2086
    "$SWIFTC" -O -g "${SAN[@]}" -parse-as-library -enable-testing -swift-version 5 \
        -module-name ChatGPTCredential -wmo -num-threads 0 \
        "${INCLUDES[@]}" "${XCC[@]}" \
        -emit-module -emit-module-path "$OUT/ChatGPTCredential.swiftmodule" \
        -c $LIB_SOURCES -o "$OUT/ChatGPTCredential.o"
    echo "$STAMP_INPUTS" >"$OUT/lib.stamp"
fi

if [ $# -gt 0 ]; then TARGETS=("$@"); else
    TARGETS=(); for f in "$ROOT"/fuzz/targets/*.swift; do n=$(basename "$f" .swift); [ "$n" = Common ] || TARGETS+=("$n"); done
fi
for t in "${TARGETS[@]}"; do
    src="$ROOT/fuzz/targets/$t.swift"
    [ -f "$src" ] || { echo "no such fuzz target: $t" >&2; exit 2; }
    bin="$OUT/fuzz-$t"
    if [ -f "$bin" ] && [ "$bin" -nt "$src" ] && [ "$bin" -nt "$OUT/ChatGPTCredential.o" ] && [ "$bin" -nt "$OUT/libsecret_loader.o" ] && [ "$bin" -nt "$ROOT/fuzz/targets/Common.swift" ]; then continue; fi
    echo "== building fuzz-$t" >&2
    # shellcheck disable=SC2086
    "$SWIFTC" -O -g "${SAN[@]}" -use-ld=lld -parse-as-library -swift-version 5 -module-name "Fuzz_$t" \
        "${INCLUDES[@]}" "${XCC[@]}" \
        "$src" "$ROOT/fuzz/targets/Common.swift" \
        "$OUT/ChatGPTCredential.o" "$OUT/ccurl_shim.o" "$OUT/shims.o" "$OUT/libsecret_loader.o" \
        $PKG_LIBS -ldl -o "$bin"
done
