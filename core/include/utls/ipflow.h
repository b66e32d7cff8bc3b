/*
 * Which IP packets carried one per record may overtake each other: the
 * delivery policy of SSL_MODE_UTLS_IP_TUNNEL (docs/tunnel.md). Pure C, no
 * OpenSSL (core/).
 */
#ifndef UTLS_IPFLOW_H
#define UTLS_IPFLOW_H

#include <stddef.h>
#include <stdint.h>

/* IPv6 extension headers walked to find the upper-layer protocol. Bounds the
 * work an attacker-chosen (but authenticated) packet can cost; a packet with
 * more is treated as one whose protocol is unknown: kept in order. */
#define UTLS_IPFLOW_MAX_EXT_HEADERS 8

/*
 * utls_ipflow_keeps_order returns 1 if the |len|-byte IP packet at |pkt| must
 * be delivered in the tunnel's order and 0 if it may go ahead of packets
 * still missing. It returns 0 only for an IPv4 or IPv6 packet whose transport
 * protocol tolerates reordering (UDP, UDP-Lite, ICMP, ICMPv6); TCP, SCTP,
 * DCCP, any other protocol, truncated headers and data that is not an IP
 * packet stay in order, so that an inner TCP never sees reordering it would
 * take for loss (three duplicate ACKs or RACK's reordering window start a
 * spurious retransmission and halve its window).
 */
int utls_ipflow_keeps_order(const uint8_t *pkt, size_t len);

#endif /* UTLS_IPFLOW_H */
