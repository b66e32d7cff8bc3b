#!/bin/sh
# Builds quic-stream (bench/latency/quic) with Go: called by CMake as
#   build.sh GO OUTPUT_BINARY
# from this directory, with GOCACHE and GOMODCACHE under the build tree. The
# module download (github.com/quic-go/quic-go v0.65.0 and what it needs, as
# pinned in go.mod and verified against go.sum) is part of the build; nothing
# is vendored.
set -eu
GO=$1
OUT=$2
need=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
have=$("$GO" env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
    echo "bench/latency/quic: go.mod needs Go $need or newer (quic-go v0.65.0 does), $GO is $have" >&2
    exit 1
fi
if ! "$GO" mod download; then
    echo "bench/latency/quic: could not download the Go modules of go.mod (github.com/quic-go/quic-go v0.65.0 and its dependencies) from GOPROXY=$("$GO" env GOPROXY) into $("$GO" env GOMODCACHE)." >&2
    echo "bench/latency/quic: the build needs the Go module proxy (or GOPROXY pointing at a mirror that has them; go.sum verifies what arrives)." >&2
    exit 1
fi
"$GO" build -trimpath -o "$OUT" .
