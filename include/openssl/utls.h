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
 *
 * The mode bits live in OpenSSL's own SSL_MODE_* space; the names carry UTLS
 * so that they cannot be mistaken for upstream's, and tests/abi fails the
 * build if an upstream ssl.h ever defines one of these bits
 * (SSL_MODE_UTLS_ALL). SSL_MODE_UNORDERED and SSL_MODE_UNORDERED_PARTIAL are
 * the names before 0.2, kept as aliases.
 */
# define SSL_MODE_UTLS_UNORDERED 0x00000200U
# define SSL_MODE_UNORDERED SSL_MODE_UTLS_UNORDERED

/*
 * SSL_MODE_UNORDERED_PARTIAL relaxes "one whole record per read" for
 * programs that were not written for it: a record larger than the read
 * buffer is returned in parts, the rest by the following reads and before any
 * other record, as stock OpenSSL returns records, instead of failing with
 * UTLS_R_BUFFER_TOO_SMALL. Records still arrive out of order between each
 * other. The UTLS_MODE / UTLSMode setting "unordered" (for unmodified
 * programs) sets it together with SSL_MODE_UNORDERED.
 */
# define SSL_MODE_UTLS_UNORDERED_PARTIAL 0x00001000U
# define SSL_MODE_UNORDERED_PARTIAL SSL_MODE_UTLS_UNORDERED_PARTIAL

/*-
 * Explicit record numbers (docs/ern.md)
 * =====================================
 *
 * With SSL_MODE_UTLS_NEGOTIATE on both ends of a TLS 1.3 connection, or of a
 * TLS 1.2 connection with an AES-GCM or AES-CBC suite, the two uTLS endpoints
 * agree, inside encrypted records only, that each application record carries
 * its own sequence number as the first 8 bytes of its plaintext (removed
 * before delivery). A receiver then verifies an out-of-order record with one
 * cipher block per candidate and a single AEAD or MAC check. The ClientHello
 * and ServerHello are unchanged, and a legacy peer sees only valid TLS it
 * already handles. The server offers in its NewSessionTickets (TLS 1.3) or in
 * the explicit nonce or IV of its Finished record (TLS 1.2); the client
 * answers on its next write (or UTLS_ern_flush()); the server then switches
 * on its next write. Other TLS 1.2 suites stay unnumbered (docs/ern.md).
 */
# define SSL_MODE_UTLS_NEGOTIATE 0x00000800U

/*
 * Every bit uTLS takes in SSL_set_mode()'s space: SSL_MODE_UTLS_UNORDERED,
 * SSL_MODE_UTLS_UNORDERED_PARTIAL and SSL_MODE_UTLS_NEGOTIATE (tests/abi
 * checks that it is their union).
 */
# define SSL_MODE_UTLS_ALL 0x00001a00U

/* Bits of UTLS_ern_status(). */
# define UTLS_ERN_OFFERED  0x01 /* server: offered; client: saw a valid offer */
# define UTLS_ERN_ACCEPTED 0x02 /* the client accepted */
# define UTLS_ERN_TX       0x04 /* this endpoint's records carry numbers */
# define UTLS_ERN_RX       0x08 /* the peer's records carry numbers */

/* UTLS_ern_status returns the UTLS_ERN_* bits of |s|'s negotiation. */
unsigned int UTLS_ern_status(const SSL *s);

/*
 * UTLS_ern_flush sends now a negotiation message that would otherwise wait
 * for the next SSL_write() (a client that only reads calls it once after
 * reading). Returns 1 when nothing is owed or it was sent, 0 to retry like a
 * failed SSL_write() (SSL_get_error()).
 */
int UTLS_ern_flush(SSL *s);

/*-
 * Out-of-sequence sending under explicit record numbers (docs/ern.md, "Sending
 * out of sequence order"). Only while this endpoint's records carry numbers
 * (UTLS_ERN_TX); otherwise every call fails with UTLS_R_ERN_NOT_ON.
 *
 * While sealed records are unwritten nothing else may take a record number:
 * SSL_write(), SSL_shutdown(), SSL_key_update(), SSL_renegotiate(),
 * SSL_new_session_ticket() and SSL_verify_client_post_handshake() fail with
 * UTLS_R_ERN_SEALED_PENDING, and a record the library would write on its own
 * (a renegotiation answer, an alert) waits: the call that would write it
 * (SSL_read(), SSL_do_handshake()) fails with UTLS_R_ERN_SEALED_PENDING and a
 * later call sends it. Write or drop every sealed record, then call again.
 *
 * UTLS_ERN_REORDER_WINDOW bounds how far apart the numbers of records sealed
 * but not yet written may be, and how far the receiver looks ahead of and
 * behind the highest number it has seen: it bounds the receiver's candidate
 * tests per record and its replay bitmap (one 64-bit word).
 */
# define UTLS_ERN_REORDER_WINDOW 64
/* UTLS_ERN_SEAL_OVERHEAD: a sealed record is at most its content + this. */
# define UTLS_ERN_SEAL_OVERHEAD 128
/* UTLS_ERN_SEAL_MAX_CONTENT: the most content one sealed record holds. */
# define UTLS_ERN_SEAL_MAX_CONTENT (16384 - 8)
/*
 * UTLS_ERN_SEAL_MAX_RECORD: the longest record UTLS_ern_seal() can produce,
 * header included: RFC 8446 5.2 bounds TLSCiphertext.length by 2^14 + 256.
 * With TLS 1.3 record padding on (SSL_CTX_set_record_padding_callback(),
 * SSL_CTX_set_block_padding()) the padding, not the content, decides the
 * length, so a sealed record is then bounded only by this.
 */
# define UTLS_ERN_SEAL_MAX_RECORD (5 + 16384 + 256)

/*
 * UTLS_ern_seal encrypts |len| bytes of |buf| (1 to UTLS_ERN_SEAL_MAX_CONTENT)
 * as one application-data record with the next record number, writes the
 * whole record (header included) to |out| (|out_cap| bytes, at least |len| +
 * UTLS_ERN_SEAL_OVERHEAD) and sets |*out_len| and |*out_number|. Nothing is
 * written to the connection: UTLS_ern_write_sealed() does that, in any order,
 * once per record; UTLS_ern_drop() abandons one. The caller owns |out|.
 * With TLS 1.3 record padding on (a padding callback or block padding)
 * |out_cap| must be at least UTLS_ERN_SEAL_MAX_RECORD instead.
 * If the library owes the peer a handshake message (a KeyUpdate the peer
 * asked for, a ticket from SSL_new_session_ticket()) it is written first, as
 * SSL_write() does; while sealed records are unwritten that is impossible and
 * the call fails with UTLS_R_ERN_HANDSHAKE_DUE: write or drop them first.
 * Returns 1, or 0 with nothing consumed: UTLS_R_ERN_NOT_ON, UTLS_R_ERN_BAD_ARGUMENT,
 * UTLS_R_ERN_WRITE_PENDING (a write must be completed first),
 * UTLS_R_ERN_WINDOW (the number would be UTLS_ERN_REORDER_WINDOW or more
 * above the lowest sealed unwritten record, or above the highest written),
 * UTLS_R_ERN_HANDSHAKE_DUE, SSL_R_PROTOCOL_IS_SHUTDOWN (after SSL_shutdown()),
 * or the owed message could not be written yet (SSL_get_error():
 * SSL_ERROR_WANT_WRITE; call again).
 */
int UTLS_ern_seal(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                  size_t *out_len, uint64_t *out_number);

/*
 * UTLS_ern_write_sealed writes the sealed record |rec| (|len| bytes, as
 * UTLS_ern_seal() gave it) to the connection. Returns 1 when all of it was
 * written; 0 when the BIO took only part or none (SSL_get_error():
 * SSL_ERROR_WANT_WRITE; call again with the same record before anything
 * else is written) or on an error: UTLS_R_ERN_NOT_SEALED (never sealed, or
 * already written or dropped: a record is written at most once),
 * UTLS_R_ERN_WRITE_PENDING (another write is pending), UTLS_R_ERN_STALE (the
 * key or the write sequence changed since it was sealed: all sealed records
 * are void).
 */
int UTLS_ern_write_sealed(SSL *s, const unsigned char *rec, size_t len);

/*
 * UTLS_ern_drop abandons the sealed, unwritten record numbered |number|: it
 * is never written and the receiver sees a gap, which it tolerates. The most
 * recently sealed record cannot be dropped (write it, or seal another and
 * write that). Returns 1, or 0: UTLS_R_ERN_NOT_SEALED, UTLS_R_ERN_DROP_LAST.
 */
int UTLS_ern_drop(SSL *s, uint64_t number);

/* UTLS_ern_num_sealed returns how many sealed records are not yet written. */
size_t UTLS_ern_num_sealed(const SSL *s);

/* UTLS_RECORD_INFO describes one delivered record. */
typedef struct utls_record_info_st {
    uint64_t seq;            /* TLS record sequence number within its key */
    uint32_t key_generation; /* 0 for the first application traffic key,
                              * +1 for every key change after it (KeyUpdate) */
    int out_of_order;        /* 1: delivered before every earlier byte of the
                              * stream had arrived */
    uint64_t stream_offset;  /* offset of the record's header in the stream the
                              * read BIO carries (0 = its first byte); out of
                              * order, where its bytes were found (not
                              * authenticated: see docs/unordered.md) */
    size_t wire_len;         /* header + ciphertext */
    uint64_t arrival_ns;     /* CLOCK_MONOTONIC time at which the record's last
                              * byte reached the library, never earlier: out
                              * of order, when the fragment that completed it
                              * was pushed or captured; in order, when the
                              * UTLS_read_record() call that decrypts it has
                              * authenticated it, or when UTLS_read_record()
                              * returns it if a read without metadata
                              * decrypted it (the clock is read once per
                              * record: see docs/unordered.md, PERFORMANCE) */
} UTLS_RECORD_INFO;

/*
 * UTLS_read_record reads one record's plaintext into |buf| (at most |len|
 * bytes), sets |*out_read| to its length and, if |out_info| is not NULL,
 * fills |*out_info|. Returns 1 on success and 0 on failure, exactly like
 * SSL_read_ex(): use SSL_get_error() (SSL_ERROR_WANT_READ when no record is
 * complete yet). Without SSL_MODE_UNORDERED it reads like SSL_read_ex() and
 * zeroes |*out_info| (no metadata is kept when the mode is off). With
 * |out_info| NULL it costs what SSL_read_ex() does: no clock is read.
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
    UTLS_FALLBACK_RESOURCES,      /* allocation failure: in order only */
    UTLS_FALLBACK_BYTE_STREAM     /* the mode came from UTLS_MODE/UTLSMode, not
                                   * the program, and the negotiated ALPN is a
                                   * byte-stream protocol (http/1.1, h2, ...):
                                   * its records are not messages */
} UTLS_FALLBACK;

/* UTLS_STATS counts one connection's out-of-order work (receive side). */
typedef struct utls_stats_st {
    uint64_t records_in_order;      /* delivered by the in-order path (counted
                                     * once per record, when it is
                                     * authenticated in order) */
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
    uint64_t ern_block_checks;      /* one-block candidate tests (numbered records) */
    uint64_t provider_searches;     /* candidate searches done by the uTLS provider
                                     * (when loaded: TLS 1.3 AES-GCM) */
    uint64_t ern_records_sent;      /* our records that carried a number */
    uint64_t ern_records_received;  /* in-order peer records that carried one */
    uint64_t decryptions_saved;     /* skipped records whose in-order bytes
                                     * equalled the bytes authenticated out of
                                     * order, so were not decrypted twice */
    uint64_t bodies_skipped;        /* of those, skipped without even reading
                                     * their body: the read BIO still held it
                                     * unchanged (segment and uTCP BIOs) */
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
 * Send scheduler
 * ==============
 *
 * Once written, bytes wait in the kernel's send buffer behind everything
 * written before them. The scheduler keeps messages as *plaintext* in a
 * user-space queue instead and encrypts each (one SSL_write_ex() = one
 * record) only when the kernel's unsent data is below a low-water mark
 * (TCP_NOTSENT_LOWAT, read back through TCP_INFO). Until then it may still
 * decide what goes next: higher priority first, squashed updates never sent,
 * messages that would arrive after their deadline (and those that depend on
 * them) dropped. Record sequence numbers stay in wire order, so any TLS
 * receiver, stock OpenSSL included, reads exactly the messages written, in
 * the order written.
 *
 * Nothing handed to the kernel is ever altered or withdrawn: a record that the
 * socket took only in part stays first and is completed by the next flush.
 * The scheduler never reorders encrypted records. (Under explicit record
 * numbers (UTLS_ERN_TX) a sender could also reorder records it has already
 * encrypted; the scheduler keeps one documented hook for that in
 * utls_sched.c, which says no: it is not implemented.)
 *
 * A message must fit one record: larger ones are refused with
 * UTLS_R_SCHED_MESSAGE_TOO_LARGE, never split. The queue is bounded
 * (UTLS_SCHED_CONFIG). An UTLS_SCHED is not thread-safe, like its SSL; while it
 * is in use the application writes to the SSL only through it.
 */
typedef struct utls_sched_st UTLS_SCHED;

/* UTLS_SCHED_CONFIG: the scheduler's bounds and knobs. */
typedef struct utls_sched_config_st {
    size_t max_messages;         /* messages queued (default 4096) */
    size_t max_bytes;            /* plaintext bytes queued (default 4 MiB) */
    size_t notsent_lowat;        /* encrypt the next message only while the
                                  * kernel holds fewer unsent bytes than this;
                                  * also set as TCP_NOTSENT_LOWAT (default
                                  * 16 KiB) */
    uint64_t deadline_margin_ns; /* added to every arrival estimate (default 0) */
    uint32_t window_reserve_segs; /* 0 (default): off. Else a priority-0
                                  * message is written only while TCP's
                                  * congestion window keeps this many segments
                                  * free after it and everything unsent; while
                                  * it waits, flush returns
                                  * UTLS_SCHED_WANT_TIMER (see docs/sched.md,
                                  * "The window reserve") */
    uint32_t probe_rtt_drain;    /* 0: off; 1 (default): with a window
                                  * reserve, while TCP runs BBR, predict its
                                  * next ProbeRTT from TCP_INFO/TCP_CC_INFO and,
                                  * a little more than a round trip before it,
                                  * apply the reserve as if the window were
                                  * already ProbeRTT's 4 segments, so that
                                  * urgent messages find it free when it comes
                                  * (docs/sched.md, "Draining ahead of BBR's
                                  * ProbeRTT"); only ever withholds data */
} UTLS_SCHED_CONFIG;

/* UTLS_sched_config_default writes the defaults to |*out_config|. */
void UTLS_sched_config_default(UTLS_SCHED_CONFIG *out_config);

/* Flags of UTLS_SCHED_MSG.flags. */
# define UTLS_SCHED_DEADLINE 0x01U /* deadline_ns holds an absolute deadline */
# define UTLS_SCHED_PLAYOUT  0x02U /* playout_ts holds a playout time */
# define UTLS_SCHED_DEPENDS  0x04U /* depends_on names an earlier message */

/*
 * UTLS_SCHED_MSG describes how one message is to be scheduled. Zero it, then
 * set what applies: an all-zero value means priority 0, sub-stream 0, no
 * squash, no deadline, no dependency.
 */
typedef struct utls_sched_msg_st {
    uint8_t priority;     /* higher is sent first; equal ones in order of
                           * submission */
    uint8_t substream;    /* the sub-stream (0..255) the message belongs to:
                           * scopes squash tags and the playout clock, and is
                           * reported back in drop reports */
    uint32_t flags;       /* UTLS_SCHED_* */
    uint64_t squash_tag;  /* non-zero: this message replaces every older
                           * unsent message of its sub-stream with the same
                           * tag (they are dropped, UTLS_SCHED_DROP_SQUASHED) */
    uint64_t deadline_ns; /* UTLS_SCHED_DEADLINE: the CLOCK_MONOTONIC time by
                           * which the message should reach the receiver */
    uint64_t playout_ts;  /* UTLS_SCHED_PLAYOUT: when the receiver plays the
                           * message, in ticks of the sub-stream's clock (see
                           * UTLS_sched_set_clock) */
    uint64_t depends_on;  /* UTLS_SCHED_DEPENDS: the id of an earlier message
                           * that this one is useless without */
} UTLS_SCHED_MSG;

/* Why a message was dropped instead of sent. */
typedef enum {
    UTLS_SCHED_DROP_SQUASHED = 1, /* a newer message with its squash tag came */
    UTLS_SCHED_DROP_DEADLINE,     /* it would have arrived after its deadline */
    UTLS_SCHED_DROP_DEPENDENCY,   /* a message it depends on was dropped */
    UTLS_SCHED_DROP_TOO_LARGE     /* the record payload limit shrank below
                                   * it after submission (max_fragment_length,
                                   * explicit record numbers switched on) */
} UTLS_SCHED_DROP_REASON;

/* UTLS_SCHED_DROP reports one dropped message. */
typedef struct utls_sched_drop_st {
    uint64_t id;              /* the dropped message */
    UTLS_SCHED_DROP_REASON reason;
    uint64_t cause_id;        /* SQUASHED: the newer message; DEPENDENCY: the
                               * dropped message it depended on; else 0 */
    uint8_t priority;
    uint8_t substream;
    uint64_t squash_tag;
    size_t len;               /* plaintext bytes never sent */
    uint64_t dropped_ns;      /* CLOCK_MONOTONIC (or the UTLS_SCHED_ENV clock) */
    uint64_t deadline_ns;     /* the effective deadline, 0 if none */
    uint64_t est_arrival_ns;  /* DEADLINE: the arrival estimate that missed it */
} UTLS_SCHED_DROP;

/* UTLS_SCHED_STATS counts a scheduler's work. */
typedef struct utls_sched_stats_st {
    uint64_t submitted;          /* messages accepted by UTLS_sched_submit */
    uint64_t written;            /* messages handed to SSL_write_ex in full */
    uint64_t written_bytes;      /* their plaintext bytes */
    uint64_t overtaken;          /* written ahead of an earlier-submitted
                                  * message that was still queued */
    uint64_t dropped_squashed;
    uint64_t dropped_deadline;
    uint64_t dropped_dependency;
    uint64_t dropped_too_large;
    uint64_t refused;            /* submissions refused (size, queue, args) */
    uint64_t lowat_waits;        /* flushes stopped at the low-water mark */
    uint64_t drop_reports_lost;  /* reports discarded because nobody read them
                                  * (the oldest go first) */
    size_t queued_messages;      /* now waiting, the partial record included */
    size_t queued_bytes;
    uint64_t window_waits;       /* flushes stopped by the window reserve */
    /* probe_rtt_drain (docs/sched.md, "Draining ahead of BBR's ProbeRTT"): */
    uint64_t probe_rtt_seen;     /* BBR ProbeRTT entries observed */
    uint64_t probe_rtt_predicted; /* of those, entries a drain was under way
                                  * for (the others were missed: the first of
                                  * a connection, or a wrong prediction) */
    uint64_t probe_rtt_drains;   /* drains started */
    uint64_t probe_rtt_drains_wasted; /* drains that ended without a ProbeRTT
                                  * (BBR's min_rtt filter was refreshed
                                  * unseen, or the prediction was wrong) */
    uint64_t probe_rtt_drain_waits; /* flushes stopped by a drain (and not by
                                  * the window reserve alone) */
    uint64_t probe_rtt_drain_ns; /* time spent draining, all drains */
    uint64_t probe_rtt_held_bytes; /* plaintext bytes of priority-0 messages
                                  * that a drain made wait (each counted once,
                                  * when written) */
    uint64_t probe_rtt_next_ns;  /* the predicted next ProbeRTT entry on the
                                  * scheduler's clock, 0 if unknown */
    uint64_t probe_rtt_interval_ns; /* the learned time from BBR's min_rtt
                                  * refresh to ProbeRTT (10 s in Linux) */
} UTLS_SCHED_STATS;

/*
 * UTLS_TCP_INFO: what the kernel knows about a TCP connection (icTCP's
 * "information"), from TCP_INFO, TCP_CONGESTION and TCP_CC_INFO. Times in
 * microseconds, sizes in bytes unless the name says segments. Fields are only
 * ever appended.
 */
typedef struct utls_tcp_info_st {
    uint32_t srtt_us;           /* smoothed RTT (tcpi_rtt) */
    uint32_t rttvar_us;         /* RTT variance (tcpi_rttvar) */
    uint32_t min_rtt_us;        /* lowest RTT seen (tcpi_min_rtt) */
    uint32_t mss;               /* sender MSS (tcpi_snd_mss) */
    uint32_t cwnd_segs;         /* congestion window (tcpi_snd_cwnd) */
    uint32_t ssthresh_segs;     /* slow-start threshold (tcpi_snd_ssthresh) */
    uint32_t unacked_segs;      /* sent, not yet acknowledged (tcpi_unacked) */
    uint32_t lost_segs;         /* currently presumed lost (tcpi_lost) */
    uint64_t bytes_in_flight;   /* estimate: (unacked - sacked - lost +
                                 * retransmitted) segments * mss */
    uint64_t notsent_bytes;     /* written, not yet sent (tcpi_notsent_bytes) */
    uint64_t total_retrans;     /* retransmitted segments (tcpi_total_retrans) */
    uint64_t bytes_retrans;     /* retransmitted bytes (tcpi_bytes_retrans) */
    uint64_t delivery_rate;     /* bytes/s (tcpi_delivery_rate) */
    int delivery_rate_app_limited; /* the rate sample was application-limited */
    uint64_t pacing_rate;       /* bytes/s (tcpi_pacing_rate) */
    uint64_t max_pacing_rate;   /* bytes/s, ~0 if uncapped */
    uint8_t ca_state;           /* tcpi_ca_state: 0 open, 1 disorder, 2 CWR,
                                 * 3 recovery, 4 loss */
    char congestion_control[16]; /* TCP_CONGESTION, NUL-terminated ("" if
                                 * unknown) */
    int cc_is_bbr;              /* congestion_control is "bbr" and TCP_CC_INFO
                                 * returned its struct tcp_bbr_info */
    uint32_t bbr_min_rtt_us;    /* BBR's windowed min RTT (bbr_min_rtt); it
                                 * changes when BBR refreshes its min_rtt
                                 * filter. 0 unless cc_is_bbr */
    uint64_t bbr_bw;            /* BBR's bottleneck bandwidth estimate,
                                 * bytes/s. 0 unless cc_is_bbr */
} UTLS_TCP_INFO;

/*
 * UTLS_tcp_get_info fills |*out_info| for the TCP socket |fd|. Returns 1, or
 * 0 with UTLS_R_SCHED_TCP_INFO on the error queue (and errno set) if |fd| is
 * not a TCP socket. Fields the running kernel does not report are 0.
 */
int UTLS_tcp_get_info(int fd, UTLS_TCP_INFO *out_info);

/*-
 * Control, only in directions that are never more aggressive than TCP
 * (icTCP's rule: the application may restrain TCP, never push it).
 *
 * UTLS_tcp_set_window_clamp bounds the receive window |fd| advertises to
 * |bytes| (TCP_WINDOW_CLAMP). A smaller advertised window can only make the
 * peer send less, never more: the peer's congestion control still applies on
 * top of it, and the kernel never shrinks a window it already offered (RFC
 * 9293 3.8.6: the right edge is not moved left), nor goes below its own
 * minimum. |bytes| 0 is refused (it would stall the connection).
 *
 * UTLS_tcp_set_max_pacing_rate caps the rate at which |fd| sends to
 * |bytes_per_sec| (SO_MAX_PACING_RATE). TCP's own pacing rate, from its
 * congestion control, still applies below the cap: a cap can delay a segment,
 * never send one earlier or grow the window. ~0 removes the cap, which is
 * stock TCP again. |bytes_per_sec| must fit 32 bits on kernels older than 4.20
 * (the option was 32-bit there).
 *
 * Both return 1, or 0 with UTLS_R_SCHED_TCP_INFO on the error queue.
 */
int UTLS_tcp_set_window_clamp(int fd, uint32_t bytes);
int UTLS_tcp_set_max_pacing_rate(int fd, uint64_t bytes_per_sec);

/*
 * UTLS_SCHED_ENV replaces where the scheduler gets the time and the TCP
 * information, for simulations, tests and applications with their own clock.
 * now_ns returns a monotonic time in nanoseconds (the deadlines of this
 * scheduler are then on that clock). tcp_info fills *out like
 * UTLS_tcp_get_info and returns 1, or 0 if nothing is known (then nothing
 * gates writing and deadlines use an RTT of 0). NULL members keep the default
 * (CLOCK_MONOTONIC; TCP_INFO of SSL_get_wfd()).
 */
typedef struct utls_sched_env_st {
    uint64_t (*now_ns)(void *arg);
    int (*tcp_info)(void *arg, UTLS_TCP_INFO *out);
    void *arg;
} UTLS_SCHED_ENV;

/*
 * UTLS_sched_new returns a scheduler that writes to |s| (not owned: it must
 * outlive the scheduler), with |config| (copied; NULL for the defaults), or
 * NULL with an error on the queue (UTLS_R_SCHED_INVALID_CONFIG: a zero bound or
 * low-water mark, a window reserve over 16, probe_rtt_drain not 0 or 1). If
 * SSL_get_wfd(s) is a TCP socket, TCP_NOTSENT_LOWAT is set
 * on it to config->notsent_lowat, so that poll()/epoll report it writable only
 * when the scheduler will write.
 */
UTLS_SCHED *UTLS_sched_new(SSL *s, const UTLS_SCHED_CONFIG *config);

/*
 * UTLS_sched_free frees |sch| and every message still queued, without writing
 * or reporting them. A record partially handed to the kernel is left to the
 * SSL (call UTLS_sched_flush until it is done first). NULL-safe.
 */
void UTLS_sched_free(UTLS_SCHED *sch);

/* UTLS_sched_set_env sets |env| (copied; NULL restores the defaults). Returns 1. */
int UTLS_sched_set_env(UTLS_SCHED *sch, const UTLS_SCHED_ENV *env);

/*
 * UTLS_sched_set_clock sets the playout clock of |substream|: |hz| ticks per
 * second, and |playout_delay_ns|, the receiver's buffer. The first message of
 * the sub-stream submitted with a playout time P0 at time T0 starts the
 * timeline (as in unordered time-lined TCP): a message with playout time P has
 * the deadline T0 + srtt/2 + playout_delay_ns + (P - P0) / hz. Setting the
 * clock again restarts the timeline. Returns 1, or 0 (UTLS_R_SCHED_BAD_MESSAGE)
 * if |hz| is 0.
 */
int UTLS_sched_set_clock(UTLS_SCHED *sch, uint8_t substream, uint32_t hz,
                         uint64_t playout_delay_ns);

/*
 * UTLS_sched_submit queues a copy of |data| (|len| bytes) scheduled as |msg|
 * (NULL: all zero) and sets |*out_id| (if not NULL) to its id, which counts up
 * from 1. Squashing happens now. Returns 1, or 0 with an error on the queue
 * and nothing changed: UTLS_R_SCHED_MESSAGE_TOO_LARGE (|len| above one
 * record's payload, see UTLS_sched_max_message), UTLS_R_SCHED_QUEUE_FULL,
 * UTLS_R_SCHED_BAD_DEPENDENCY (depends_on is not an earlier id, or so old that
 * its fate is forgotten), UTLS_R_SCHED_NO_CLOCK (UTLS_SCHED_PLAYOUT on a
 * sub-stream without UTLS_sched_set_clock), UTLS_R_SCHED_BAD_MESSAGE (|len| 0,
 * unknown flags). A message that depends on one already dropped is accepted
 * and dropped at once (UTLS_SCHED_DROP_DEPENDENCY). Nothing is written: call
 * UTLS_sched_flush.
 */
int UTLS_sched_submit(UTLS_SCHED *sch, const void *data, size_t len, const UTLS_SCHED_MSG *msg,
                      uint64_t *out_id);

/*
 * UTLS_sched_max_message returns the largest message |sch| accepts now: the
 * SSL's record payload limit (max_send_fragment, split_send_fragment, a
 * negotiated max_fragment_length, less the 8 bytes of an explicit record
 * number once those are on).
 */
size_t UTLS_sched_max_message(const UTLS_SCHED *sch);

/* What UTLS_sched_flush and UTLS_sched_drain leave behind. */
typedef enum {
    UTLS_SCHED_IDLE = 0,    /* nothing queued: all written or dropped */
    UTLS_SCHED_WANT_WRITE,  /* messages wait for the socket: poll for POLLOUT */
    UTLS_SCHED_WANT_READ,   /* SSL_write_ex needs to read first (handshake):
                             * poll for POLLIN */
    UTLS_SCHED_ERROR,       /* SSL_write_ex failed (SSL_get_error() says why);
                             * the connection is unusable */
    UTLS_SCHED_WANT_TIMER   /* only with window_reserve_segs or a
                             * probe_rtt_drain under way: priority-0
                             * messages wait for TCP's congestion window,
                             * which no poll() event reports: flush again
                             * after UTLS_SCHED_WINDOW_RECHECK_MS (or sooner,
                             * e.g. when a new message is submitted) */
} UTLS_SCHED_RESULT;

/* UTLS_SCHED_WINDOW_RECHECK_MS: how long to wait on UTLS_SCHED_WANT_TIMER.
 * Acknowledgements open the window; 2 ms is well below the gap between them
 * when the window is small enough for the reserve to bind. */
# define UTLS_SCHED_WINDOW_RECHECK_MS 2

/*
 * UTLS_sched_flush drops what can no longer be useful, then writes as many
 * messages as the socket takes now: while the kernel holds fewer unsent bytes
 * than the low-water mark, the next message (highest priority, oldest first,
 * its queued dependency first) is checked against its deadline and written;
 * with window_reserve_segs, priority-0 messages also wait for room in TCP's
 * congestion window, and with probe_rtt_drain for BBR's predicted ProbeRTT
 * (UTLS_SCHED_WANT_TIMER).
 * It never blocks on a non-blocking socket; on a blocking one a write may
 * wait while the kernel drains to the low-water mark. Sets |*out_written| (if
 * not NULL) to the number of messages written, and returns the state.
 */
UTLS_SCHED_RESULT UTLS_sched_flush(UTLS_SCHED *sch, size_t *out_written);

/*
 * UTLS_sched_drain is UTLS_sched_flush for blocking code: it flushes, waits
 * with poll() on SSL_get_wfd() as the result asks, and repeats until the queue
 * is empty, an error, or |timeout_ms| passed (negative: no limit). Returns the
 * last state (UTLS_SCHED_WANT_WRITE or _READ on timeout).
 */
UTLS_SCHED_RESULT UTLS_sched_drain(UTLS_SCHED *sch, int timeout_ms);

/*
 * UTLS_sched_next_drop moves the oldest unread drop report to |*out_drop| and
 * returns 1, or returns 0 if there is none. At most 1024 reports are kept;
 * older ones are discarded and counted in drop_reports_lost.
 */
int UTLS_sched_next_drop(UTLS_SCHED *sch, UTLS_SCHED_DROP *out_drop);

/* UTLS_sched_drop_reason_string returns a static description of |reason|. */
const char *UTLS_sched_drop_reason_string(UTLS_SCHED_DROP_REASON reason);

/* UTLS_sched_get_stats copies |sch|'s counters. Returns 1, or 0 on NULL. */
int UTLS_sched_get_stats(const UTLS_SCHED *sch, UTLS_SCHED_STATS *out_stats);

/*
 * UTLS_sched_get_tcp_info fills |*out_info| from the scheduler's source (the
 * SSL's socket or UTLS_SCHED_ENV). Returns 1, or 0 if nothing is known.
 */
int UTLS_sched_get_tcp_info(UTLS_SCHED *sch, UTLS_TCP_INFO *out_info);

/*-
 * Sub-streams (docs/substreams.md)
 * ================================
 *
 * Several independent ordered streams over one connection: every record's
 * plaintext starts with a small header (format byte, stream id, per-stream
 * sequence number), and the receiver returns each stream's messages in that
 * stream's order, a stream never waiting for another stream's loss. Off by
 * default; both ends must call UTLS_stream_enable() (a peer that does not sees
 * the header bytes as data). Works with SSL_MODE_UNORDERED on (streams are
 * independent) and off (everything arrives in order anyway).
 */
# define UTLS_STREAM_MAX_STREAMS 256 /* stream ids 0..255, as UTLS_SCHED_MSG's */
# define UTLS_STREAM_MAX_HEADER  11  /* format byte + 2 + 8 varint bytes */
# define UTLS_STREAM_MAX_SEQ     ((UINT64_C(1) << 56) - 1) /* per stream */

/* UTLS_STREAM_INFO describes one message UTLS_stream_read() returned. */
typedef struct utls_stream_info_st {
    uint32_t stream_id;
    uint64_t seq;            /* its number within its stream: 0, 1, 2 ... */
    int held;                /* 1: it waited for an earlier message of its
                              * stream (or for a larger buffer) */
    UTLS_RECORD_INFO record; /* the record that carried it (zeroed when
                              * SSL_MODE_UNORDERED is off) */
} UTLS_STREAM_INFO;

/*
 * UTLS_stream_enable turns the sub-stream layer of |s| on (|on| non-zero) or
 * off. While it is on, every application record |s| reads must carry a
 * sub-stream header: read with UTLS_stream_read() only. Returns 1, or 0 with
 * UTLS_R_STREAM_BUSY when turning off while messages are held or a write is
 * pending (nothing changed). Turning it off and on keeps the sequence numbers.
 */
int UTLS_stream_enable(SSL *s, int on);

/*
 * UTLS_stream_write sends |len| bytes of |buf| as the next message of stream
 * |stream_id|, in one record. Returns 1 when the whole message was written,
 * 0 on failure: UTLS_R_STREAM_NOT_ENABLED, UTLS_R_STREAM_BAD_ID,
 * UTLS_R_STREAM_MESSAGE_TOO_LARGE (header + |len| above one record's payload,
 * see UTLS_stream_max_message), UTLS_R_STREAM_SEQ_EXHAUSTED (nothing written),
 * or a failed SSL_write_ex(): then SSL_get_error(); after SSL_ERROR_WANT_READ/
 * WRITE the call must be repeated with the same stream and length (the
 * message already has its sequence number). |buf| stays the caller's.
 */
int UTLS_stream_write(SSL *s, uint32_t stream_id, const void *buf, size_t len);

/*
 * UTLS_stream_max_message returns the largest |len| UTLS_stream_write() takes
 * on |s| now (one record's payload minus UTLS_STREAM_MAX_HEADER), 0 if |s| is
 * NULL.
 */
size_t UTLS_stream_max_message(const SSL *s);

/*
 * UTLS_stream_read returns the next deliverable message of any stream: a
 * message is deliverable when every earlier message of its own stream was
 * returned. Copies its payload into |buf| (at most |len| bytes), sets
 * |*out_read| and, if |out_info| is not NULL, |*out_info|. Returns 1, or 0:
 * SSL_get_error() tells SSL_ERROR_WANT_READ (nothing deliverable yet) from
 * errors; UTLS_R_BUFFER_TOO_SMALL consumes nothing; a malformed or
 * out-of-order header from the peer (UTLS_R_STREAM_BAD_HEADER, _BAD_VERSION,
 * _BAD_ID, _BAD_SEQ, _DUPLICATE, _GAP, _LIMIT) fails the layer for good:
 * every later call fails with UTLS_R_STREAM_FAILED. Nothing is ever returned
 * twice, out of its stream's order, or from a record that failed.
 */
int UTLS_stream_read(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_STREAM_INFO *out_info);

/* UTLS_STREAM_STATS: the sub-stream layer's counters. */
typedef struct utls_stream_stats_st {
    uint64_t messages_sent;
    uint64_t messages_received;  /* returned by UTLS_stream_read() */
    uint64_t messages_held;      /* of those, returned after waiting */
    size_t held_now;             /* messages waiting now */
    size_t held_bytes_now;
    size_t max_held;             /* the most that ever waited at once */
    int failed_reason;           /* the UTLS_R_STREAM_* that failed it, or 0 */
} UTLS_STREAM_STATS;

/* UTLS_stream_get_stats copies |s|'s counters to |*out_stats|. Returns 1, or 0
 * if an argument is NULL or the layer was never enabled. */
int UTLS_stream_get_stats(const SSL *s, UTLS_STREAM_STATS *out_stats);

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

/*-
 * Errors. uTLS reports its own errors under the library UTLS_get_lib():
 * ERR_GET_LIB(ERR_peek_error()) == UTLS_get_lib() and ERR_GET_REASON() one of
 * the reasons below; ERR_error_string() gives the text.
 */
/* mkerr.py: begin (generated from lib/reasons.txt: edit there) */
/* Receive path, segment and uTCP BIOs, the tap (100..119). */
/* record larger than the read buffer (nothing was consumed) */
# define UTLS_R_BUFFER_TOO_SMALL 100
/* not a uTLS segment BIO */
# define UTLS_R_NOT_A_SEGMENT_BIO 101
/* segment lies beyond the receive window */
# define UTLS_R_OUTSIDE_WINDOW 102
/* uTCP unit shorter than its 5-byte header */
# define UTLS_R_BAD_UTCP_UNIT 103
/* invalid uTLS limits */
# define UTLS_R_INVALID_LIMITS 104
/* stream offset plus length wraps past 2^64 */
# define UTLS_R_OFFSET_WRAPS 105
/* the tap needs CAP_NET_RAW (AF_PACKET sockets) */
# define UTLS_R_TAP_PERMISSION 106
/* the tap did not see this connection's SYN (no ISN) */
# define UTLS_R_TAP_NO_ISN 107
/* a socket call of the tap failed (errno in the detail) */
# define UTLS_R_TAP_SYSCALL 108
/* Send scheduler (120..139). */
/* message larger than one record's payload (the scheduler never splits) */
# define UTLS_R_SCHED_MESSAGE_TOO_LARGE 120
/* send scheduler queue full */
# define UTLS_R_SCHED_QUEUE_FULL 121
/* dependency is not an earlier message the scheduler knows */
# define UTLS_R_SCHED_BAD_DEPENDENCY 122
/* playout time on a sub-stream without a clock rate */
# define UTLS_R_SCHED_NO_CLOCK 123
/* invalid scheduler message (empty, or unknown flags) */
# define UTLS_R_SCHED_BAD_MESSAGE 124
/* invalid send scheduler configuration */
# define UTLS_R_SCHED_INVALID_CONFIG 125
/* TCP socket option call failed (not a TCP socket?) */
# define UTLS_R_SCHED_TCP_INFO 126
/* uCOBS (140..149). */
/* uCOBS datagram larger than UTLS_UCOBS_MAX_DATAGRAM */
# define UTLS_R_UCOBS_TOO_LARGE 140
/* uCOBS datagram larger than the buffer (it stays queued) */
# define UTLS_R_UCOBS_BUFFER_TOO_SMALL 141
/* uCOBS socket call failed */
# define UTLS_R_UCOBS_SYSCALL 142
/* Sub-streams (150..169). */
/* sub-streams are not enabled (UTLS_stream_enable) */
# define UTLS_R_STREAM_NOT_ENABLED 150
/* malformed sub-stream header (truncated, or a non-minimal varint) */
# define UTLS_R_STREAM_BAD_HEADER 151
/* unknown sub-stream header format (does the peer use sub-streams?) */
# define UTLS_R_STREAM_BAD_VERSION 152
/* sub-stream id out of range */
# define UTLS_R_STREAM_BAD_ID 153
/* sub-stream sequence number out of range (it would wrap) */
# define UTLS_R_STREAM_BAD_SEQ 154
/* duplicate sub-stream sequence number */
# define UTLS_R_STREAM_DUPLICATE 155
/* the peer skipped a sub-stream sequence number */
# define UTLS_R_STREAM_GAP 156
/* sub-stream reorder limit reached (too many held, or too far ahead) */
# define UTLS_R_STREAM_LIMIT 157
/* sub-stream message larger than one record's payload */
# define UTLS_R_STREAM_MESSAGE_TOO_LARGE 158
/* sub-stream sequence numbers exhausted */
# define UTLS_R_STREAM_SEQ_EXHAUSTED 159
/* the sub-stream layer failed earlier (see the first error) */
# define UTLS_R_STREAM_FAILED 160
/* sub-stream layer busy (messages held, or a write to repeat) */
# define UTLS_R_STREAM_BUSY 161
/* Explicit record numbers, out-of-sequence sending (170..189). */
/* explicit record numbers are not on in this direction */
# define UTLS_R_ERN_NOT_ON 170
/* empty or oversized record content, or output buffer too small */
# define UTLS_R_ERN_BAD_ARGUMENT 171
/* record number would leave UTLS_ERN_REORDER_WINDOW */
# define UTLS_R_ERN_WINDOW 172
/* not a sealed, unwritten record (written or dropped already?) */
# define UTLS_R_ERN_NOT_SEALED 173
/* another write is pending: complete it first */
# define UTLS_R_ERN_WRITE_PENDING 174
/* sealed records are not yet written: write or drop them first */
# define UTLS_R_ERN_SEALED_PENDING 175
/* the write key or sequence changed since sealing: sealed records void */
# define UTLS_R_ERN_STALE 176
/* the peer sent a record number it had sent before (replay) */
# define UTLS_R_ERN_REPLAY 177
/* the peer's record number is outside the reorder window */
# define UTLS_R_ERN_OUT_OF_WINDOW 178
/* the most recently sealed record cannot be dropped: write it */
# define UTLS_R_ERN_DROP_LAST 179
/*
 * a KeyUpdate or handshake message is owed: write or drop the sealed records first
 */
# define UTLS_R_ERN_HANDSHAKE_DUE 180
/* mkerr.py: end */

/* UTLS_get_lib returns the error library number of uTLS's errors. */
int UTLS_get_lib(void);

# ifdef __cplusplus
}
# endif

/* The modules' own headers. */
# include <openssl/utls_tapcheck.h>
#endif /* OPENSSL_UTLS_H */
