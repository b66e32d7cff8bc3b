#!/usr/bin/env bash
# Installs what building and testing uTLS needs on Debian 12. Idempotent and
# quiet when everything is already there; needs root only when it must install.
set -euo pipefail

packages=(
    build-essential cmake ninja-build pkg-config perl patch gpgv debian-archive-keyring
    debian-keyring dpkg-dev                # verifying Debian's signed .dsc; dpkg-buildflags
    libssl-dev libssl3 openssl            # the system libcrypto the fork links to
    libzstd-dev zlib1g-dev xz-utils       # the 3.5 base's libcrypto (Debian 13: enable-zstd enable-zlib)
    libcmocka-dev                         # unit tests
    clang llvm lld libclang-rt-14-dev     # libFuzzer (make fuzz) and the fuzz replays
    curl python3 gnutls-bin libnss3-tools # interop peers and preload clients
    socat libevent-dev                    # evloop: a program we did not write; the libevent example
    tcpdump tshark wireshark-dev libwireshark-dev
    iproute2 nftables iptables ethtool libnetfilter-queue-dev  # testbed (no netem here)
    python3-matplotlib
    linux-perf                            # bench/scale: counts and attribution of the bulk flow
    valgrind                              # tests/security35: heap errors in Debian 13's uninstrumented libssl
    socat                                 # bench/tunnel: an unmodified TUN-over-TLS tunnel
)

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$p")
done

# The fork links against the system libcrypto; it must not be older than the
# pinned base (openssl-patch/BASE), so libssl3/libssl-dev are upgraded too.
. "$(dirname "$0")/../openssl-patch/BASE"
have=$(pkg-config --modversion libcrypto 2>/dev/null || echo 0)
if [ "$(printf '%s\n%s\n' "$MIN_LIBCRYPTO" "$have" | sort -V | head -1)" != "$MIN_LIBCRYPTO" ]; then
    missing+=(libssl3 libssl-dev openssl)
# The parity tests compare the fork with the system libssl3 of the Debian
# version BASE names; an older one is upgraded (to what the archive has: if
# that is newer still, tools/check-base.sh says the fork needs a rebase).
elif ! dpkg --compare-versions "$(dpkg-query -W -f='${Version}' libssl3 2>/dev/null || echo 0)" ge "$DEBIAN_VERSION"; then
    missing+=(libssl3 libssl-dev openssl)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
