/*
 * The hook interface is one for both bases: the 3.5 hook patches include
 * "utls/utls_hooks.h" (ssl/utls is a link to this folder), which is the
 * shared lib/glue/utls_hooks.h. The path is relative to this file's real
 * folder, so it resolves the same from every file that includes ssl_local.h,
 * OpenSSL's own test programs included.
 *
 * Below it, the calls that only 3.5's record layer makes (patches 0004-0010).
 */
#include "../utls_hooks.h"

#ifndef UTLS_HOOKS35_H
#define UTLS_HOOKS35_H

struct ssl_connection_st;
struct tls_record_st;
struct ossl_record_layer_st;
struct tls_rl_record_st;

/*
 * utls_hook35_record_read: ssl3_read_bytes() took record |rr| from the read
 * record layer, in order (authenticated and decrypted). Called only with
 * SSL_MODE_UNORDERED: notes where the record lies in the stream (an anchor
 * for the records past a hole), counts application records
 * (UTLS_get_stats) and keeps the record's metadata for UTLS_read_record().
 * A record that was already delivered out of order is emptied here, in
 * |rr| and in the record layer, so that ssl3_read_bytes() releases it and
 * reads on: delivered exactly once. With SSL_MODE_UTLS_NEGOTIATE it calls
 * utls_hook35_ern_record() before it looks at the plaintext (for a record
 * it emptied, after: the receive window only). Returns 1 to go on, 0 after
 * SSLfatal().
 */
int utls_hook35_record_read(struct ssl_connection_st *s, struct tls_record_st *rr);

/*
 * utls_hook35_deliver_inorder: ssl3_read_bytes(), before copying an in-order
 * application record |rr| longer than |len|: returns 1 to go on
 * (SSL_MODE_UNORDERED_PARTIAL: the record is returned in parts), or 0 when
 * |len| cannot hold the whole record (the error is raised; nothing is
 * consumed).
 */
int utls_hook35_deliver_inorder(struct ssl_connection_st *s, struct tls_record_st *rr,
                                size_t len);

/*
 * utls_hook35_read_key_changed: ssl_set_new_record_layer() installed a new
 * read record layer at protection |level| (OSSL_RECORD_PROTECTION_LEVEL_*).
 * Called only when the connection has uTLS state: a new application key
 * after the handshake starts a new key generation.
 */
void utls_hook35_read_key_changed(struct ssl_connection_st *s, int level);

/*
 * utls_hook35_wakeup_only: ssl3_read_bytes(), when a read that is not for
 * application data (the handshake's) would block with SSL_MODE_UNORDERED:
 * returns 1 when the read BIO (a blocking tap) returned early only because
 * segments past a hole were captured; they are taken (nothing is delivered
 * during the handshake) and the read goes back to waiting in order. Returns
 * 0 to fail the read as stock OpenSSL would.
 */
int utls_hook35_wakeup_only(struct ssl_connection_st *s);

/*
 * utls_hook35_skip_decrypt: tls_get_more_records(), once the whole record
 * |rr| is read and before it is decrypted (read record layer |rl|, whose
 * callback argument is the SSL_CONNECTION). Returns 1 if the record is the
 * next in sequence and was already delivered out of order with exactly these
 * bytes (same stream offset, length and sequence number; the same bytes in
 * the connection's copy, or the same epoch of the read BIO's store); it is
 * then accounted for as if decrypted (the read sequence number counts it)
 * and returned empty as application data, which utls_hook35_record_read()
 * skips. Returns 0, changing nothing, to decrypt it as usual.
 */
int utls_hook35_skip_decrypt(struct ossl_record_layer_st *rl, struct tls_rl_record_st *rr);

/*
 * utls_hook35_ern_pre_decrypt: tls_get_more_records(), once the whole record
 * |rr| is read and before it is decrypted (read record layer |rl|, whose
 * callback argument is the SSL_CONNECTION), with SSL_MODE_UTLS_NEGOTIATE.
 * When the peer's records carry numbers (docs/ern.md) it finds the record's
 * number with the one-block test among the unseen numbers of the reorder
 * window and sets the layer's read sequence (the TLS 1.3 nonce) to it.
 * Returns 1 to go on, 0 when the record is fatal (a replayed number, or one
 * outside the window: the uTLS reason is raised and |rl|'s alert set).
 */
int utls_hook35_ern_pre_decrypt(struct ossl_record_layer_st *rl, struct tls_rl_record_st *rr);

/*
 * utls_hook35_ern_record: ssl3_read_bytes() took record |rr| from the read
 * record layer in order, with SSL_MODE_UTLS_NEGOTIATE and uTLS state (from
 * utls_hook35_record_read() with SSL_MODE_UNORDERED, before it looks at the
 * plaintext; directly without). Moves the receive window (the layer's read
 * sequence becomes the highest number seen + 1), takes the peer's switch
 * token and strips the record number, in |rr| and in the record layer's
 * record. A TLS 1.2 client also looks for the server's offer in the first
 * record under its new read key (patch 0010). Returns 1 to go on, 0 after
 * SSLfatal() (a numbered record whose number is not its sequence number).
 */
int utls_hook35_ern_record(struct ssl_connection_st *s, struct tls_record_st *rr);

/*
 * utls_hook35_ern_write_prefix: tls_write_records_default(), before the
 * plaintext of the record of |type| in pipe |pipe| is copied into |pkt|
 * (write record layer |rl|, record |wr|), with SSL_MODE_UTLS_NEGOTIATE:
 * writes what this endpoint puts in front of an application record (an
 * owed accept or switch token, the record number) and its length in
 * |*out_len|, which the caller adds to the record's length after the
 * plaintext. Returns 0 when |pkt| has no room.
 */
struct wpacket_st;
int utls_hook35_ern_write_prefix(struct ossl_record_layer_st *rl, struct wpacket_st *pkt,
                                 int type, size_t pipe, struct tls_rl_record_st *wr,
                                 size_t *out_len);

/*
 * utls_hook35_tls12_key_set: tls1_change_cipher_state() installed a new TLS
 * 1.0-1.2 record layer for |direction| (OSSL_RECORD_DIRECTION_*), keyed with
 * the raw |key| (|key_len| bytes) and the |iv_len| bytes of |iv| from the
 * key block, with SSL_MODE_UTLS_NEGOTIATE. When the layer is 3.5's own TLS
 * record method it passes its cipher context to utls_hook_tls12_key_set():
 * a TLS 1.2 server sets the explicit nonce its first AES-GCM record starts
 * from to the ERN offer (AES-CBC: arms utls_hook_tls12_cbc_iv(), which
 * tls1_cipher() calls), a reader keeps a copy of the key and IV
 * (docs/ern.md). Nothing is owned. Returns 0 on an internal error, 1
 * otherwise (also when nothing applies).
 */
int utls_hook35_tls12_key_set(struct ssl_connection_st *s, int direction,
                              const unsigned char *key, size_t key_len,
                              const unsigned char *iv, size_t iv_len);

/*
 * utls_hook35_skip_body: tls_get_more_records(), once the header of record
 * |rr| is read and before its body is (read record layer |rl|, whose
 * callback argument is the SSL_CONNECTION). Returns 1 if the record is the
 * next in sequence, was already delivered out of order, and the read BIO's
 * own store still holds the very bytes authenticated then (the same epoch,
 * utls_bio_signals.store): its body is then passed in the BIO unread, the
 * record counted as if decrypted and left empty, complete and of one record
 * for the caller to return, as utls_hook35_skip_decrypt() leaves it. Only
 * for the first record of a read, with the header alone in the read buffer
 * (no read-ahead). Returns 0, changing nothing, to read the body as usual.
 */
int utls_hook35_skip_body(struct ossl_record_layer_st *rl, struct tls_rl_record_st *rr);

#endif
