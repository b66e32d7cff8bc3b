#!/usr/bin/env bash
# in_netns.sh BIN [ARGS...]: runs BIN on the loopback of a network namespace
# of its own, so that no other test's traffic reaches its capture and its
# connections touch nobody else's (tests/net/tap_churn.c, tap_inbox_bound.c).
# Exits 77 (skipped) without root.
set -uo pipefail
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespace, AF_PACKET)"; exit 77; }
bin=${1:?usage: in_netns.sh BIN [ARGS...]}
shift
exec unshare -n bash -c 'ip link set lo up && exec "$@"' in_netns "$bin" "$@"
