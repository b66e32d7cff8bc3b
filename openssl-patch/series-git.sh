#!/usr/bin/env bash
# series-git.sh: the patch stack as a git history, for rebasing and editing.
#
#   series-git.sh init DIR     DIR becomes a git repository: commit "upstream"
#                              (the verified tarball), "debian" (Debian's
#                              series), one commit per security/ patch, then
#                              one per uTLS hook patch (git am)
#   series-git.sh export DIR [OUT]
#                              writes the uTLS commits on top of the last
#                              security commit back to patches/ (or OUT):
#                              git format-patch, one file each, and series
#
# The tarball and Debian's packaging come from prepare.sh's cache and are
# verified by it (prepare.sh --stock runs first). See README.md here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?usage: series-git.sh init|export DIR}
dir=${2:?usage: series-git.sh init|export DIR}
. "$here/BASE"
git_id=(-c user.name=uTLS -c user.email=utls@invalid)

case "$cmd" in
init)
    [ ! -e "$dir" ] || { echo "series-git.sh: $dir exists; choose a new directory" >&2; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # Fetches and verifies the tarball and Debian's packaging (cached).
    bash "$here/prepare.sh" --stock "$work" >/dev/null
    mkdir -p "$dir"
    tar -C "$dir" --strip-components=1 -xzf "$(cat "$work/tarball.path")"
    cache=${UTLS_OPENSSL_CACHE:-${HOME:-/root}/.cache/utls}
    cd "$dir"
    git init -q
    git add -A && git "${git_id[@]}" commit -qm "upstream OpenSSL $UPSTREAM_VERSION"
    tar -xJf "${UTLS_DEBIAN_PATCHES:-$cache/$DEBIAN_PATCHES_TARBALL}" debian/patches
    while read -r p; do
        case "$p" in ''|'#'*) continue ;; esac
        patch -p1 --batch --fuzz=0 --quiet <"debian/patches/$p"
    done <debian/patches/series
    rm -rf debian
    git add -A && git "${git_id[@]}" commit -qm "Debian $DEBIAN_PATCHES_VERSION patch series"
    while read -r p; do
        case "$p" in ''|'#'*) continue ;; esac
        git apply "$here/security/$p"
        git add -A
        git "${git_id[@]}" commit -qm "security: $p"
    done <"$here/security/series"
    git tag utls-base
    while read -r p; do
        case "$p" in ''|'#'*) continue ;; esac
        git "${git_id[@]}" am -q --keep-cr "$here/patches/$p"
    done <"$here/patches/series"
    echo "series-git.sh: $dir: $(git rev-list --count utls-base..HEAD) uTLS commits on tag utls-base"
    ;;
export)
    outdir=${3:-$here/patches}
    mkdir -p "$outdir"
    outdir=$(cd "$outdir" && pwd)
    cd "$dir"
    git rev-parse -q --verify utls-base >/dev/null ||
        { echo "series-git.sh: $dir has no utls-base tag (made by init)" >&2; exit 1; }
    rm -f "$outdir"/*.patch
    git format-patch -q --zero-commit --no-signature -o "$outdir" utls-base..HEAD
    (cd "$outdir" && ls ./*.patch | sed 's|^\./||') >"$outdir/series"
    echo "series-git.sh: wrote $(wc -l <"$outdir/series") patches to $outdir"
    ;;
*)
    echo "usage: series-git.sh init|export DIR" >&2
    exit 2
    ;;
esac
