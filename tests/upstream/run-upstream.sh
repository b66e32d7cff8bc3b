#!/usr/bin/env bash
# run-upstream.sh — OpenSSL's own libssl tests, run against the uTLS fork.
#
#   run-upstream.sh build --bld DIR --fork LIB --logs DIR [--jobs N] RECIPE...
#       Builds, with OpenSSL's own Makefile in DIR (the configured build_shared/
#       of the patched tree), exactly the programs, engines and providers the
#       given recipes need, then installs LIB (the CMake-built fork) as
#       DIR/libssl.so.3. The tree's own libssl.so.3 is never linked: make runs
#       with `-o libssl.so.3`, so the fork stays in place and nothing is
#       relinked because of it. Stamped: a second run with the same inputs
#       does not call make at all.
#
#   run-upstream.sh run --bld DIR --fork LIB --logs DIR [--static-ok] RECIPE
#       Runs one recipe through OpenSSL's harness (test/run_tests.pl, as
#       `make test TESTS=RECIPE V=0` would) and fails unless it passed and was
#       not skipped. Every process the recipe starts is traced with
#       LD_DEBUG=libs: the test fails unless each libssl.so.3 loaded is the
#       fork (byte-identical to LIB, exporting UTLS_version@@UTLS_0.1).
#       --static-ok: the recipe's programs link libssl.a (the patched tree's
#       code) and may load no shared libssl at all.
#       --shadow: run in LOGS/shadow, a build directory made of links to DIR's
#       programs but with LIB as its libssl.so.3, so that a variant of the
#       fork (tests/upstream's deliberately broken one) can be tested while
#       other recipes run against the real fork in DIR.
#
# Environment: UTLS_UPSTREAM_KEEP_LD=1 keeps the LD_DEBUG traces of passing runs.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
self=$here/$(basename "$0")

die() { printf 'run-upstream.sh: error: %s\n' "$1" >&2; shift; for l in "$@"; do printf '  %s\n' "$l" >&2; done; exit 1; }
note() { printf 'run-upstream.sh: %s\n' "$*"; }

mode=${1:-}; shift || true
bld= fork= logs= jobs=$(nproc 2>/dev/null || echo 2) static_ok=0 shadow=0
recipes=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bld) bld=$2; shift 2 ;;
        --fork) fork=$2; shift 2 ;;
        --logs) logs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --static-ok) static_ok=1; shift ;;
        --shadow) shadow=1; shift ;;
        -*) die "unknown option $1" ;;
        *) recipes+=("$1"); shift ;;
    esac
done
case "$mode" in build|run) ;; *) die "usage: run-upstream.sh build|run --bld DIR --fork LIB --logs DIR RECIPE..." ;; esac
[ -n "$bld" ] && [ -f "$bld/Makefile" ] && [ -f "$bld/configdata.pm" ] ||
    die "--bld '$bld' is not a configured OpenSSL build directory" \
        "run cmake (openssl-patch/prepare.sh configures build/openssl/openssl-*/build_shared)"
[ -n "$fork" ] && [ -f "$fork" ] || die "--fork '$fork': the fork's libssl.so.3 does not exist (build the utls_ssl target)"
[ -n "$logs" ] || die "--logs is required"
[ ${#recipes[@]} -gt 0 ] || die "no recipe given"
bld=$(cd "$bld" && pwd)
src=$(cd "$bld/.." && pwd)
fork=$(readlink -f "$fork")
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
export LC_ALL=C

# The fork exports UTLS_version under its own node; upstream's libssl does not.
# (grep reads everything: an early exit would SIGPIPE readelf under pipefail.)
is_fork() { readelf --dyn-syms --wide "$1" 2>/dev/null | grep -c ' UTLS_version@@UTLS_0\.1$' >/dev/null; }
is_fork "$fork" || die "$fork does not export UTLS_version@@UTLS_0.1: not the uTLS fork"

recipe_file() {
    local f
    f=$(ls "$src"/test/recipes/[0-9][0-9]-"$1".t 2>/dev/null | head -1)
    [ -n "$f" ] || die "OpenSSL $(basename "$src") has no recipe $1 (test/recipes/NN-$1.t)"
    echo "$f"
}

# ---------------------------------------------------------------------------
do_build() {
    local t0 targets=() progs r f t key stamp=$bld/.utls-upstream-stamp
    t0=$(date +%s)
    # What the recipes run: test programs (test([...]) and simple_test(...)),
    # and, for everything, the openssl app, the engines (TLSProxy drives
    # s_server/s_client with -engine ossltest), the providers and the wrappers.
    for r in "${recipes[@]}"; do
        f=$(recipe_file "$r")
        progs=$(perl -ne 'print "test/$1\n" while /\btest\(\[\s*["\x27](\w+)["\x27]/g;
                          print "test/$1\n" while /simple_test\([^,]+,\s*["\x27](\w+)["\x27]/g' "$f")
        for p in $progs; do
            grep -q "^$p:" "$bld/Makefile" || die "$r runs $p, which OpenSSL's Makefile does not build"
            targets+=("$p")
        done
    done
    targets+=(apps/openssl build_modules_nodep link-utils util/wrap.pl util/shlib_wrap.sh libssl.a libcrypto.a libcrypto.so)
    mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -u)
    # tls13secretstest is linked by link_tls13secretstest (uTLS hook mocks);
    # make builds its objects.
    local secrets=0 mk_targets=()
    for t in "${targets[@]}"; do
        if [ "$t" = test/tls13secretstest ]; then
            secrets=1
            mk_targets+=(crypto/tls13secretstest-bin-packet.o ssl/tls13secretstest-bin-tls13_enc.o
                         test/tls13secretstest-bin-tls13secretstest.o test/libtestutil.a)
        else
            mk_targets+=("$t")
        fi
    done

    # Inputs of the build: the patched+configured tree (its stamps), our sources
    # compiled into the tree's libssl.a (followed through the ssl/utls and
    # utls-lib and utls-core links), this script and the target list.
    key=$( {
        cat "$src/.utls-patched" "$bld/.utls-configured" 2>/dev/null
        sha256sum "$self" "$here/tls13secretstest-mocks.c"
        printf '%s\n' "${targets[@]}"
        (cd "$src" && find -L ssl/utls utls-lib utls-core include/openssl/utls*.h -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null |
            sort | xargs -r sha256sum)
    } | sha256sum | cut -d' ' -f1)

    install_fork
    local missing=0
    for t in "${targets[@]}"; do
        case "$t" in build_*|link-utils) ;; *) [ -e "$bld/$t" ] || missing=1 ;; esac
    done
    if [ "$missing" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
        note "OpenSSL test programs up to date (stamp $stamp): nothing rebuilt"
    else
        note "building ${#targets[@]} targets of OpenSSL's Makefile in $bld with make -j$jobs (log: $logs/build.log)"
        rm -f "$stamp"
        if ! ( cd "$bld" && make -s build_generated && make -s depend &&
               make -o libssl.so.3 -j"$jobs" "${mk_targets[@]}" ) >"$logs/build.log" 2>&1; then
            grep -E 'error|Error' "$logs/build.log" | head -20 >&2
            if grep -qE '(ssl/utls|utls-lib|utls-core)/' "$logs/build.log"; then
                note "the failure is in uTLS sources (ssl/utls -> lib/glue, utls-lib -> lib, utls-core -> core): fix them first" >&2
            fi
            die "OpenSSL's make failed (full log: $logs/build.log)"
        fi
        relink_ssl_old_test
        [ "$secrets" = 0 ] || link_tls13secretstest
        echo "$key" >"$stamp"
        note "built in $(( $(date +%s) - t0 )) s"
    fi
    # Again: the fork may have been rebuilt while make ran (make itself never
    # writes libssl.so.3 here).
    install_fork
    cmp -s "$fork" "$bld/libssl.so.3" || die "$bld/libssl.so.3 is not the fork after make"
    note "fork installed: $bld/libssl.so.3 = $fork ($(sha256sum <"$fork" | cut -c1-16)…, exports UTLS_version@@UTLS_0.1)"
}

# The fork replaces the tree's libssl.so.3: programs linked with -lssl (the
# libssl.so link) and the harness (LD_LIBRARY_PATH=$bld via util/wrap.pl)
# load it. Atomic (rename), newer than the tree's objects.
install_fork() {
    if ! cmp -s "$fork" "$bld/libssl.so.3"; then
        cp -f "$fork" "$bld/.libssl.so.3.utls-tmp" && mv -f "$bld/.libssl.so.3.utls-tmp" "$bld/libssl.so.3" ||
            die "cannot install the fork as $bld/libssl.so.3"
        note "installed the fork $fork as $bld/libssl.so.3"
    fi
    touch "$bld/libssl.so.3"
    ln -sfn libssl.so.3 "$bld/libssl.so"
}

# Upstream links ssl_old_test (the old ssltest) statically with libssl.a and
# libcrypto.a. It uses only the public API, so it is linked again, from the
# same objects, against the shared libraries: test_ssl_old then exercises the
# fork instead of the tree's static libssl.
relink_ssl_old_test() {
    [ -e "$bld/test/ssl_old_test-bin-ssl_old_test.o" ] || return 0
    ( cd "$bld" && make -s -f Makefile -f - utls-ssl_old_test-shared ) >>"$logs/build.log" 2>&1 <<'MK' ||
utls-ssl_old_test-shared: test/helpers/ssl_old_test-bin-predefined_dhparams.o test/ssl_old_test-bin-ssl_old_test.o test/libtestutil.a libcrypto.so
	rm -f test/ssl_old_test
	$${LDCMD:-$(CC)} $(BIN_CFLAGS) $(BIN_LDFLAGS) -L. \
		-o test/ssl_old_test \
		test/helpers/ssl_old_test-bin-predefined_dhparams.o \
		test/ssl_old_test-bin-ssl_old_test.o \
		test/libtestutil.a -lssl -lcrypto $(BIN_EX_LIBS)
MK
        die "linking ssl_old_test against the shared libssl failed (log: $logs/build.log)"
    readelf -d "$bld/test/ssl_old_test" | grep -c 'NEEDED.*\[libssl\.so\.3\]' >/dev/null ||
        die "test/ssl_old_test does not load libssl.so.3"
    note "test/ssl_old_test linked against the shared libssl.so.3 (the fork)"
}

# Upstream's rule for tls13secretstest, plus the mocks of the uTLS hooks that
# the patched ssl/tls13_enc.c calls (see tls13secretstest-mocks.c).
link_tls13secretstest() {
    ( cd "$bld" && make -s -f Makefile -f - utls-tls13secretstest UTLS_MOCKS="$here/tls13secretstest-mocks.c" ) >>"$logs/build.log" 2>&1 <<'MK' ||
utls-tls13secretstest: crypto/tls13secretstest-bin-packet.o ssl/tls13secretstest-bin-tls13_enc.o test/tls13secretstest-bin-tls13secretstest.o test/libtestutil.a libcrypto.so
	$(CC) $(BIN_CFLAGS) -c -o test/utls-tls13secretstest-mocks.o $(UTLS_MOCKS)
	rm -f test/tls13secretstest
	$${LDCMD:-$(CC)} $(BIN_CFLAGS) -L. $(BIN_LDFLAGS) \
		-o test/tls13secretstest \
		crypto/tls13secretstest-bin-packet.o \
		ssl/tls13secretstest-bin-tls13_enc.o \
		test/tls13secretstest-bin-tls13secretstest.o \
		test/utls-tls13secretstest-mocks.o \
		-lssl test/libtestutil.a -lcrypto $(BIN_EX_LIBS)
MK
    {
        grep -o "undefined reference to \`[^']*'" "$logs/build.log" | sort -u >&2
        die "linking test/tls13secretstest failed (log: $logs/build.log)" \
            "if the patched ssl/tls13_enc.c calls a new libssl-internal function, mock it in" \
            "tests/upstream/tls13secretstest-mocks.c (or in the patched test/tls13secretstest.c)"
    }
    note "test/tls13secretstest linked with the uTLS hook mocks (tests/upstream/tls13secretstest-mocks.c)"
}

# ---------------------------------------------------------------------------
do_run() {
    local r=${recipes[0]} f base out tap lddir rc t0 fail=0
    f=$(recipe_file "$r")
    base=$(basename "$f")
    out=$logs/$r.log
    tap=$logs/$r.tap
    lddir=$logs/$r.ld
    [ -e "$bld/util/wrap.pl" ] || die "the upstream programs are not built (run the upstream.build test)"
    if [ "$shadow" = 1 ]; then
        # util/ is a real directory: wrap.pl and shlib_wrap.sh find the
        # libraries in their own parent directory, here the shadow.
        local sh=$logs/shadow e
        rm -rf "$sh" && mkdir -p "$sh/util" "$sh/test-runs"
        for e in "$bld"/* "$bld"/.utls-*; do
            case "${e##*/}" in libssl.so|libssl.so.3|test-runs|util|'*') continue ;; esac
            ln -s "$e" "$sh/${e##*/}"
        done
        for e in "$bld"/util/*; do ln -s "$e" "$sh/util/${e##*/}"; done
        cp "$fork" "$sh/libssl.so.3" && ln -s libssl.so.3 "$sh/libssl.so"
        note "shadow build directory $sh: $bld's programs with $fork as libssl.so.3"
        bld=$sh
    fi
    # The fork may have been rebuilt since upstream.build installed it: install
    # the current one (an atomic rename; running recipes keep their copy).
    [ "$shadow" = 1 ] || install_fork
    cmp -s "$fork" "$bld/libssl.so.3" || die "$bld/libssl.so.3 is not the fork $fork"
    local sum0
    sum0=$(sha256sum <"$bld/libssl.so.3")
    rm -rf "$lddir" && mkdir -p "$lddir"

    note "recipe $base against $bld/libssl.so.3 (the fork)"
    t0=$(date +%s)
    # As `make test TESTS=$r V=0` runs it (Makefile target run_tests).
    ( cd "$bld" && env SRCTOP="$src" BLDTOP=. PERL=perl FIPSKEY="$(sed -n 's/^FIPSKEY=//p' Makefile)" EXE_EXT= \
          HARNESS_JOBS=1 HARNESS_TAP_COPY="$tap" \
          LD_DEBUG=libs LD_DEBUG_OUTPUT="$lddir/ld" \
          perl "$src/test/run_tests.pl" "$r" ) >"$out" 2>&1
    rc=$?
    cat "$out"
    echo "--- ($(( $(date +%s) - t0 )) s, harness exit $rc; TAP copy: $tap)"

    # 1-3. The verdict, from the harness output and the TAP copy: the recipe
    # ran (not skipped: the fips prep recipe is skipped in every non-FIPS
    # build and is not counted), and every failing leaf test is one of the
    # recipe's known failures (known-failures.txt), which must all occur.
    perl - "$out" "$tap" "$r" "$base" "$rc" "$here/known-failures.txt" <<'PERL' || fail=1
use strict; use warnings;
my ($out, $tap, $r, $base, $rc, $kf) = @ARGV;
my $fail = 0;
my @known;
if (open(my $k, '<', $kf)) {
    while (<$k>) { chomp; next if /^\s*(#|$)/; my ($kr, $leaf) = split /\t/, $_, 2; push @known, $leaf if $kr eq $r; }
}
open(my $o, '<', $out) or die "$out: $!";
my @out = <$o>;
# (After a failure the name can follow the failure report on the same line.)
my ($line) = map { /(\Q$base\E \.\..*)/ ? $1 : () } @out;
my ($files) = (grep { /^Files=\d+, Tests=\d+/ } @out)[-1];
chomp($line, $files) if defined $line && defined $files;
if (!defined $line) { print "FAIL: the harness did not run $base\n"; $fail = 1; }
elsif ($line =~ /skipped/) { print "FAIL: the recipe was skipped: $line\n"; $fail = 1; }

# The TAP of the recipe: nested subtests are indented by 4 spaces a level; a
# failing leaf is a "not ok" none of whose children failed.
open(my $t, '<', $tap) or die "$tap: $!";
my ($in, @pending, %n) = (0);
my $plan;
while (<$t>) {
    if (/^# The results of this test will end up in test-runs\/(\S+)/) { $in = ($1 eq $r); next; }
    next unless $in;
    $plan //= $1 if /^1\.\.(\d+)/;
    next unless /^( *)(not ok|ok) \d+(?: - (.*?))?\s*$/ || /^( *)(not ok|ok) \d+(?: - (.*?))?\s+#/;
    my ($d, $res, $desc) = (length($1) / 4, $2, $3 // '');
    my $skip = /#\s*skip/i;
    my $children = $pending[$d + 1] || []; $pending[$d + 1] = [];
    $n{$d == 0 ? 'top' : 'sub'}{$res eq 'ok' ? ($skip ? 'skip' : 'ok') : 'fail'}++;
    push @{$pending[$d]}, @$children ? map { "$desc/$_" } @$children : ($desc) if $res eq 'not ok';
}
my @leaves = @{$pending[0] || []};
printf "upstream %s: %s top-level tests planned: %d ok, %d skipped, %d failed; nested: %d ok, %d skipped, %d failed\n",
    $base, $plan // '?', map { $_ // 0 } @{$n{top}}{qw(ok skip fail)}, @{$n{sub}}{qw(ok skip fail)};
print "harness: $line | $files\n" if defined $line && defined $files;
my %kn = map { $_ => 1 } @known;
my %seen;
for my $leaf (@leaves) {
    if ($kn{$leaf}) { $seen{$leaf} = 1; print "  known failure (Debian's OPENSSL_TLS_SECURITY_LEVEL=2, see known-failures.txt): $leaf\n"; }
    else { print "FAIL: $leaf\n"; $fail = 1; }
}
for my $k (@known) {
    next if $seen{$k};
    print "FAIL: known failure did not occur (does the fork still default to security level 2 like Debian's libssl?): $k\n";
    $fail = 1;
}
if ($rc != 0 && !@leaves) { print "FAIL: the harness exited with $rc\n"; $fail = 1; }
if ($rc == 0 && !grep { /^All tests successful\./ } @out) { print "FAIL: no 'All tests successful'\n"; $fail = 1; }
if (!$fail) {
    print @known ? "upstream $r: all tests pass except the " . scalar(@known) . " known failures listed above\n"
                 : "upstream $r: All tests successful ($files)\n";
}
exit $fail;
PERL

    # 4. Which libssl.so.3 every process of the recipe loaded. The harness runs
    # the programs from test-runs/RECIPE with a relative LD_LIBRARY_PATH, so
    # relative paths in the trace are resolved from there.
    local want n_proc=0 n_fork=0 n_other=0 pidfile p abs
    want=$(readlink -f "$bld/libssl.so.3")
    echo "libssl.so.3 as loaded by the processes of the recipe (LD_DEBUG=libs):"
    for pidfile in "$lddir"/ld.*; do
        [ -e "$pidfile" ] || continue
        p=$(sed -n 's/.*calling init: \(.*\/libssl\.so\.3\)$/\1/p' "$pidfile" | head -1)
        [ -n "$p" ] || continue
        n_proc=$((n_proc + 1))
        case "$p" in /*) abs=$(readlink -f "$p") ;; *) abs=$(cd "$bld/test-runs/$r" 2>/dev/null && readlink -f "$p") ;; esac
        if [ "$abs" = "$want" ]; then n_fork=$((n_fork + 1)); else n_other=$((n_other + 1)); echo "  NOT THE FORK: $p (-> ${abs:-?}) in $pidfile"; fi
    done
    echo "  $n_proc process(es) loaded libssl.so.3: $n_fork the fork ($want), $n_other another"
    if [ "$n_other" != 0 ]; then
        echo "FAIL: a process loaded a libssl.so.3 that is not the fork"; fail=1
    elif [ "$n_proc" = 0 ]; then
        if [ "$static_ok" = 1 ]; then
            echo "  no process loaded a shared libssl: the recipe's programs link libssl.a, the patched tree's code"
        else
            echo "FAIL: no process of the recipe loaded libssl.so.3 (LD_DEBUG trace in $lddir)"; fail=1
        fi
    elif [ "$(sha256sum <"$want")" != "$sum0" ]; then
        echo "FAIL: $want was replaced while the recipe ran (the fork was rebuilt: run it again)"; fail=1
    elif is_fork "$want"; then
        echo "PROOF: $want was byte-identical to $fork when the recipe started, did not change during it, and exports UTLS_version@@UTLS_0.1 (the tree's own libssl does not)"
        [ "$(sha256sum <"$fork")" = "$sum0" ] ||
            echo "  note: $fork has been rebuilt since; this result is for the build the recipe started with"
    else
        echo "FAIL: $want does not export UTLS_version@@UTLS_0.1"; fail=1
    fi
    if [ "$fail" = 0 ]; then
        [ "${UTLS_UPSTREAM_KEEP_LD:-0}" = 1 ] || rm -rf "$lddir"
        echo "PASS: upstream $r"
    else
        echo "upstream $r FAILED (log $out, TAP $tap, test dir $bld/test-runs/$r)"
    fi
    return "$fail"
}

# The tree is shared with openssl-patch/prepare.sh, which re-extracts and
# re-configures it when the patches change: builds hold this lock exclusively,
# recipe runs shared (prepare.sh can take it exclusively to wait for them).
lockfile=$(cd "$src/.." && pwd)/.utls-openssl.lock
exec 9>>"$lockfile" || die "cannot open $lockfile"
case "$mode" in
    build) flock -x 9; do_build ;;
    run) flock -s 9; do_run ;;
esac
