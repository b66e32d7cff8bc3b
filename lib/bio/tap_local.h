/*
 * The tap's internals (lib/bio/): the capture ring's geometry, a
 * connection's 4-tuple, a parsed segment, and the capture socket
 * (tap_capture.c) the tap BIO (tap.c) reads.
 */
#ifndef UTLS_LIB_TAP_LOCAL_H
#define UTLS_LIB_TAP_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

/*
 * The ring: 64 blocks of 128 KiB. A block holds at least one 64 KiB GRO
 * packet; the kernel hands a block over when it is full or after
 * UTLS_TAP_BLOCK_TIMEOUT_MS, so the ring covers at least 64 ms of traffic that
 * the application has not read yet. When it is full the kernel drops captured
 * copies only (counted in ring_drops): those records come in order.
 */
#define UTLS_TAP_BLOCK_SIZE (1u << 17)

#define UTLS_TAP_BLOCK_NR 64u

#define UTLS_TAP_FRAME_SIZE (1u << 11)

#define UTLS_TAP_BLOCK_TIMEOUT_MS 1

/* ISNs remembered process-wide. Attack bounded: a SYN flood against a tapped
 * listener; past it the oldest entries are overwritten (those connections
 * then fall back to in-order delivery). */
#define UTLS_TAP_MAX_ISNS 4096

/*
 * After this many readiness reports in a row for captured fragments that
 * completed no record (spurious wake-ups), fragments alone stop making the
 * connection ready until an early record is delivered or the socket's
 * in-order stream moves. Attack bounded: segments injected past a hole
 * (headers that never verify) wake an event loop at most this many times per
 * genuine in-order read; the records then come in order as with stock TLS.
 */
#define UTLS_EVLOOP_MAX_SPURIOUS_RUN 16

/* utls_tap_poll is poll() through the system call itself (lib/bio/evloop.c):
 * a companion library that interposes poll() for event loops
 * (docs/evloop.md) must not see the tap's own wait on its socket and ring. */
struct pollfd;
int utls_tap_poll(struct pollfd *p, unsigned long n, int timeout_ms);

/* --- Addresses and the ISN registry -------------------------------------- */

typedef struct {
    int family;
    unsigned char local[16], peer[16];
    uint16_t lport, pport; /* host order */
} tap_key;

/* --- Packet parsing ------------------------------------------------------ */

typedef struct {
    tap_key key;        /* local = destination, peer = source */
    uint32_t seq;
    uint8_t flags;
    const unsigned char *payload;
    size_t payload_len;
} tap_segment;

#define TCP_FLAG_SYN 0x02

#define TCP_FLAG_ACK 0x10

/* utls_tap_parse_segment parses the IPv4/IPv6 + TCP packet |p| (|len| bytes) into
 * |*out|; returns 1 if it is a TCP segment, 0 otherwise. */
int utls_tap_parse_segment(const unsigned char *p, size_t len, tap_segment *out);
/* utls_tap_open_socket opens the capture socket for |k| (with |match_peer|,
 * the peer's side too; segments whose flags under |flag_mask| are |flags|)
 * and maps its ring into |*out_ring|; returns the socket, or -1. */
int utls_tap_open_socket(const tap_key *k, int match_peer, uint8_t flag_mask, uint8_t flags,
                         void **out_ring);

#endif
