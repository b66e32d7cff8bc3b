#!/usr/bin/env bash
# build-and-run.sh pkg-config|cmake SRCDIR OUTDIR LIBDIR — build an example the
# way a user would, run it, and check that it ran with the fork.
set -euo pipefail
how=$1 src=$2 out=$3 lib=$4
rm -rf "$out" && mkdir -p "$out"
name=$(basename "$src")
case "$how" in
pkg-config)
    export PKG_CONFIG_PATH=$lib/pkgconfig
    cc -Wall -Werror "$src"/*.c $(pkg-config --cflags --libs utls) -o "$out/utls-$name"
    ;;
cmake)
    cmake -S "$src" -B "$out" -G Ninja -Dutls_DIR="$lib/cmake/utls" >/dev/null
    cmake --build "$out" >/dev/null
    ;;
*) echo "unknown build method $how" >&2; exit 2 ;;
esac
ldd "$out/utls-$name" | grep -F "libssl.so.3 => $lib/libssl.so.3" ||
    { echo "the example is not linked to the fork in $lib"; ldd "$out/utls-$name"; exit 1; }
"$out/utls-$name"
