/*
 * <openssl/utls_ern.h>: explicit record numbers and out-of-sequence sending (docs/ern.md).
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_ERN_H
# define OPENSSL_UTLS_ERN_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

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

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_ERN_H */
