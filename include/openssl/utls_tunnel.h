/*
 * <openssl/utls_tunnel.h>: IP tunnels over uTLS (docs/tunnel.md).
 * Part of the uTLS API; <openssl/utls.h> includes every part.
 */
#ifndef OPENSSL_UTLS_TUNNEL_H
# define OPENSSL_UTLS_TUNNEL_H

# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/*
 * SSL_MODE_UTLS_IP_TUNNEL says that every application record carries one IP
 * packet (an IP tunnel: examples/tunnel, socat TUN, ...). With
 * SSL_MODE_UNORDERED, a record past a hole is delivered early only if its
 * packet is a datagram whose protocol takes reordering as it comes (UDP,
 * UDP-Lite, ICMP, ICMPv6); every other record -- inner TCP above all, which
 * would take reordering for loss and retransmit spuriously -- is delivered in
 * the stream's order, exactly as without the mode. docs/tunnel.md has the
 * measurement behind the policy. The UTLS_MODE / UTLSMode word is
 * "iptunnel".
 */
# define SSL_MODE_UTLS_IP_TUNNEL 0x00002000U

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_TUNNEL_H */
