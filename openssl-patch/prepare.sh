#!/usr/bin/env bash
# prepare.sh OUTDIR — fetch, verify, unpack, patch and configure the pinned
# OpenSSL source for the uTLS fork.
#
# Result: OUTDIR/openssl-<ver>/ (patched tree, configured out of tree in
# build_shared/ exactly as Debian does) and OUTDIR/fork.cmake (the libssl
# source list and per-file flags taken from the configured Makefile, read by
# openssl-patch/CMakeLists.txt). Re-running is cheap: every step is stamped.
#
# Environment:
#   UTLS_OPENSSL_TARBALL  use this local tarball instead of fetching one
#   UTLS_OPENSSL_CACHE    where a fetched tarball is kept (default ~/.cache/utls)
#   UTLS_BASE_FILE        the BASE file to read (default: next to this script;
#                         3.5/BASE for the second base, make BASE=3.5)
#   UTLS_PATCH_DIR        the patch series to apply (default: patches/ next to
#                         the BASE file)
#   UTLS_DEBIAN_PATCHES   use this local debian.tar.xz instead of fetching one
#   UTLS_DEBIAN_DSC       ... and this .dsc (default: next to it)
#   UTLS_SECURITY_DIR     the security series to apply (default: security/ next
#                         to the BASE file)
#   UTLS_PREPARE_VERIFY_ONLY=1  stop after the tarball is verified (tests)
#
# With --stock OUTDIR it prepares the same source without our series and
# without our sources: upstream + Debian's series + openssl-patch/security/,
# configured with Debian's own target and build flags in
# OUTDIR/openssl-<ver>-stock/build_shared (tests/parity builds the stock
# libssl.so.3 there and compares it with the system's).
#
# The order of the series is the distribution's: Debian's own patches
# (fetched and verified, never committed), then the security fixes of the
# Debian revision the fork matches (security/, ours, one per CVE), then the
# uTLS hooks (patches/).
#
# A BASE file may set (the 3.5 base does, openssl-patch/3.5/BASE):
#   BUILD_LIBCRYPTO=1   no system libcrypto of that version exists: the stock
#                       tree also builds libcrypto.so.3 (openssl-patch/
#                       CMakeLists.txt), and the system one is not checked
#   GLUE_DIR            the glue folder linked as ssl/utls (default lib/glue)
#   DEBIAN_POOL_URI     fetch from this pool directory instead of asking apt
#   DEBIAN_DISTS_URI    the suite whose signed InRelease (and Sources.xz)
#                       verify the tarball, fetched here instead of apt's lists
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
stock=0
if [ "${1:-}" = --stock ]; then
    stock=1
    shift
fi
out=${1:?usage: prepare.sh [--stock] OUTDIR}
base_file=${UTLS_BASE_FILE:-$here/BASE}
base_dir=$(cd "$(dirname "$base_file")" && pwd)
patch_dir=${UTLS_PATCH_DIR:-$base_dir/patches}

die() {
    printf 'prepare.sh: error: %s\n' "$1" >&2
    shift
    for line in "$@"; do printf '  %s\n' "$line" >&2; done
    exit 1
}
note() { printf 'prepare.sh: %s\n' "$*"; }

[ -r "$base_file" ] || die "cannot read $base_file"
# shellcheck disable=SC1090
. "$base_file"
for v in UPSTREAM_VERSION ORIG_TARBALL ORIG_SHA256 DEBIAN_VERSION MIN_LIBCRYPTO CONFIGURE_OPTIONS \
    DEBIAN_PATCHES_VERSION DEBIAN_PATCHES_TARBALL DEBIAN_PATCHES_SHA256 DEBIAN_DSC DEBIAN_DSC_SHA256 \
    DEBIAN_CONFIGURE_OPTIONS DEBIAN_BUILD_MAINT_OPTIONS; do
    [ -n "${!v:-}" ] || die "$base_file does not set $v"
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
tree=$out/openssl-$UPSTREAM_VERSION
[ "$stock" = 1 ] && tree=$out/openssl-$UPSTREAM_VERSION-stock
security_dir=${UTLS_SECURITY_DIR:-$base_dir/security}
# Two builds configuring the same tree at once (parallel cmake runs) would
# unpack over each other, and re-unpacking under running upstream tests
# (tests/upstream, which holds this lock shared while it runs) would pull the
# tree from under them: take it exclusively.
exec 9>"$out/.utls-openssl.lock"
flock -x 9

# --- 1. The system libcrypto must be at least the base version -------------
# The fork's libssl calls into the system libcrypto.so.3; an older one may lack
# fixes the ssl/ code of the base release relies on.
check_libcrypto() {
    local have
    have=$(pkg-config --modversion libcrypto 2>/dev/null || true)
    [ -n "$have" ] || die "no libcrypto development files found (pkg-config libcrypto)" \
        "install them: apt-get install -y libssl-dev libssl3"
    if [ "$(printf '%s\n%s\n' "$MIN_LIBCRYPTO" "$have" | sort -V | head -1)" != "$MIN_LIBCRYPTO" ]; then
        die "the installed libcrypto is $have, older than $MIN_LIBCRYPTO which this fork is based on" \
            "upgrade it: apt-get update && apt-get install -y libssl3 libssl-dev openssl" \
            "or pin an older base in openssl-patch/BASE"
    fi
    note "system libcrypto $have (>= $MIN_LIBCRYPTO)"
}

# --- 2. Find or fetch the tarball -------------------------------------------
cache=${UTLS_OPENSSL_CACHE:-${HOME:-/root}/.cache/utls}

# orig_uri: where Debian's archive keeps the orig tarball, as apt says (the
# Debian revision BASE names, or another revision of the same upstream
# release: they share the orig tarball and the pool directory).
orig_uri() {
    local uri
    uri=$(apt-get source --print-uris "openssl=$DEBIAN_VERSION" 2>/dev/null |
        awk -v f="$ORIG_TARBALL" '$2 == f { gsub("\047", "", $1); print $1 }' | head -1)
    [ -n "$uri" ] || uri=$(apt-get source --print-uris openssl 2>/dev/null |
        awk -v f="$ORIG_TARBALL" '$2 == f { gsub("\047", "", $1); print $1 }' | head -1)
    echo "$uri"
}

# fetch_file NAME SHA256 OVERRIDE_VAR: NAME from the cache, or from the
# archive's pool directory of the orig tarball (apt-helper checks the pinned
# SHA-256 while downloading). Prints the local path.
fetch_file() {
    local name=$1 sha=$2 override=$3 dest=$cache/$1 dir uri
    if [ -f "$dest" ] && [ "$(sha256sum <"$dest" | cut -d' ' -f1)" = "$sha" ]; then
        echo "$dest"
        return
    fi
    mkdir -p "$cache"
    if [ -n "${DEBIAN_POOL_URI:-}" ]; then
        dir=$DEBIAN_POOL_URI
    else
        command -v apt-get >/dev/null || die "no apt-get to fetch $name" \
            "put a copy at $dest or set $override=/path/to/$name"
        ensure_deb_src
        uri=$(orig_uri)
        [ -n "$uri" ] || die "Debian's archive no longer offers $ORIG_TARBALL (OpenSSL $UPSTREAM_VERSION)" \
            "old versions leave the security pool; put a verified copy of $name at $dest" \
            "or set $override=/path/to/$name, or move openssl-patch/BASE to a newer 3.0.x"
        dir=${uri%/*}
    fi
    uri=$dir/$(printf '%s' "$name" | sed 's/~/%7e/g')
    note "fetching $uri" >&2
    /usr/lib/apt/apt-helper download-file "$uri" "$dest.part" "SHA256:$sha" >&2 ||
        die "download of $uri failed or did not match the pinned SHA-256" \
            "put a verified copy at $dest or set $override"
    mv "$dest.part" "$dest"
    echo "$dest"
}

# Debian images ship without deb-src entries; add them (same mirrors and key).
ensure_deb_src() {
    if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return
    fi
    [ -w /etc/apt/sources.list.d ] || die "apt has no deb-src entries and this user cannot add them" \
        "run as root, or set UTLS_OPENSSL_TARBALL=/path/to/$ORIG_TARBALL"
    note "adding deb-src entries to /etc/apt/sources.list.d/utls-deb-src.sources" >&2
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
        >/etc/apt/sources.list.d/utls-deb-src.sources
    apt-get update -q >&2
}

# Debian's packaging of the same upstream version, the .dsc (signed by its
# uploader) and the .debian.tar.xz that holds debian/patches/, lives in the
# same pool directory as the orig tarball: fetch_file gets them.

# The .dsc is signed by the Debian developer who uploaded it; debian-keyring
# (an apt package, itself verified through the archive's signed metadata)
# holds that key. The .dsc lists the SHA-256 of the .debian.tar.xz.
verify_debian_patches() {
    local tarxz=$1 dsc=$2 got kr keyrings=()
    got=$(sha256sum <"$tarxz" | cut -d' ' -f1)
    [ "$got" = "$DEBIAN_PATCHES_SHA256" ] ||
        die "SHA-256 of $tarxz is $got, expected $DEBIAN_PATCHES_SHA256 (openssl-patch/BASE)" \
            "the file is corrupted or was tampered with: delete it and fetch it again"
    grep -q "^ $DEBIAN_PATCHES_SHA256 [0-9]* $DEBIAN_PATCHES_TARBALL\$" "$dsc" ||
        die "$dsc does not list $DEBIAN_PATCHES_TARBALL with the pinned SHA-256"
    for kr in /usr/share/keyrings/debian-keyring.gpg /usr/share/keyrings/debian-maintainers.gpg; do
        [ -r "$kr" ] && keyrings+=(--keyring "$kr")
    done
    if [ ${#keyrings[@]} -eq 0 ] || ! command -v gpgv >/dev/null; then
        note "no debian-keyring here: $DEBIAN_PATCHES_TARBALL verified by the pinned SHA-256 only"
        return
    fi
    gpgv "${keyrings[@]}" "$dsc" >"$out/dsc-verify.log" 2>&1 ||
        die "the uploader's signature on $dsc does not verify against debian-keyring" "$(tail -3 "$out/dsc-verify.log")"
    note "verified $DEBIAN_PATCHES_TARBALL: pinned SHA-256, listed in $DEBIAN_DSC, $(sed -n 's/^gpgv: \(Good signature from "[^"]*"\).*/\1/p' "$out/dsc-verify.log" | head -1)"
}

# --- 3. Verify ---------------------------------------------------------------
verify_tarball() {
    local tgz=$1 verdat major minor patch got
    [ -f "$tgz" ] || die "tarball $tgz does not exist"
    # The version check comes first: it gives the more useful message.
    verdat=$(tar -xzOf "$tgz" --wildcards '*/VERSION.dat' 2>/dev/null) ||
        die "$tgz is not a readable OpenSSL source tarball (corrupted or truncated?)" \
            "delete it and run the build again to fetch a fresh copy"
    major=$(sed -n 's/^MAJOR=//p' <<<"$verdat")
    minor=$(sed -n 's/^MINOR=//p' <<<"$verdat")
    patch=$(sed -n 's/^PATCH=//p' <<<"$verdat")
    [ "$major.$minor.$patch" = "$UPSTREAM_VERSION" ] ||
        die "$tgz is OpenSSL $major.$minor.$patch, but openssl-patch/BASE pins $UPSTREAM_VERSION" \
            "use the tarball of OpenSSL $UPSTREAM_VERSION, or move BASE (and re-check the patches) to $major.$minor.$patch"
    got=$(sha256sum <"$tgz" | cut -d' ' -f1)
    [ "$got" = "$ORIG_SHA256" ] ||
        die "SHA-256 of $tgz is $got, expected $ORIG_SHA256 (openssl-patch/BASE)" \
            "the file is corrupted or was tampered with: delete it and fetch it again"
    note "verified $tgz: OpenSSL $UPSTREAM_VERSION, SHA-256 $ORIG_SHA256"
    verify_signed_metadata
}

# Debian's chain of trust: InRelease (signed by debian-archive-keyring) lists the
# SHA-256 of main/source/Sources, which lists the SHA-256 of the orig tarball.
# apt verified this when it updated; we check it again from its cached lists.
verify_signed_metadata() {
    local lists=/var/lib/apt/lists keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    local src inrel sources_sha listed
    if ! command -v gpgv >/dev/null || [ ! -r "$keyring" ]; then
        note "signed archive metadata not checkable here (no gpgv or keyring): relying on the pinned SHA-256"
        return
    fi
    if [ -n "${DEBIAN_DISTS_URI:-}" ]; then
        verify_suite_metadata "$keyring"
        return
    fi
    for src in "$lists"/*_main_source_Sources*; do
        [ -e "$src" ] || continue
        # Not `| grep -q`: an early exit would SIGPIPE apt-helper under pipefail.
        grep -q " $ORIG_SHA256 [0-9]* $ORIG_TARBALL\$" \
            < <(/usr/lib/apt/apt-helper cat-file "$src" 2>/dev/null) || continue
        inrel=${src%%_main_source_Sources*}_InRelease
        [ -r "$inrel" ] || continue
        gpgv --keyring "$keyring" "$inrel" >/dev/null 2>&1 ||
            die "the signature on $inrel does not verify against $keyring"
        sources_sha=$(/usr/lib/apt/apt-helper cat-file "$src" | sha256sum | cut -d' ' -f1)
        listed=$(awk '/^SHA256:/ { s = 1; next } /^[A-Za-z]/ { s = 0 } s && $3 == "main/source/Sources" { print $1 }' "$inrel")
        [ "$sources_sha" = "$listed" ] ||
            die "$src does not match the SHA-256 that the signed $inrel lists for it"
        note "verified through Debian's signed metadata: $(basename "$inrel")"
        return
    done
    note "Debian's signed metadata does not list $ORIG_TARBALL here (run apt-get update?): relying on the pinned SHA-256"
}

# verify_suite_metadata KEYRING: the same chain for a suite apt does not know
# here (trixie on Debian 12): its InRelease and main/source/Sources.xz are
# fetched into the cache (kept: the tarball stays verifiable after the suite
# moves on), InRelease's signature checked with gpgv, Sources.xz against the
# SHA-256 InRelease lists, the tarball against Sources.xz.
verify_suite_metadata() {
    local keyring=$1 dir inrel sources got listed
    dir=$cache/dists/$(printf '%s' "$DEBIAN_DISTS_URI" | sed 's|^[a-z]*://||; s|[/:]|_|g')
    inrel=$dir/InRelease
    sources=$dir/main_source_Sources.xz
    if [ ! -s "$inrel" ] || [ ! -s "$sources" ] ||
        ! xzcat "$sources" 2>/dev/null | grep -q " $ORIG_SHA256 [0-9]* $ORIG_TARBALL\$"; then
        mkdir -p "$dir"
        /usr/lib/apt/apt-helper download-file "$DEBIAN_DISTS_URI/InRelease" "$inrel.part" >/dev/null 2>&1 &&
            /usr/lib/apt/apt-helper download-file "$DEBIAN_DISTS_URI/main/source/Sources.xz" "$sources.part" >/dev/null 2>&1 || {
            rm -f "$inrel.part" "$sources.part"
            note "cannot fetch $DEBIAN_DISTS_URI/InRelease: relying on the pinned SHA-256"
            return
        }
        mv "$inrel.part" "$inrel"
        mv "$sources.part" "$sources"
    fi
    gpgv --keyring "$keyring" "$inrel" >/dev/null 2>&1 ||
        die "the signature on $inrel does not verify against $keyring"
    got=$(sha256sum <"$sources" | cut -d' ' -f1)
    listed=$(awk '/^SHA256:/ { s = 1; next } /^[A-Za-z]/ { s = 0 } s && $3 == "main/source/Sources.xz" { print $1 }' "$inrel")
    [ "$got" = "$listed" ] || die "$sources does not match the SHA-256 that the signed $inrel lists for it"
    # Not `| grep -q`: an early exit would SIGPIPE xzcat under pipefail. A
    # suite that has moved on (a point release dropped this revision) no
    # longer lists it: as for the 3.0 base, the pinned SHA-256 then stands
    # alone (the cache keeps the metadata that listed it).
    if ! grep -q " $ORIG_SHA256 [0-9]* $ORIG_TARBALL\$" < <(xzcat "$sources") ||
        ! grep -q " $DEBIAN_DSC_SHA256 [0-9]* $DEBIAN_DSC\$" < <(xzcat "$sources"); then
        note "Debian's signed $DEBIAN_DISTS_URI metadata does not list $ORIG_TARBALL and $DEBIAN_DSC with the pinned SHA-256s: relying on the pinned SHA-256"
        return
    fi
    note "verified through Debian's signed metadata: $DEBIAN_DISTS_URI/InRelease (gpgv), Sources.xz lists $ORIG_TARBALL and $DEBIAN_DSC"
}

[ "${BUILD_LIBCRYPTO:-0}" = 1 ] || check_libcrypto
if [ -n "${UTLS_OPENSSL_TARBALL:-}" ]; then
    tarball=$UTLS_OPENSSL_TARBALL
else
    tarball=$(fetch_file "$ORIG_TARBALL" "$ORIG_SHA256" UTLS_OPENSSL_TARBALL)
fi
verify_tarball "$tarball"
echo "$tarball" >"$out/tarball.path"
[ "${UTLS_PREPARE_VERIFY_ONLY:-0}" = 1 ] && exit 0

if [ -n "${UTLS_DEBIAN_PATCHES:-}" ]; then
    debian_tarxz=$UTLS_DEBIAN_PATCHES
    debian_dsc=${UTLS_DEBIAN_DSC:-$(dirname "$debian_tarxz")/$DEBIAN_DSC}
else
    debian_tarxz=$(fetch_file "$DEBIAN_PATCHES_TARBALL" "$DEBIAN_PATCHES_SHA256" UTLS_DEBIAN_PATCHES)
    debian_dsc=$(fetch_file "$DEBIAN_DSC" "$DEBIAN_DSC_SHA256" UTLS_DEBIAN_DSC)
fi
verify_debian_patches "$debian_tarxz" "$debian_dsc"
printf '%s\n%s\n' "$debian_tarxz" "$debian_dsc" >"$out/debian-patches.path"

# --- 4. Unpack and patch (once per tarball + patch series) ------------------
series=$patch_dir/series
[ -r "$series" ] || die "no patch series at $series"
[ -r "$security_dir/series" ] || die "no security series at $security_dir/series"
series_id() { (cd "$1" && cat series $(grep -v '^#' series)); }
patch_id=$( (echo "$ORIG_SHA256 $DEBIAN_PATCHES_SHA256 stock=$stock"; series_id "$security_dir"
    [ "$stock" = 1 ] || series_id "$patch_dir") | sha256sum | cut -d' ' -f1)

# apply_series DIR SERIES LABEL: apply every patch SERIES names, in order,
# with no fuzz: a patch that no longer fits its context must be rebased, not
# guessed into place.
apply_series() {
    local dir=$1 list=$2 label=$3 p
    while read -r p; do
        case "$p" in ''|'#'*) continue ;; esac
        [ -f "$dir/$p" ] || die "$label series names $p, which does not exist in $dir"
        note "applying $label $p"
        patch -d "$tree.tmp" -p1 --forward --batch --fuzz=0 --quiet <"$dir/$p" >"$out/patch.log" 2>&1 ||
            die "$label patch $p does not apply to OpenSSL $UPSTREAM_VERSION" "$(tail -5 "$out/patch.log")" \
                "rebase it on the pinned base (see openssl-patch/README.md)"
    done <"$list"
}

if [ "$(cat "$tree/.utls-patched" 2>/dev/null)" != "$patch_id" ]; then
    note "unpacking into $tree"
    rm -rf "$tree" "$tree.tmp"
    mkdir -p "$tree.tmp"
    tar -C "$tree.tmp" --strip-components=1 -xzf "$tarball"
    tar -C "$tree.tmp" -xJf "$debian_tarxz" debian/patches debian/changelog
    apply_series "$tree.tmp/debian/patches" "$tree.tmp/debian/patches/series" "Debian $DEBIAN_PATCHES_VERSION"
    apply_series "$security_dir" "$security_dir/series" security
    if [ "$stock" = 1 ]; then
        mv "$tree.tmp" "$tree"
        echo "$patch_id" >"$tree/.utls-patched"
    fi
fi

# --- stock: configure as Debian does and stop --------------------------------
if [ "$stock" = 1 ]; then
    bs=$tree/build_shared
    conf_id=$( (echo "$patch_id"; echo "$DEBIAN_CONFIGURE_OPTIONS $DEBIAN_BUILD_MAINT_OPTIONS") | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$bs/.utls-configured" 2>/dev/null)" != "$conf_id" ]; then
        note "configuring stock OpenSSL $UPSTREAM_VERSION as Debian does ($DEBIAN_CONFIGURE_OPTIONS)"
        rm -rf "$bs"
        mkdir -p "$bs"
        # debian/rules: dh exports dpkg-buildflags' CFLAGS, CPPFLAGS and LDFLAGS.
        # shellcheck disable=SC2086
        (cd "$bs" && eval "$(DEB_BUILD_MAINT_OPTIONS="$DEBIAN_BUILD_MAINT_OPTIONS" dpkg-buildflags --export=sh)" &&
            ../Configure $DEBIAN_CONFIGURE_OPTIONS >"$out/configure-stock.log" 2>&1) ||
            die "OpenSSL's Configure failed for the stock build" "$(tail -5 "$out/configure-stock.log")"
        (cd "$bs" && make -s build_generated libssl.ld >"$out/generate-stock.log" 2>&1) ||
            die "generating OpenSSL's headers failed (stock)" "$(tail -5 "$out/generate-stock.log")"
        echo "$conf_id" >"$bs/.utls-configured"
    fi
    note "ready: stock $tree"
    exit 0
fi

if [ "$(cat "$tree/.utls-patched" 2>/dev/null)" != "$patch_id" ]; then
    apply_series "$patch_dir" "$series" uTLS
    # Our own sources are linked in, never copied: the tree always builds the
    # files in the repository. The patched ssl/build.info compiles them.
    # The glue (the only uTLS code that includes ssl_local.h) sits in ssl/,
    # where the hook patches include "utls/utls_hooks.h"; the runtime is
    # linked beside utls-core/, its glue/ compiled through ssl/utls only.
    ln -s "$repo/${GLUE_DIR:-lib/glue}" "$tree.tmp/ssl/utls"
    ln -s "$repo/lib" "$tree.tmp/utls-lib"
    ln -s "$repo/core" "$tree.tmp/utls-core"
    ln -s "$repo/provider" "$tree.tmp/utls-provider"
    mv "$tree.tmp" "$tree"
    echo "$patch_id" >"$tree/.utls-patched"
fi
# The public headers (<openssl/utls.h> and its parts utls_*.h), linked on
# every run: a part added since the tree was patched is linked too.
for h in "$repo"/include/openssl/utls*.h; do
    ln -sfn "$h" "$tree/include/openssl/$(basename "$h")"
done

# --- 5. Configure out of tree, as Debian does (build_shared/) ---------------
# Configure runs again when the options or the set of our source files change,
# headers included: a header that moved would otherwise stay named in the
# dependencies `make depend` merged into the Makefile ("No rule to make target").
our_files=$(cd "$repo" && shopt -s nullglob && printf '%s\n' lib/*/*.c lib/*/*.h ${GLUE_DIR:+$GLUE_DIR/*.[ch]} include/openssl/utls*.h core/*.c core/src/*.c \
    core/include/utls/*.h provider/aeadsearch_client.c provider/include/utls/*.h | sort)
conf_id=$( (echo "$patch_id"; echo "$CONFIGURE_OPTIONS"; echo "$our_files") | sha256sum | cut -d' ' -f1)
bs=$tree/build_shared
if [ "$(cat "$bs/.utls-configured" 2>/dev/null)" != "$conf_id" ]; then
    note "configuring OpenSSL $UPSTREAM_VERSION ($CONFIGURE_OPTIONS)"
    mkdir -p "$bs"
    # shellcheck disable=SC2086
    (cd "$bs" && ../Configure $CONFIGURE_OPTIONS >"$out/configure.log" 2>&1) ||
        die "OpenSSL's Configure failed" "$(tail -5 "$out/configure.log")"
    (cd "$bs" && make -s build_generated libssl.ld >"$out/generate.log" 2>&1) ||
        die "generating OpenSSL's headers failed" "$(tail -5 "$out/generate.log")"
    echo "$conf_id" >"$bs/.utls-configured"
fi

# --- 6. Tell CMake what libssl is made of -----------------------------------
# The configured Makefile is the authority: the objects of libssl.so.3, each
# one's source, and the extra flags its rule adds (include dirs, -DAES_ASM).
fork_cmake=$out/fork.cmake
# make expands LIB_CPPFLAGS and the shell removes one level of quoting, which
# leaves exactly the arguments the compiler would get.
cppflags=$(cd "$bs" && make -s -f Makefile -f <(printf 'utls-print-cppflags:\n\t@echo $(LIB_CPPFLAGS)\n') utls-print-cppflags)
perl - "$bs" "$cppflags" >"$fork_cmake.tmp" <<'PERL'
use strict;
my ($bs, $cppflags) = @ARGV;
open(my $mk, '<', "$bs/Makefile") or die "cannot read $bs/Makefile";
my @lines = <$mk>;
close $mk;
my $text = join('', @lines);
$text =~ s/\\\n/ /g;
my ($objs) = $text =~ /^libssl\.so\.3:([^\n]*)/m or die "no libssl.so.3 rule";
print "# Generated by openssl-patch/prepare.sh from $bs/Makefile\n";
print "set(FORK_BUILD_DIR \"$bs\")\n";
# -DNAME="value" becomes a CMake definition NAME="value" (CMake quotes it).
my @defs = map { s/^-D//r } grep { /^-D/ } split ' ', $cppflags;
print "set(FORK_DEFINES\n", (map { '    "' . s/"/\\"/gr . "\"\n" } @defs), ")\n";
print "set(FORK_SOURCES\n";
my @flags;
for my $o (grep { /\.o$/ } split ' ', $objs) {
    my ($src, $cmd) = $text =~ /^\Q$o\E: (\S+)[^\n]*\n\t([^\n]*)/m or die "no rule for $o";
    my @extra = grep { /^-[ID]/ } split ' ', ($cmd =~ /\$\(CC\)(.*?)\$\(LIB_CFLAGS\)/)[0];
    @extra = map { s/^-I(?!\/)/-I$bs\//r } @extra;
    print "    \"$bs/$src\"\n";
    push @flags, "set_source_files_properties(\"$bs/$src\" PROPERTIES COMPILE_OPTIONS \"" . join(';', @extra) . "\")\n";
}
print ")\n", @flags;
PERL
mv "$fork_cmake.tmp" "$fork_cmake"
note "ready: $tree (libssl sources listed in $fork_cmake)"
