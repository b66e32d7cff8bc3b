#!/usr/bin/env bash
# series-roundtrip.sh OPENSSL_PATCH_DIR WORKDIR: the rebase guide's first two
# steps on the committed series. `series-git.sh init` must rebuild the whole
# stack (upstream, Debian's series, security/, the uTLS hooks with git am,
# no fuzz) and `series-git.sh export` must give back patches/ byte for byte.
set -euo pipefail
src=${1:?usage: series-roundtrip.sh OPENSSL_PATCH_DIR WORKDIR}
work=${2:?usage: series-roundtrip.sh OPENSSL_PATCH_DIR WORKDIR}
rm -rf "$work"
mkdir -p "$work"
bash "$src/series-git.sh" init "$work/tree"
bash "$src/series-git.sh" export "$work/tree" "$work/patches"
if diff -r "$src/patches" "$work/patches"; then
    echo "PASS: the exported series equals openssl-patch/patches ($(grep -vc '^#' "$src/patches/series") patches)"
else
    echo "FAIL: the series does not survive init + export unchanged (diff above)"
    exit 1
fi
