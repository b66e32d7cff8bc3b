/*
 * <openssl/utls_ucobs.h>: uCOBS, datagrams over plain TCP (docs/ucobs.md).
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_UCOBS_H
# define OPENSSL_UTLS_UCOBS_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>
# include <openssl/utls_bio.h>

# ifdef __cplusplus
extern "C" {
# endif

/*-
 * uCOBS: datagrams over plain TCP (docs/ucobs.md)
 * ===============================================
 *
 * No TLS: each datagram (0..UTLS_UCOBS_MAX_DATAGRAM bytes) is sent as one
 * write of 0x00 || COBS(datagram) || 0x00 on a TCP socket (Minion, section
 * 5). The receiver finds every datagram that lies between two markers in
 * bytes it holds contiguously, so with the tap (see above) datagrams behind a
 * lost segment are delivered before the retransmission arrives; without it,
 * in order as they come off the socket. Every datagram is delivered exactly
 * once. There is no authentication: a datagram is as trustworthy as TCP.
 */
typedef struct utls_ucobs_st UTLS_UCOBS;

/* The largest datagram, in bytes. */
# define UTLS_UCOBS_MAX_DATAGRAM ((size_t)65535)

/* Flags of UTLS_ucobs_new(). */
# define UTLS_UCOBS_NO_TAP      0x01U /* in-order reads only */
# define UTLS_UCOBS_REQUIRE_TAP 0x02U /* fail unless the tap can be used */

/* UTLS_UCOBS_RESULT is the outcome of UTLS_ucobs_recv(). */
typedef enum {
    UTLS_UCOBS_OK = 0,           /* a datagram was returned */
    UTLS_UCOBS_WANT_READ,        /* non-blocking socket: nothing complete yet;
                                  * poll UTLS_ucobs_get_poll_fd() */
    UTLS_UCOBS_EOF,              /* the peer closed and every datagram was
                                  * returned */
    UTLS_UCOBS_BUFFER_TOO_SMALL, /* the next datagram needs *out_len bytes;
                                  * it stays queued */
    UTLS_UCOBS_ERROR             /* a socket error (errno) or no memory; see
                                  * the error queue */
} UTLS_UCOBS_RESULT;

/* UTLS_UCOBS_INFO describes a datagram UTLS_ucobs_recv() returned. */
typedef struct utls_ucobs_info_st {
    uint64_t offset;     /* stream offset of its opening marker: its identity */
    size_t len;
    int out_of_order;    /* 1 if it was complete while bytes before it were
                          * still missing */
    uint64_t arrival_ns; /* CLOCK_MONOTONIC time its last bytes were seen (by
                          * the tap, or read from the socket) */
} UTLS_UCOBS_INFO;

/* UTLS_UCOBS_STATS counts a receiver's work. */
typedef struct utls_ucobs_stats_st {
    uint64_t datagrams_in_order;
    uint64_t datagrams_out_of_order;
    uint64_t framing_errors;   /* runs skipped: not canonical COBS, too long */
    uint64_t junk_bytes;       /* bytes before the stream's first marker */
    uint64_t held_back;        /* complete past a hole but over a limit:
                                * delivered in order instead */
    uint64_t bytes_read;       /* in-order bytes read from the socket */
    uint64_t fragment_bytes;   /* bytes the tap reported past a hole */
    int tapped;                /* 1 if the tap is in use */
    UTLS_TAP_STATS tap;        /* the tap's counters (zero without it) */
} UTLS_UCOBS_STATS;

/*
 * UTLS_ucobs_send writes the datagram |dgram| (|len| bytes) to the TCP
 * socket |fd| as one frame in one send call. A blocking socket that takes
 * part of it gets the rest (EINTR is retried). On a non-blocking socket that
 * takes none of it, it fails with errno EAGAIN and nothing is sent; once any
 * byte went out, it waits (poll) until the whole frame is written, because a
 * cut frame would corrupt the stream. Returns 1, or 0 with errno set
 * (EMSGSIZE above UTLS_UCOBS_MAX_DATAGRAM, EINVAL for NULL data) and an error
 * on the queue. Never raises SIGPIPE.
 */
int UTLS_ucobs_send(int fd, const void *dgram, size_t len);

/*
 * UTLS_ucobs_new returns a receiver for the connected TCP socket |fd|, from
 * which nothing may have been read yet. Unless |flags| has UTLS_UCOBS_NO_TAP
 * it uses the tap when the connection's SYN was seen (|fd| accepted from a
 * socket given to UTLS_tap_listen(), or connected with UTLS_tap_connect())
 * and the process has CAP_NET_RAW; otherwise it reads in order (or, with
 * UTLS_UCOBS_REQUIRE_TAP, fails). Returns NULL with an error on the queue on
 * failure. |fd| stays the caller's: it is not closed by UTLS_ucobs_free().
 * Blocking or not follows |fd|'s O_NONBLOCK.
 */
UTLS_UCOBS *UTLS_ucobs_new(int fd, unsigned int flags);

/* UTLS_ucobs_free frees |u| (not its fd). NULL-safe. */
void UTLS_ucobs_free(UTLS_UCOBS *u);

/*
 * UTLS_ucobs_recv returns the next complete datagram in |buf| (|len| bytes),
 * its length in |*out_len| and, if |out_info| is not NULL, its metadata.
 * Datagrams come in the order they became complete, each exactly once. On a
 * blocking socket it waits for one (or for end of file); on a non-blocking
 * socket it returns UTLS_UCOBS_WANT_READ when none is complete. If |len| is
 * too small it returns UTLS_UCOBS_BUFFER_TOO_SMALL with the needed size in
 * |*out_len| and the datagram stays queued: nothing is lost.
 */
UTLS_UCOBS_RESULT UTLS_ucobs_recv(UTLS_UCOBS *u, void *buf, size_t len, size_t *out_len,
                                  UTLS_UCOBS_INFO *out_info);

/*
 * UTLS_ucobs_get_poll_fd returns a descriptor that polls readable when
 * UTLS_ucobs_recv() may make progress (the socket or the tap has data): the
 * socket itself without the tap, an epoll descriptor owned by |u| with it.
 * Call UTLS_ucobs_recv() until it returns UTLS_UCOBS_WANT_READ before
 * polling. Returns -1 on failure.
 */
int UTLS_ucobs_get_poll_fd(UTLS_UCOBS *u);

/* UTLS_ucobs_get_stats copies |u|'s counters. Returns 1, or 0 on NULL. */
int UTLS_ucobs_get_stats(const UTLS_UCOBS *u, UTLS_UCOBS_STATS *out_stats);

/*
 * UTLS_ucobs_get_stats_ex is UTLS_ucobs_get_stats for a UTLS_UCOBS_STATS of
 * |stats_size| bytes (UTLS_0.2), with the size rules of UTLS_get_stats_ex().
 * The structure ends with its UTLS_TAP_STATS, so the two grow together: new
 * tap counters extend both at the end, and uCOBS counters are never added
 * after it.
 */
int UTLS_ucobs_get_stats_ex(const UTLS_UCOBS *u, UTLS_UCOBS_STATS *out_stats, size_t stats_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_UCOBS_H */
