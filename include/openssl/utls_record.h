/*
 * <openssl/utls_record.h>: out-of-order record delivery: the mode bits,
 * UTLS_read_record(), the statistics and the limits.
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_RECORD_H
# define OPENSSL_UTLS_RECORD_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

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

/*
 * Every bit uTLS takes in SSL_set_mode()'s space: SSL_MODE_UTLS_UNORDERED,
 * SSL_MODE_UTLS_UNORDERED_PARTIAL and SSL_MODE_UTLS_NEGOTIATE (tests/abi
 * checks that it is their union).
 */
# define SSL_MODE_UTLS_ALL 0x00001a00U

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

/*
 * UTLS_get_stats_ex is UTLS_get_stats for a UTLS_STATS of |stats_size| bytes,
 * the caller's sizeof(UTLS_STATS) (UTLS_0.2). It writes the fields the caller's
 * layout has, and zeros in any this library does not fill. Returns 1, or 0 if
 * an argument is NULL or |stats_size| is below the structure's UTLS_0.1 size
 * or above 4 KiB (UTLS_R_STRUCT_SIZE on the queue; nothing written).
 */
int UTLS_get_stats_ex(const SSL *s, UTLS_STATS *out_stats, size_t stats_size);

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
 * UTLS_limits_default_ex is UTLS_limits_default for a UTLS_LIMITS of
 * |limits_size| bytes, the caller's sizeof(UTLS_LIMITS) (UTLS_0.2). Returns 1,
 * or 0 if |out_limits| is NULL or |limits_size| is not accepted (below the
 * UTLS_0.1 size or above 4 KiB: UTLS_R_STRUCT_SIZE on the queue).
 */
int UTLS_limits_default_ex(UTLS_LIMITS *out_limits, size_t limits_size);

/*
 * UTLS_set_limits sets |s|'s limits (copied). Returns 1, or 0 if a limit is
 * out of range (max_probes_per_record above 64, or a zero max_window with a
 * non-zero max_bytes_held). Takes effect for data that arrives afterwards.
 */
int UTLS_set_limits(SSL *s, const UTLS_LIMITS *limits);

/*
 * UTLS_set_limits_ex is UTLS_set_limits for a UTLS_LIMITS of |limits_size|
 * bytes, the caller's sizeof(UTLS_LIMITS) (UTLS_0.2). Limits that the caller's
 * older layout lacks take their defaults. A larger layout whose fields past
 * this library's are all zero is accepted; one that sets such a field is
 * refused with UTLS_R_STRUCT_SIZE, as is a size below the UTLS_0.1 size or
 * above 4 KiB. Returns 1, or 0 with the reason on the queue.
 */
int UTLS_set_limits_ex(SSL *s, const UTLS_LIMITS *limits, size_t limits_size);

/* UTLS_get_limits copies |s|'s limits to |*out_limits|. Returns 1. */
int UTLS_get_limits(const SSL *s, UTLS_LIMITS *out_limits);

/*
 * UTLS_get_limits_ex is UTLS_get_limits for a UTLS_LIMITS of |limits_size|
 * bytes (UTLS_0.2), with the size rules of UTLS_get_stats_ex().
 */
int UTLS_get_limits_ex(const SSL *s, UTLS_LIMITS *out_limits, size_t limits_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_RECORD_H */
