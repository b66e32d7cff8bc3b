/*
 * The functions OpenSSL's patched files call. Every call site is guarded by
 * (s->mode & SSL_MODE_UNORDERED) or by s->utls != NULL, so with the mode off
 * the fork runs upstream's code and nothing else.
 */
#ifndef UTLS_HOOKS_H
#define UTLS_HOOKS_H

#include <stddef.h>

#include <openssl/utls.h> /* SSL_MODE_UNORDERED */

typedef struct utls_conn_st utls_conn;
struct ssl_st;
struct ssl_ctx_st;
struct ssl3_record_st;

/*
 * utls_hook_state is the first member of the connection's uTLS state
 * (utls_conn): what the patched record code tests in place, so that a hook
 * with nothing to do costs a load and a branch instead of a call on every
 * in-order record (docs/unordered.md, PERFORMANCE). Only uTLS writes it.
 */
typedef struct utls_hook_state_st {
    /*
     * read_idle: utls_hook_read_bytes() returned UTLS_HOOK_PASS with nothing
     * held for the reader (no verified record waiting, no record returned in
     * parts, no rescan due), and the read BIO |idle_bio| then had no fragment
     * or wake-up pending (*|idle_pending| == 0, its utls_bio_signals). While
     * that holds and the BIO is the same, the hook would pass again. Cleared
     * by whatever can give the reader something (a key change, a reset).
     */
    int read_idle;
    const void *idle_bio;
    const size_t *idle_pending;
    /* may_skip: set for each record read in order (utls_hook_record_read):
     * records delivered out of order are waiting to be passed in order, so
     * utls_hook_skip_decrypt() may apply. */
    int may_skip;
} utls_hook_state;

/*
 * utls_hook_read_idle returns 1 when utls_hook_read_bytes() on connection
 * state |c| (NULL-safe) with read BIO |rbio| would return UTLS_HOOK_PASS
 * without doing anything, 0 when it must be called.
 */
static ossl_inline int utls_hook_read_idle(const utls_conn *c, const void *rbio)
{
    const utls_hook_state *h = (const utls_hook_state *)(const void *)c;

    return h != NULL && h->read_idle && h->idle_bio == rbio && *h->idle_pending == 0;
}

/* utls_hook_may_skip returns 1 when utls_hook_skip_decrypt() may apply to
 * the record just read in order on connection state |c| (NULL-safe). */
static ossl_inline int utls_hook_may_skip(const utls_conn *c)
{
    return c != NULL && ((const utls_hook_state *)(const void *)c)->may_skip;
}

/* SSL_free: forget all uTLS state. NULL-safe. */
void utls_conn_free(utls_conn *c);

/* SSL_clear: forget the stream (a new connection follows), keep the
 * settings (limits). NULL-safe. */
void utls_conn_clear(utls_conn *c);

/* ssl3_get_record: a whole record (header and body) has been read in order. */
void utls_hook_record_read(struct ssl_st *s, struct ssl3_record_st *rr);

/*
 * ssl3_get_record: the record was authenticated and decrypted in order. If it
 * was already delivered out of order, it is marked read (and empty) so that
 * ssl3_read_bytes skips it. Returns 0 after SSLfatal() (a wrong explicit
 * record number), 1 otherwise.
 */
int utls_hook_record_done(struct ssl_st *s, struct ssl3_record_st *rr);

/*
 * ssl3_get_record, before decryption: returns 1 if the record was already
 * delivered out of order and its bytes are exactly the bytes authenticated
 * then (same offset, same sequence number); it is then accounted for as if
 * decrypted (sequence number advanced) and marked read, and need not be
 * decrypted again. Returns 0 to decrypt it as usual.
 */
int utls_hook_skip_decrypt(struct ssl_st *s, struct ssl3_record_st *rr);

/*
 * utls_hook_skip_body: ssl3_get_record, once the header of the next record
 * |rr| is parsed (type, version, length) and before its body is read.
 * Returns 1 if the record is the next in sequence, was already delivered out
 * of order from the read BIO's own store at this very offset and length, the
 * store's epoch has not moved since (so the bytes the in-order path would
 * read are those authenticated then), and the BIO passed the body's bytes
 * unread (UTLS_BIO_CTRL_DISCARD). The record is then complete: accounted for
 * as if decrypted (sequence number advanced), marked read and empty, the
 * record layer ready for the next header. Returns 0, changing nothing, in
 * every other case (a private copy, read-ahead bytes in the read buffer, a
 * moved epoch, bytes not all received, explicit record numbers, pipelining,
 * not the first record of the read, SSL_MODE_UNORDERED off): the body is read
 * and handled as usual. Called only while utls_hook_may_skip(). Nothing is
 * owned.
 */
int utls_hook_skip_body(struct ssl_st *s, struct ssl3_record_st *rr);

/*
 * ssl3_read_bytes, before the in-order path and again when the in-order read
 * would block: returns UTLS_HOOK_HANDLED when it handled the read (delivered
 * an out-of-order record, or failed) with the value ssl3_read_bytes must
 * return in |*out_ret|; UTLS_HOOK_RETRY when a blocking read woke only for
 * fragments that completed no record (read in order again); UTLS_HOOK_PASS to
 * go on as stock OpenSSL would.
 */
#define UTLS_HOOK_PASS 0
#define UTLS_HOOK_HANDLED 1
#define UTLS_HOOK_RETRY 2
int utls_hook_read_bytes(struct ssl_st *s, unsigned char *buf, size_t len, int peek,
                         size_t *readbytes, int *out_ret);

/*
 * ssl3_read_bytes, before copying an in-order application record that is
 * longer than |len| (only then: the metadata and the count of a record
 * delivered in order are kept by utls_hook_record_done): returns 1 to go on
 * (SSL_MODE_UNORDERED_PARTIAL: the record is returned in parts), or 0 when
 * |len| cannot hold the whole record (the error is raised; nothing is
 * consumed).
 */
int utls_hook_deliver_inorder(struct ssl_st *s, struct ssl3_record_st *rr, size_t len);
/*
 * SSL_set0_rbio (and SSL_set_bio), after the old read BIO was freed: forgets
 * the pointers into it (its signals, its store), which a new BIO allocated at
 * the same address would otherwise seem to validate.
 */
void utls_hook_rbio_changed(struct ssl_st *s);

/* Plaintext held by uTLS that SSL_read() returns without waiting: records
 * verified past a hole and the rest of one returned in parts. */
size_t utls_hook_pending(const struct ssl_st *s);

/* SSL_CTX_new, after the system configuration: apply UTLS_MODE and
 * SSLKEYLOGFILE from the environment. */
void utls_hook_ctx_new(struct ssl_ctx_st *ctx);

/* The UTLSMode configuration command ("unordered", "off"): sets or clears the
 * mode bits on |ctx| and/or |s|. Returns 1, or 0 for an unknown value. */
int utls_conf_mode(struct ssl_ctx_st *ctx, struct ssl_st *s, const char *value);

/* ssl3_write_bytes, first: writes a negotiation message owed to the peer.
 * Returns 1 to go on, or <= 0 as ssl3_write_bytes would (retry later). */
int utls_hook_write_bytes(struct ssl_st *s);

/* ssl3_write_bytes: bytes each application record loses to its number. */
size_t utls_hook_write_overhead(struct ssl_st *s);

/* do_ssl3_write: puts the record number of pipe |pipe| in front of the
 * plaintext, and its length in |*out_len|. Returns 0 on failure. */
struct wpacket_st;
int utls_hook_write_prefix(struct ssl_st *s, struct wpacket_st *pkt, int type, size_t pipe,
                           size_t *out_len);

/*
 * utls_hook_tls12_key_set: tls1_change_cipher_state keyed |ctx| for |which|
 * (SSL3_CC_READ/WRITE bits; on 3.5 through utls_hook35_tls12_key_set(),
 * |ctx| the new record layer's) with the raw |key| and the |iv_len| bytes of
 * |iv| from the key block (AES-GCM: the 4-byte salt; CBC: the 16-byte IV).
 * With SSL_MODE_UTLS_NEGOTIATE a TLS 1.2 server sets the explicit nonce its
 * first AES-GCM record starts from to the ERN offer (AES-CBC: arms
 * utls_hook_tls12_cbc_iv), and a reader keeps a copy of the key and IV
 * (docs/ern.md). Nothing is owned. Returns 0 on an internal error, 1
 * otherwise (also when nothing applies).
 */
struct evp_cipher_ctx_st;
int utls_hook_tls12_key_set(struct ssl_st *s, int which, struct evp_cipher_ctx_st *ctx,
                            const unsigned char *key, size_t key_len, const unsigned char *iv,
                            size_t iv_len);

/*
 * utls_hook_tls12_cbc_iv: tls1_enc() (3.5: tls1_cipher()) drew the random
 * explicit IV block |iv| (|iv_len| bytes) of a TLS 1.1+ CBC record about to
 * be encrypted. A TLS 1.2
 * server owing its ERN offer replaces it, in its first record under the new
 * write key only (docs/ern.md). Nothing is owned.
 */
void utls_hook_tls12_cbc_iv(struct ssl_st *s, unsigned char *iv, size_t iv_len);

/* The read key changed (handshake, KeyUpdate, renegotiation). */
void utls_hook_read_key_changed(struct ssl_st *s);

/*
 * utls_hook_ern_pre_decrypt: ssl3_get_record, before the record |rr| is
 * decrypted. When the peer's records carry numbers it finds the record's
 * number with the one-block test among the unseen numbers of the reorder
 * window and sets the read sequence (the nonce, the MAC's seq_num) to it.
 * Returns 1 to go on, 0 after SSLfatal() (a replayed number, or one outside
 * the window).
 */
int utls_hook_ern_pre_decrypt(struct ssl_st *s, struct ssl3_record_st *rr);

/*
 * utls_hook_no_sealed_records: SSL_key_update(), SSL_renegotiate*(),
 * SSL_shutdown(), SSL_new_session_ticket(), SSL_verify_client_post_handshake():
 * returns 0 (UTLS_R_ERN_SEALED_PENDING on the queue) while sealed records are
 * unwritten: what they start would take a number above them or change the
 * key under them. Returns 1 otherwise.
 */
int utls_hook_no_sealed_records(struct ssl_st *s);

/*
 * utls_hook_write_record_allowed: do_ssl3_write, before a record of |type|
 * is built: returns 0 (UTLS_R_ERN_SEALED_PENDING on the queue, nothing
 * written) while sealed records are unwritten, unless this is the sealing
 * itself; the caller retries later. Returns 1 otherwise.
 */
int utls_hook_write_record_allowed(struct ssl_st *s, int type);

#endif
