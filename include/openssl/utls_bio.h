/*
 * <openssl/utls_bio.h>: the fragment sources: the segment BIO, the uTCP filter BIO and the tap.
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_BIO_H
# define OPENSSL_UTLS_BIO_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/*-
 * Fragment sources
 * ================
 *
 * The segment BIO is a source/sink BIO that stands where a TCP socket would:
 * the caller pushes segments (stream offset, bytes) in any order, with
 * duplicates and overlaps; BIO_read() returns the in-order byte stream, as
 * TCP would; and bytes that arrive past a hole are also reported to the SSL
 * as fragments, which is what lets it deliver records out of order. Writes
 * go to an internal buffer that the caller drains with
 * UTLS_BIO_segment_take_output() (or to a BIO set with
 * UTLS_BIO_segment_set_output()).
 */
const BIO_METHOD *UTLS_BIO_s_segment(void);

/*
 * UTLS_BIO_segment_push offers |len| bytes at stream offset |offset| to the
 * segment BIO |b|. Bytes already received are ignored (conflicting bytes are
 * counted; the first copy wins, as in TCP). Returns 1, or 0 if |b| is not a
 * segment BIO, the segment lies beyond the receive window (the caller should
 * offer it again later, as TCP retransmits) or memory ran out.
 */
int UTLS_BIO_segment_push(BIO *b, uint64_t offset, const void *data, size_t len);

/*
 * UTLS_BIO_segment_push_eof marks the end of the stream at |offset|: once
 * every byte below it has been read, BIO_read() reports end of file.
 */
int UTLS_BIO_segment_push_eof(BIO *b, uint64_t offset);

/*
 * UTLS_BIO_segment_take_output moves up to |len| bytes the SSL wrote through
 * |b| into |buf| and returns how many (0 if none).
 */
size_t UTLS_BIO_segment_take_output(BIO *b, void *buf, size_t len);

/*
 * UTLS_BIO_segment_set_output makes writes to |b| go to |out| instead of the
 * internal buffer. |out| is not owned; it must outlive |b|'s use.
 */
int UTLS_BIO_segment_set_output(BIO *b, BIO *out);

/*
 * UTLS_BIO_segment_set_window sets the receive window: the furthest a pushed
 * byte may lie past the in-order read point (default 16 MiB, like a large
 * TCP receive buffer). Returns 1.
 */
int UTLS_BIO_segment_set_window(BIO *b, uint64_t window);

/*
 * The uTCP BIO is a filter that reads Minion's uTCP kernel format from the
 * next BIO in the chain: every read of the next BIO returns one unit of
 * 1 flags byte, a 4-byte big-endian TCP sequence offset (the stream offset
 * modulo 2^32) and the segment's data, as the uTCP socket option returns them
 * (for instance a SOCK_SEQPACKET socket or a datagram BIO). It then behaves
 * exactly like the segment BIO: BIO_read() returns the in-order stream and
 * bytes past a hole are reported as fragments. Writes pass to the next BIO.
 */
const BIO_METHOD *UTLS_BIO_f_utcp(void);

/* The flags byte of a uTCP unit (Minion section 4). */
# define UTLS_UTCP_FLAG_INORDER 0x01 /* the data is at the in-order point */
# define UTLS_UTCP_FLAG_EOF     0x02 /* the peer closed: no data follows */

/*-
 * The tap: out-of-order fragments from a stock Linux kernel
 * =========================================================
 *
 * No stock kernel offers uTCP. The tap gets the same information from the
 * process-wide tap (<openssl/utls_tap.h>: one AF_PACKET TPACKET_V2 ring per
 * process, a filter on the tapped local ports, a table by 4-tuple), which
 * sees every TCP segment as it arrives, before TCP's reordering queue. The kernel's TCP connection goes on doing everything else
 * (ACKs, SACK, retransmission, flow control) and its in-order byte stream stays
 * the authority: the tap BIO reads the socket for in-order bytes and reports
 * the segments it captured as fragments. A segment's stream offset is its
 * sequence number minus the peer's ISN, minus 1; the ISN is read from what
 * the local kernel sent (its SYN-ACK's or ACK's acknowledgement number), so
 * the tap must be in place before the connection is set up: for accepted
 * connections a listener tap watches the listening port's handshakes; for
 * connecting sockets UTLS_tap_connect() watches the handshake it makes.
 *
 * The tap needs CAP_NET_RAW when it is opened (UTLS_tap_open), not
 * afterwards. Without it the calls below fail with
 * UTLS_R_TAP_PERMISSION and the connection simply works in order. IPv4 and
 * IPv6. Segments are seen before TCP checks them, so an attacker on the path
 * can inject anything: everything is authenticated before delivery, and the
 * UTLS_LIMITS bound what injected data can cost.
 */
typedef struct utls_tap_listener_st UTLS_TAP_LISTENER;

/*
 * UTLS_tap_listen starts remembering the ISNs of SYNs that arrive for the
 * port |listen_fd| is bound to, so that connections accepted from it can get
 * a tap. Returns a listener the caller frees with UTLS_tap_listener_free(),
 * or NULL with an error on the queue (UTLS_R_TAP_PERMISSION without
 * CAP_NET_RAW). Call it before connections arrive (after listen()).
 */
UTLS_TAP_LISTENER *UTLS_tap_listen(int listen_fd);

/* UTLS_tap_listener_free stops the listener tap. NULL-safe. */
void UTLS_tap_listener_free(UTLS_TAP_LISTENER *l);

/*
 * UTLS_tap_connect is connect(2) for a TCP socket |fd| that is to get a tap:
 * it binds |fd| to an ephemeral port if it is not bound, opens the tap, then
 * connects (blocking) and records the ISN from the SYN-ACK. Returns 1, or 0
 * with errno set on connect failure. A tap failure (no CAP_NET_RAW) is not a
 * connect failure: it leaves an error on the queue, connects anyway and
 * returns 1; UTLS_BIO_new_tap() then fails for the fd.
 */
int UTLS_tap_connect(int fd, const void *addr, unsigned int addrlen);

/*
 * UTLS_BIO_new_tap returns a BIO for the connected TCP socket |fd| that
 * reads and writes like BIO_new_socket(fd, close_flag) and also reports the
 * segments the tap captured as fragments (see UTLS_BIO_s_segment). The ISN
 * comes from a listener tap (|fd| was accepted from a socket given to
 * UTLS_tap_listen) or from UTLS_tap_connect(). Returns NULL with an error if
 * the ISN is unknown (UTLS_R_TAP_NO_ISN) or the tap cannot be opened
 * (UTLS_R_TAP_PERMISSION).
 *
 * With SSL_MODE_UNORDERED set, SSL_set_fd() is enough: the first read
 * replaces the socket BIO by a tap BIO when the ISN of the fd's connection is
 * known, and otherwise goes on in order (UTLS_STATS.fallback says why).
 */
BIO *UTLS_BIO_new_tap(int fd, int close_flag);

/* UTLS_TAP_STATS counts a tap's work. */
typedef struct utls_tap_stats_st {
    uint64_t packets;          /* captured for this connection */
    uint64_t payload_bytes;
    uint64_t fragments;        /* reported past the in-order point */
    uint64_t ring_drops;       /* the kernel dropped (ring full) */
    uint64_t malformed;        /* unparseable packets ignored */
    uint64_t last_byte_ns;     /* CLOCK_MONOTONIC arrival of the newest byte */
} UTLS_TAP_STATS;

/* UTLS_BIO_tap_get_stats copies a tap BIO's counters. Returns 1, or 0 if |b|
 * is not a tap BIO. */
int UTLS_BIO_tap_get_stats(BIO *b, UTLS_TAP_STATS *out_stats);

/*
 * UTLS_BIO_tap_get_stats_ex is UTLS_BIO_tap_get_stats for a UTLS_TAP_STATS of
 * |stats_size| bytes, the caller's sizeof(UTLS_TAP_STATS) (UTLS_0.2), with the
 * size rules of UTLS_get_stats_ex().
 */
int UTLS_BIO_tap_get_stats_ex(BIO *b, UTLS_TAP_STATS *out_stats, size_t stats_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_BIO_H */
