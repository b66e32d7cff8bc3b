#!/usr/bin/env bash
# check-man-install.sh BUILD_DIR HEADER: `cmake --install` the build into a
# scratch DESTDIR, then every function and mode flag of HEADER must be found
# by `man -M <installed mandir> -w` and render to a page that names it.
set -euo pipefail
build=$1
header=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A DESTDIR keeps every absolute install path (the Wireshark plugin's) inside
# the scratch directory too.
DESTDIR=$tmp/root cmake --install "$build" --prefix /opt/utls >"$tmp/install.log"
mandir=$tmp/root/opt/utls/share/man
if [ ! -d "$mandir/man3" ]; then
    cat "$tmp/install.log"
    echo "check-man-install: cmake --install put no man3/ under $mandir"
    exit 1
fi
echo "installed $(ls "$mandir/man3" | wc -l) man3 files under share/man"
/usr/bin/python3 "$here/check-man-coverage.py" --header "$header" --mandir "$mandir" --render
