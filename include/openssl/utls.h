/*
 * uTLS: out-of-order TLS record delivery in a drop-in libssl.so.3.
 *
 * Everything declared here is exported by the uTLS fork of libssl under the
 * symbol version node UTLS_0.1; nothing in OpenSSL's own OPENSSL_3.0.0 node
 * changes. A program that uses this header must run with the fork's
 * libssl.so.3 (link with `pkg-config --libs utls`); a program that does not
 * use it sees exactly OpenSSL 3.0's behaviour.
 */
#ifndef OPENSSL_UTLS_H
# define OPENSSL_UTLS_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/* The uTLS release, as numbers and as one integer 0xMMNNPP00. */
# define UTLS_VERSION_MAJOR 0
# define UTLS_VERSION_MINOR 1
# define UTLS_VERSION_PATCH 0
# define UTLS_VERSION_NUMBER \
    ((UTLS_VERSION_MAJOR << 24) | (UTLS_VERSION_MINOR << 16) | (UTLS_VERSION_PATCH << 8))

/* What UTLS_version() describes. */
# define UTLS_VERSION_TEXT 0 /* "0.1.0" */
# define UTLS_BASE_VERSION 1 /* the upstream OpenSSL release, "3.0.22" */
# define UTLS_FULL_VERSION 2 /* "uTLS 0.1.0 (OpenSSL 3.0.22 libssl fork)" */

/*
 * UTLS_version returns a static, NUL-terminated string described by |which|
 * (one of the UTLS_*_VERSION values above), or NULL for any other value. The
 * string is owned by the library and must not be freed. UTLS_BASE_VERSION is
 * the upstream OpenSSL release whose ssl/ sources were compiled into this
 * libssl, which need not be the release of the libcrypto it runs with.
 */
const char *UTLS_version(int which);

/*
 * UTLS_version_num returns UTLS_VERSION_NUMBER of the library actually
 * loaded, so that a program can compare it with the header it was built with.
 */
unsigned long UTLS_version_num(void);

/*
 * UTLS_base_version_num returns OPENSSL_VERSION_NUMBER of the upstream
 * release the fork's libssl was built from (0x30000160 for 3.0.22).
 */
unsigned long UTLS_base_version_num(void);


/*-
 * Out-of-order record delivery (SSL_MODE_UNORDERED)
 * =================================================
 *
 * With SSL_set_mode(ssl, SSL_MODE_UNORDERED) a receiver delivers each TLS
 * record as soon as all of its own bytes have arrived, even while an earlier
 * TCP segment is still missing. Records come from the in-order stream exactly
 * as in stock OpenSSL (authoritative, in sequence order) and, past a hole, from
 * fragments that the read BIO reports as they arrive (see the segment and uTCP
 * BIOs below). An out-of-order record is delivered only after its AEAD tag or
 * MAC verified; every record is delivered exactly once; alerts, handshake
 * messages and ChangeCipherSpec are processed only in order.
 *
 * In this mode one SSL_read()/SSL_read_ex()/UTLS_read_record() returns exactly
 * one record's plaintext. A buffer smaller than the record fails with
 * UTLS_R_BUFFER_TOO_SMALL (SSL_get_error() returns SSL_ERROR_SSL) and loses
 * nothing: the record is returned by the next call with a large enough
 * buffer. SSL3_RT_MAX_PLAIN_LENGTH (16384) bytes always suffice.
 *
 * The mode changes nothing on the wire and nothing for the sender, which may be
 * any TLS stack. It has no effect on writing, on DTLS, or on a connection
 * whose cipher chains state across records (TLS 1.0 CBC, stream ciphers, the
 * null cipher): those fall back to in-order delivery and say so in
 * UTLS_STATS.fallback. KTLS is not used while the mode is on.
 */
# define SSL_MODE_UNORDERED 0x00000200U

/* UTLS_RECORD_INFO describes one delivered record. */
typedef struct utls_record_info_st {
    uint64_t seq;            /* TLS record sequence number within its key */
    uint32_t key_generation; /* 0 for the first application traffic key,
                              * +1 for every key change after it (KeyUpdate) */
    int out_of_order;        /* 1: delivered before every earlier byte of the
                              * stream had arrived */
    uint64_t stream_offset;  /* offset of the record's header in the stream the
                              * read BIO carries (0 = its first byte) */
    size_t wire_len;         /* header + ciphertext */
    uint64_t arrival_ns;     /* CLOCK_MONOTONIC time at which the record's last
                              * byte reached the library */
} UTLS_RECORD_INFO;

/*
 * UTLS_read_record reads one record's plaintext into |buf| (at most |len|
 * bytes), sets |*out_read| to its length and, if |out_info| is not NULL,
 * fills |*out_info|. Returns 1 on success and 0 on failure, exactly like
 * SSL_read_ex(): use SSL_get_error() (SSL_ERROR_WANT_READ when no record is
 * complete yet). Without SSL_MODE_UNORDERED it reads like SSL_read_ex() and
 * zeroes |*out_info| (no metadata is kept when the mode is off).
 */
int UTLS_read_record(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_RECORD_INFO *out_info);

/* Why a connection in SSL_MODE_UNORDERED delivers only in order. */
typedef enum {
    UTLS_FALLBACK_NONE = 0,       /* out-of-order delivery is possible */
    UTLS_FALLBACK_NOT_ENABLED,    /* SSL_MODE_UNORDERED is not set */
    UTLS_FALLBACK_HANDSHAKE,      /* no application traffic key yet */
    UTLS_FALLBACK_CIPHER,         /* chained IV, stream or null cipher */
    UTLS_FALLBACK_DTLS,           /* DTLS has no byte stream */
    UTLS_FALLBACK_KTLS,           /* the kernel decrypts */
    UTLS_FALLBACK_NO_FRAGMENTS,   /* the read BIO reports no fragments (an
                                   * ordinary BIO: nothing to do, no hole) */
    UTLS_FALLBACK_RESOURCES       /* allocation failure: in order only */
} UTLS_FALLBACK;

/* UTLS_STATS counts one connection's out-of-order work (receive side). */
typedef struct utls_stats_st {
    uint64_t records_in_order;      /* delivered by the in-order path */
    uint64_t records_out_of_order;  /* delivered before their turn */
    uint64_t records_skipped;       /* in-order copies of records already
                                     * delivered out of order (not delivered) */
    uint64_t probes;                /* trial decryptions */
    uint64_t soft_failures;         /* candidates that did not verify (harmless:
                                     * the record still arrives in order) */
    uint64_t headers_found;         /* plausible headers past a hole */
    uint64_t fragments;             /* fragments the read BIO reported */
    uint64_t bytes_dropped;         /* bytes the out-of-order side dropped at a
                                     * limit (still delivered in order) */
    uint64_t probe_limit_hits;      /* headers abandoned at a probe limit */
    uint64_t decryptions_saved;     /* skipped records whose in-order bytes
                                     * equalled the bytes authenticated out of
                                     * order, so were not decrypted twice */
    UTLS_FALLBACK fallback;
} UTLS_STATS;

/*
 * UTLS_get_stats copies |s|'s counters to |*out_stats|. Returns 1, or 0 if
 * |s| or |out_stats| is NULL.
 */
int UTLS_get_stats(const SSL *s, UTLS_STATS *out_stats);

/* UTLS_fallback_string returns a static description of |reason|. */
const char *UTLS_fallback_string(UTLS_FALLBACK reason);

/*-
 * UTLS_LIMITS bounds what the out-of-order side may hold and spend. Past a
 * limit data is dropped from the out-of-order side only; the in-order stream
 * still delivers it. Every limit bounds what an attacker who injects segments
 * can cost (the tap sees packets before TCP validates them).
 */
typedef struct utls_limits_st {
    size_t max_bytes_held;      /* bytes held past the in-order point */
    size_t max_fragments;       /* disjoint runs held */
    uint64_t max_window;        /* furthest byte past the in-order point */
    size_t max_probes_per_record; /* candidate sequence numbers per header */
    size_t max_probes_per_kib;  /* trial decryptions per KiB received past a
                                 * hole, averaged (bounds CPU per injected byte) */
    size_t max_ready_records;   /* verified records waiting for SSL_read */
} UTLS_LIMITS;

/* UTLS_limits_default writes the defaults to |*out_limits|. */
void UTLS_limits_default(UTLS_LIMITS *out_limits);

/*
 * UTLS_set_limits sets |s|'s limits (copied). Returns 1, or 0 if a limit is
 * out of range (max_probes_per_record above 64, or a zero max_window with a
 * non-zero max_bytes_held). Takes effect for data that arrives afterwards.
 */
int UTLS_set_limits(SSL *s, const UTLS_LIMITS *limits);

/* UTLS_get_limits copies |s|'s limits to |*out_limits|. Returns 1. */
int UTLS_get_limits(const SSL *s, UTLS_LIMITS *out_limits);

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
 * No stock kernel offers uTCP. The tap gets the same information from an
 * AF_PACKET socket (TPACKET_V3 ring, a BPF filter on the connection's
 * 4-tuple), which sees every TCP segment as it arrives, before TCP's
 * reordering queue. The kernel's TCP connection goes on doing everything else
 * (ACKs, SACK, retransmission, flow control) and its in-order byte stream stays
 * the authority: the tap BIO reads the socket for in-order bytes and reports
 * the segments it captured as fragments. A segment's stream offset is its
 * sequence number minus the ISN seen in the SYN, minus 1, so the tap must be
 * in place before the connection is set up: for accepted connections a
 * listener tap watches SYNs to the listening port; for connecting sockets
 * UTLS_tap_connect() opens the tap and then connects.
 *
 * The tap needs CAP_NET_RAW. Without it the calls below fail with
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

/*-
 * Errors. uTLS reports its own errors under the library UTLS_get_lib():
 * ERR_GET_LIB(ERR_peek_error()) == UTLS_get_lib() and ERR_GET_REASON() one of
 * the reasons below; ERR_error_string() gives the text.
 */
# define UTLS_R_BUFFER_TOO_SMALL    100 /* record larger than the read buffer */
# define UTLS_R_NOT_A_SEGMENT_BIO   101
# define UTLS_R_OUTSIDE_WINDOW      102 /* segment beyond the receive window */
# define UTLS_R_BAD_UTCP_UNIT       103 /* uTCP unit shorter than its header */
# define UTLS_R_INVALID_LIMITS      104
# define UTLS_R_OFFSET_WRAPS        105 /* offset + length past 2^64 */
# define UTLS_R_TAP_PERMISSION      106 /* AF_PACKET needs CAP_NET_RAW */
# define UTLS_R_TAP_NO_ISN          107 /* the connection's SYN was not seen */
# define UTLS_R_TAP_SYSCALL         108 /* a socket call of the tap failed */

/* UTLS_get_lib returns the error library number of uTLS's errors. */
int UTLS_get_lib(void);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_H */
