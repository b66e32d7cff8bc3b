/*
 * uharness.h: pieces shared by the in-process test and the interop relay:
 * self-describing messages (index + length + checksum), throwaway
 * certificates, a client/server pair whose server reads through the segment
 * BIO, and a check that a weak reference to the uTLS API resolved.
 */
#ifndef UTLS_TESTS_UHARNESS_H
#define UTLS_TESTS_UHARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>
#include <openssl/x509.h>

/*-
 * A message is
 *   "uTLS" | index (u32 BE) | total length (u32 BE) | body | FNV-1a-64 (u64 BE)
 * where the body is a function of (index, position), so that a receiver can
 * tell a message's identity and integrity from its bytes alone.
 */
#define UH_MSG_MIN 20
#define UH_MSG_MAX 16384

/* uh_msg_build writes message |index| of |len| bytes (UH_MSG_MIN..UH_MSG_MAX)
 * to |out|. Returns 1, or 0 if |len| is out of range. */
int uh_msg_build(uint8_t *out, uint32_t index, size_t len);

/* uh_msg_check returns 1 if |msg|[0..len) is exactly one intact message and
 * sets |*out_index|; 0 otherwise. */
int uh_msg_check(const uint8_t *msg, size_t len, uint32_t *out_index);

/* uh_msg_peek_len returns the total length a message header claims, or 0 if
 * fewer than 12 bytes or no magic. */
size_t uh_msg_peek_len(const uint8_t *msg, size_t len);

/* uh_make_identity creates a throwaway self-signed certificate: ECDSA P-256
 * if |ec|, else RSA-2048. The caller owns both. Returns 1 or 0. */
int uh_make_identity(int ec, EVP_PKEY **out_key, X509 **out_cert);

/* uh_key, uh_cert: the group's test identity (ECDSA P-256), made by
 * uh_identity_setup and freed by uh_identity_teardown; NULL outside them.
 * The harness owns both; tests borrow them. */
extern EVP_PKEY *uh_key;
extern X509 *uh_cert;

/* uh_identity_setup is a cmocka group setup: it makes uh_key/uh_cert with
 * uh_make_identity(1, ...). |state| is unused. Returns 0, or -1 if the
 * identity could not be made (cmocka then runs no test of the group). */
int uh_identity_setup(void **state);

/* uh_identity_teardown is the matching cmocka group teardown: it frees
 * uh_key/uh_cert and sets them to NULL. Returns 0. */
int uh_identity_teardown(void **state);

/*-
 * A TLS 1.3 client and server in one process, the server reading through
 * UTLS_BIO_s_segment(): the test hands it the client's bytes as TCP segments
 * at stream offsets (UTLS_BIO_segment_push at |base|), in any order; the
 * client writes into the memory BIO |c_out|.
 */
typedef struct {
    SSL_CTX *sctx, *cctx;
    SSL *c, *s;
    BIO *c_in, *c_out; /* the client's memory BIOs (owned by |c|) */
    BIO *seg;          /* the server's segment BIO (owned by |s|) */
    uint64_t base;     /* stream offset of the next byte the client writes */
    BIO *utcp;         /* with uh_pair_opts.utcp: the server's uTCP filter BIO
                        * (owned by |s|), |seg| is then NULL */
    BIO *units;        /* ... and the unit queue under it (owned by |utcp|) */
} uh_seg_pair;

/* uh_pair_opts: what uh_seg_pair_new_opts sets up. Zero is uh_seg_pair_new's
 * TLS 1.3 pair. */
typedef struct {
    uint64_t server_mode;       /* SSL_set_mode on the server (0: none) */
    const char *tls12_cipher;   /* non-NULL: client limited to TLS 1.2 with
                                 * this cipher list */
    const char *tls13_suites;   /* non-NULL: both ends' TLS 1.3 ciphersuites */
    int no_etm;                 /* client: SSL_OP_NO_ENCRYPT_THEN_MAC (TLS 1.2
                                 * CBC then uses MAC-then-encrypt) */
    int utcp;                   /* server reads through UTLS_BIO_f_utcp() over
                                 * an in-memory unit queue (uh_BIO_s_units) */
    uint64_t client_mode;       /* SSL_set_mode on the client (0: none) */
    int tls13_tickets;          /* TLS 1.3: session tickets the server sends
                                 * after the handshake (0: none; the ERN offer
                                 * rides in them, docs/ern.md) */
} uh_pair_opts;

/* uh_pair_contexts zeroes |p| and makes its contexts and endpoints as
 * uh_seg_pair_new_opts does (the server with |key|/|cert|, the versions,
 * suites and tickets of |o|), the client with fresh memory BIOs |c_in| and
 * |c_out| not yet attached, and no server BIO and no handshake: for tests
 * that give the server a read BIO of their own. Returns 1, or 0 if a context
 * refused an option (the endpoints may still be NULL; check them). */
int uh_pair_contexts(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, const uh_pair_opts *o);

/* uh_seg_pair_new fills |p|: a server with |key|/|cert| (borrowed; the
 * contexts take their own references), no session tickets, SSL_set_mode
 * |server_mode| (0: none), and a client that wants TLS 1.3; then runs the
 * handshake, passing the client's flight to the server in order. Returns 1 if
 * the server finished the handshake, 0 otherwise (|p| must still be freed
 * with uh_seg_pair_free). */
int uh_seg_pair_new(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, uint64_t server_mode);

/* uh_seg_pair_new_tls12 is uh_seg_pair_new with a client limited to TLS 1.2
 * and the cipher list |tls12_cipher| (NULL: exactly uh_seg_pair_new). */
int uh_seg_pair_new_tls12(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, uint64_t server_mode,
                          const char *tls12_cipher);

/* uh_seg_pair_new_opts is uh_seg_pair_new with the options |o| (copied).
 * Returns 1 if the server finished the handshake, 0 otherwise (|p| must
 * still be freed with uh_seg_pair_free). */
int uh_seg_pair_new_opts(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, const uh_pair_opts *o);

/* uh_pair_push gives the server |len| bytes of the client's stream at stream
 * offset |offset|: UTLS_BIO_segment_push on the segment BIO, or one uTCP
 * unit per 64 KiB (flags, 32-bit offset, data) queued for the uTCP BIO.
 * Returns what UTLS_BIO_segment_push returns (1 for a queued unit). */
int uh_pair_push(uh_seg_pair *p, uint64_t offset, const void *data, size_t len);

/* uh_pair_push_eof marks the end of the client's stream at |offset| (a uTCP
 * unit with UTLS_UTCP_FLAG_EOF on the uTCP transport). Returns 1 or 0. */
int uh_pair_push_eof(uh_seg_pair *p, uint64_t offset);

/* uh_pair_write_record has the client write the |len| bytes at |plain| as
 * one record and moves what that put on the wire into a new buffer: on
 * success |*out_wire| (malloc'd, the caller frees it) holds |*out_wire_len|
 * bytes that start at stream offset |*out_off|, and |p->base| points past
 * them. Returns 1, or 0 if the write, the allocation or the read failed
 * (|*out_wire| is then NULL). */
int uh_pair_write_record(uh_seg_pair *p, const void *plain, size_t len, uint8_t **out_wire,
                         size_t *out_wire_len, uint64_t *out_off);

/* uh_read_wants_read returns 1 if SSL_read_ex on |s| delivers nothing and
 * SSL_get_error says SSL_ERROR_WANT_READ (nothing to deliver yet), else 0. */
int uh_read_wants_read(SSL *s);

/* uh_read_record clears the error queue and reads one record from |s| with
 * UTLS_read_record() into |buf| (|len| bytes), setting |*out_len| and
 * |*out_info|. Returns 1, or 0 after printing |what|, the expected record
 * |r|, SSL_get_error and the error queue (then emptied) to stderr. */
int uh_read_record(SSL *s, const char *what, long r, void *buf, size_t len, size_t *out_len,
                   UTLS_RECORD_INFO *out_info);

/* uh_pair_take_output moves up to |len| bytes the server wrote into |buf|;
 * returns how many. */
size_t uh_pair_take_output(uh_seg_pair *p, uint8_t *buf, size_t len);

/*-
 * uh_BIO_s_units: an in-memory stand-in for a SOCK_SEQPACKET socket under
 * the uTCP BIO. uh_units_push() queues one unit; each BIO_read() returns one
 * whole unit (cut to the read's length) or retries when none is queued;
 * BIO_write() appends to an output buffer that uh_units_take_output()
 * drains. Not thread-safe.
 */
const BIO_METHOD *uh_BIO_s_units(void);

/* uh_units_push queues a copy of |len| bytes as one unit on |b|. Returns 1,
 * or 0 if memory ran out. */
int uh_units_push(BIO *b, const void *data, size_t len);

/* uh_units_take_output moves up to |len| written bytes of |b| into |buf|
 * and returns how many. */
size_t uh_units_take_output(BIO *b, void *buf, size_t len);

/* uh_seg_pair_free frees what uh_seg_pair_new made (the SSLs own the BIOs). */
void uh_seg_pair_free(uh_seg_pair *p);

/* uh_errors_to_stderr prints and clears OpenSSL's error queue. */
void uh_errors_to_stderr(const char *what);

/* uh_monotonic_ns: CLOCK_MONOTONIC in nanoseconds. */
uint64_t uh_monotonic_ns(void);

/* uh_libssl_path returns the path of the libssl.so.3 mapped into this process
 * (from /proc/self/maps), or "" if none. */
const char *uh_libssl_path(void);

/* uh_pid_maps_libssl returns the path of the libssl.so.3 mapped into |pid|
 * (or "" if none, or not readable yet) in |buf|. */
const char *uh_pid_maps_libssl(int pid, char *buf, size_t len);

/* uh_utls_error_queued returns 1 if an error of uTLS's library with reason
 * |reason| (UTLS_R_*) is on the thread's error queue, 0 if not; the queue is
 * emptied either way. */
int uh_utls_error_queued(int reason);

#endif /* UTLS_TESTS_UHARNESS_H */
