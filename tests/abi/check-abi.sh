#!/usr/bin/env bash
# check-abi.sh FORK SYSTEM UTLS_MAP — the fork must be a drop-in libssl.so.3:
#  * SONAME libssl.so.3, like the system library;
#  * the symbols it defines at version OPENSSL_3.0.0 are exactly the system's;
#  * every other symbol it exports is listed in UTLS_MAP under the node it
#    is exported at (UTLS_0.1, UTLS_0.2, ...), and everything UTLS_MAP lists
#    is exported at its node;
#  * each UTLS_ node after the first inherits the one before it.
# Exit 0 when all hold; 1 with the differences printed otherwise.
set -euo pipefail
fork=${1:?fork}
sys=${2:?system libssl}
map=${3:?utls map}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "NAME NODE" for every defined, exported symbol; a version node's own symbol
# (readelf shows it without @@) counts as "NODE NODE", as in the 519 of 3.0.
exports() {
    readelf --dyn-syms -W "$1" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' |
        sed 's/@@*/ /' | awk 'NF == 1 { $2 = $1 } { print $1, $2 }' | sort -u
}
soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'; }

exports "$fork" >"$tmp/fork"
exports "$sys" >"$tmp/sys"
awk '$2 == "OPENSSL_3.0.0" { print $1 }' "$tmp/fork" >"$tmp/fork.3"
awk '$2 == "OPENSSL_3.0.0" { print $1 }' "$tmp/sys" >"$tmp/sys.3"
awk '$2 != "OPENSSL_3.0.0" { print }' "$tmp/fork" >"$tmp/fork.other"
awk '$2 != "OPENSSL_3.0.0" { print }' "$tmp/sys" >"$tmp/sys.other"
# "NAME NODE" for every symbol of the map, and "NODE NODE" for each node;
# "NODE PARENT" pairs, in the map's order, for the inheritance check.
awk '/^UTLS_[0-9.]+[[:space:]]*\{/ { node = $1; print node, node; next }
     node != "" && /^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*;$/ { sub(/^[[:space:]]*/, ""); sub(/;$/, ""); print $0, node }
     /^}/ { node = "" }' "$map" | sort -u >"$tmp/map"
awk '/^UTLS_[0-9.]+[[:space:]]*\{/ { node = $1 } /^}/ && node != "" { p = $2; sub(/;$/, "", p); print node, p; node = "" }' \
    "$map" >"$tmp/nodes"

fail=0
report() { echo "ABI: $1"; sed 's/^/    /' "$2"; fail=1; }

echo "fork:   $fork (SONAME $(soname "$fork"))"
echo "system: $sys (SONAME $(soname "$sys"))"
[ "$(soname "$fork")" = "$(soname "$sys")" ] || { echo "ABI: SONAME differs"; fail=1; }
echo "OPENSSL_3.0.0 symbols: fork $(wc -l <"$tmp/fork.3"), system $(wc -l <"$tmp/sys.3")"
[ -s "$tmp/sys.3" ] || { echo "ABI: the system library exports nothing at OPENSSL_3.0.0"; fail=1; }
[ -s "$tmp/sys.other" ] && report "the system library exports symbols outside OPENSSL_3.0.0:" "$tmp/sys.other"
comm -13 "$tmp/fork.3" "$tmp/sys.3" >"$tmp/missing"
comm -23 "$tmp/fork.3" "$tmp/sys.3" >"$tmp/extra"
[ -s "$tmp/missing" ] && report "missing from the fork at OPENSSL_3.0.0:" "$tmp/missing"
[ -s "$tmp/extra" ] && report "added by the fork at OPENSSL_3.0.0 (new API belongs in a UTLS_ node):" "$tmp/extra"
prev=OPENSSL_3.0.0
while read -r node parent; do
    [ "$parent" = "$prev" ] || { echo "ABI: node $node inherits ${parent:-nothing}, not $prev"; fail=1; }
    prev=$node
done <"$tmp/nodes"
[ -s "$tmp/nodes" ] || { echo "ABI: no UTLS_ node in $(basename "$map")"; fail=1; }
echo "uTLS symbols ($(awk '{print $1}' "$tmp/nodes" | paste -sd, -)): $(wc -l <"$tmp/fork.other") exported," \
    "$(wc -l <"$tmp/map") in $(basename "$map") with the nodes"
comm -23 "$tmp/fork.other" "$tmp/map" >"$tmp/unlisted"
comm -13 "$tmp/fork.other" "$tmp/map" >"$tmp/unexported"
[ -s "$tmp/unlisted" ] && report "exported by the fork outside OPENSSL_3.0.0 but not in the map:" "$tmp/unlisted"
[ -s "$tmp/unexported" ] && report "listed in the map but not exported:" "$tmp/unexported"
if [ $fail = 0 ]; then
    echo "ABI: OK: the OPENSSL_3.0.0 node is identical; only the map's UTLS_ nodes are added"
fi
exit $fail
