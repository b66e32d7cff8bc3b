#!/usr/bin/env bash
# tap_churn.sh BIN CONCURRENT CHURN [--json FILE]: runs tests/net/tap_churn
# (the process-wide tap under CONCURRENT connections at once, then CHURN
# opened and closed one after the other) on the loopback of a network
# namespace of its own, so that no other test's traffic reaches its capture
# and its connections touch nobody else's. Exits 77 (skipped) without root.
set -uo pipefail
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespace, AF_PACKET)"; exit 77; }
bin=${1:?usage: tap_churn.sh BIN CONCURRENT CHURN [--json FILE]}
shift
exec unshare -n bash -c 'ip link set lo up && exec "$@"' tap_churn "$bin" "$@"
