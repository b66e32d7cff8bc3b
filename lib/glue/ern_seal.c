/*
 * Sending explicit record numbers out of sequence order (docs/ern.md):
 * UTLS_ern_seal() and friends, and the write hooks that hold other records
 * back while sealed ones are unwritten. The same source on both bases
 * (lib/glue/3.5/ern_seal.c is a one-line wrapper): what builds a record
 * without writing it and what writes a sealed one are per base
 * (utls_ern_seal_build, utls_ern_sealed_start and utls_ern_sealed_write in
 * lib/glue/ern_hooks.c and lib/glue/3.5/ern.c).
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "glue_local.h"

/* The big-endian helpers (core/). */
#include "utls/be64.h"

/*
 * ern_tx_usable: this direction's numbers are on. Not refused in a
 * handshake after the first: sealing sends what is owed first
 * (ern_send_owed), and writing or dropping sealed records must stay possible
 * while a handshake message waits for them (utls_hook_write_record_allowed);
 * the write key cannot change before that message is out.
 */
static utls_conn *ern_tx_usable(SSL *s)
{
    utls_conn *c = s != NULL ? UTLS_CONN_OF(s) : NULL;

    if (c == NULL || !c->ern.tx || c->ern.token_due != 0
        || (SSL_get_wbio(s) != NULL && BIO_get_ktls_send(SSL_get_wbio(s)))) {
        utls_raise(UTLS_R_ERN_NOT_ON, "UTLS_ERN_TX is off (status 0x%x)",
                   s != NULL ? UTLS_ern_status(s) : 0);
        return NULL;
    }
    return c;
}

/*
 * ern_send_owed: before a new number is taken, send what the library owes
 * the peer, as SSL_write() would: a KeyUpdate the peer asked for (RFC 8446
 * 4.6.3: "prior to sending its next Application Data record"), a ticket
 * (SSL_new_session_ticket), a CertificateRequest. With sealed records
 * unwritten it cannot (it would take a number above them, or change the key
 * under them): UTLS_R_ERN_HANDSHAKE_DUE until they are written or dropped.
 * Returns 1 when nothing is owed any more, 0 otherwise (SSL_get_error()
 * tells a retry from an error).
 */
static int ern_send_owed(SSL *s, utls_conn *c)
{
    UTLS_TLS_CONN *sc = UTLS_TLS_OF(s);
    int r;

    if (sc->key_update == SSL_KEY_UPDATE_NONE && sc->ext.extra_tickets_expected == 0
        && !SSL_in_init(s))
        return 1;
    if (c->ern.num_sealed > 0) {
        utls_raise(UTLS_R_ERN_HANDSHAKE_DUE, "%zu sealed records unwritten",
                   c->ern.num_sealed);
        return 0;
    }
    /* The same steps as ssl3_write_bytes() before an application record. */
    if (!SSL_in_init(s)) {
        if (RECORD_LAYER_write_pending(&sc->rlayer) || c->ern.wpending) {
            /* Enter the state machine only with nothing half written (as
             * ssl3_write_bytes): finish the pending write first. */
            utls_raise(UTLS_R_ERN_WRITE_PENDING, "complete the pending write first");
            return 0;
        }
        ossl_statem_set_in_init(sc, 1);
    }
    /* Also resumes a message the state machine wrote only partly. */
    r = sc->handshake_func(s);
    if (r <= 0)
        return 0; /* SSLfatal() called, or a retry (SSL_ERROR_WANT_*) */
    if (SSL_in_init(s) || sc->key_update != SSL_KEY_UPDATE_NONE) {
        utls_raise(UTLS_R_ERN_HANDSHAKE_DUE, "a handshake is in progress");
        return 0;
    }
    return 1;
}

int UTLS_ern_seal(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                  size_t *out_len, uint64_t *out_number)
{
    utls_conn *c;
    uint64_t m;
    size_t written = 0, slot, need;

    if ((c = ern_tx_usable(s)) == NULL)
        return 0;
    if ((SSL_get_shutdown(s) & SSL_SENT_SHUTDOWN) != 0) {
        /* As SSL_write(): nothing after our close_notify. */
        ERR_raise(ERR_LIB_SSL, SSL_R_PROTOCOL_IS_SHUTDOWN);
        return 0;
    }
    /*
     * TLS 1.3 record padding (a callback or block padding, applied by the
     * record writer) pads up to the maximum fragment whatever the content:
     * then only UTLS_ERN_SEAL_MAX_RECORD bounds the record. Checked before a
     * number is taken, so a small buffer loses nothing.
     */
    need = utls_ern_padding_on(s) ? UTLS_ERN_SEAL_MAX_RECORD : len + UTLS_ERN_SEAL_OVERHEAD;
    if (buf == NULL || out == NULL || out_len == NULL || out_number == NULL || len == 0
        || len > UTLS_ERN_SEAL_MAX_CONTENT
        || len + UTLS_ERN_LEN > ssl_get_max_send_fragment(UTLS_TLS_OF(s)) || out_cap < need) {
        utls_raise(UTLS_R_ERN_BAD_ARGUMENT, "content %zu bytes, buffer %zu (needs %zu)", len,
                   out_cap, need);
        return 0;
    }
    if (!ern_send_owed(s, c))
        return 0;
    if (RECORD_LAYER_write_pending(&UTLS_TLS_OF(s)->rlayer) || c->ern.wpending) {
        utls_raise(UTLS_R_ERN_WRITE_PENDING, "complete the pending write first");
        return 0;
    }
    m = utls_ern_write_seq(s);
    if (c->ern.num_sealed == 0 && m < c->ern.tx_top_next)
        c->ern.tx_top_next = m; /* a new key: its numbers restart at 0 */
    if (c->ern.num_sealed > 0 && m != c->ern.seal_next) {
        /* Something else was written after the last seal (a KeyUpdate,
         * renegotiation, an alert): the sealed records cannot be written. */
        utls_ern_slots_clear(c);
        utls_raise(UTLS_R_ERN_STALE, "write sequence %llu, sealed up to %llu",
                   (unsigned long long)m, (unsigned long long)c->ern.seal_next);
        return 0;
    }
    if (m - utls_ern_seal_low(c, m) >= UTLS_ERN_REORDER_WINDOW
        || m >= c->ern.tx_top_next + UTLS_ERN_REORDER_WINDOW || m == UINT64_MAX) {
        utls_raise(UTLS_R_ERN_WINDOW, "number %llu: write or drop older sealed records first",
                   (unsigned long long)m);
        return 0;
    }
    if (!utls_ern_slots_make(c))
        return 0;
    slot = (size_t)(m % UTLS_ERN_REORDER_WINDOW);
    if (c->ern.slot[slot].state != UTLS_ERN_SLOT_FREE) { /* excluded by the window */
        utls_raise(UTLS_R_ERN_WINDOW, "slot of %llu in use", (unsigned long long)m);
        return 0;
    }
    /* One record with the next number, built by the base's own record
     * writer and copied to |out| without being written. The record number
     * goes in front of the content through the write prefix hook, as for
     * any record. */
    c->ern.sealing = 1;
    if (!utls_ern_seal_build(s, buf, len, out, out_cap, &written)) {
        c->ern.sealing = 0;
        return 0; /* SSLfatal() already called */
    }
    c->ern.sealing = 0;
    if (written < SSL3_RT_HEADER_LENGTH + UTLS_ERN_SEAL_TAIL || utls_ern_write_seq(s) != m + 1) {
        SSLfatal(UTLS_TLS_OF(s), SSL_AD_INTERNAL_ERROR, ERR_R_INTERNAL_ERROR);
        return 0;
    }
    c->ern.slot[slot].state = UTLS_ERN_SLOT_SEALED;
    c->ern.slot[slot].number = m;
    c->ern.slot[slot].len = written;
    memcpy(c->ern.slot[slot].tail, out + written - UTLS_ERN_SEAL_TAIL, UTLS_ERN_SEAL_TAIL);
    c->ern.num_sealed++;
    c->ern.seal_next = m + 1;
    *out_len = written;
    *out_number = m;
    return 1;
}

int UTLS_ern_write_sealed(SSL *s, const unsigned char *rec, size_t len)
{
    utls_conn *c;
    int slot;

    if ((c = ern_tx_usable(s)) == NULL)
        return 0;
    /* Ciphertext compared with ciphertext: public bytes, memcmp is fine. */
    slot = utls_ern_find_sealed(c, rec, len);
    if (c->ern.wpending) {
        /* A partial write: only the same record may go on. */
        if (slot < 0 || c->ern.slot[slot].number != c->ern.wpending_number) {
            utls_raise(UTLS_R_ERN_WRITE_PENDING, "record %llu is partly written",
                       (unsigned long long)c->ern.wpending_number);
            return 0;
        }
        goto write;
    }
    if (slot < 0) {
        utls_raise(UTLS_R_ERN_NOT_SEALED, "%zu bytes", len);
        return 0;
    }
    if (RECORD_LAYER_write_pending(&UTLS_TLS_OF(s)->rlayer)) {
        utls_raise(UTLS_R_ERN_WRITE_PENDING, "an SSL_write() is pending: complete it first");
        return 0;
    }
    if (utls_ern_write_seq(s) != c->ern.seal_next) {
        /* The key changed or another record took a number: this record's
         * nonce and number belong to a state the peer has left. */
        utls_ern_slots_clear(c);
        utls_raise(UTLS_R_ERN_STALE, "sealed records are void");
        return 0;
    }
    /* Into the write buffer, as the record writer leaves a record it could
     * not write at once: the next step writes it, and repeats a partial
     * write. */
    if (!utls_ern_sealed_start(s, rec, len))
        return 0;
    c->ern.wpending = 1;
    c->ern.wpending_number = c->ern.slot[slot].number;
    if (c->ern.slot[slot].number >= c->ern.tx_top_next)
        c->ern.tx_top_next = c->ern.slot[slot].number + 1;
write:
    if (!utls_ern_sealed_write(s, len))
        return 0; /* SSL_get_error(): retry with the same record */
    c->ern.wpending = 0;
    OPENSSL_cleanse(&c->ern.slot[slot], sizeof(c->ern.slot[slot]));
    c->ern.num_sealed--;
    return 1;
}

int UTLS_ern_drop(SSL *s, uint64_t number)
{
    utls_conn *c;
    size_t slot = (size_t)(number % UTLS_ERN_REORDER_WINDOW);

    if ((c = ern_tx_usable(s)) == NULL)
        return 0;
    if (c->ern.slot == NULL || c->ern.slot[slot].state != UTLS_ERN_SLOT_SEALED
        || c->ern.slot[slot].number != number
        || (c->ern.wpending && c->ern.wpending_number == number)) {
        utls_raise(UTLS_R_ERN_NOT_SEALED, "number %llu", (unsigned long long)number);
        return 0;
    }
    /*
     * The most recently sealed record is always written: then, once no sealed
     * record is left, the next record of any kind (application data, and
     * also a KeyUpdate, ticket or alert, which carry no number) has the
     * number after the peer's highest, the one it counts; and the next
     * number never runs ahead of the window.
     */
    if (number + 1 == c->ern.seal_next) {
        utls_raise(UTLS_R_ERN_DROP_LAST, "number %llu", (unsigned long long)number);
        return 0;
    }
    OPENSSL_cleanse(&c->ern.slot[slot], sizeof(c->ern.slot[slot]));
    c->ern.num_sealed--;
    return 1;
}

size_t UTLS_ern_num_sealed(const SSL *s)
{
    const utls_conn *c = s != NULL ? UTLS_CONN_OF(s) : NULL;

    return c != NULL ? c->ern.num_sealed : 0;
}

int utls_hook_write_bytes(SSL *s)
{
    const utls_conn *c = UTLS_CONN_OF(s);

    /* Nothing to send on its own: an owed accept or switch travels in front
     * of the next application record (utls_hook_write_prefix), so that the
     * record count on the wire is what stock OpenSSL would send. */
    if (c != NULL && (c->ern.num_sealed > 0 || c->ern.wpending)) {
        /* Its record would take a number above the sealed ones and the
         * write buffer may hold a partly written sealed record. */
        utls_raise(UTLS_R_ERN_SEALED_PENDING, "%zu sealed records unwritten",
                   c->ern.num_sealed);
        return -1;
    }
    return 1;
}

int utls_hook_no_sealed_records(SSL *s)
{
    const utls_conn *c = UTLS_CONN_OF(s);

    if (c == NULL || c->ern.num_sealed == 0)
        return 1;
    utls_raise(UTLS_R_ERN_SEALED_PENDING, "%zu sealed records unwritten", c->ern.num_sealed);
    return 0;
}

int utls_hook_write_record_allowed(SSL *s, int type)
{
    const utls_conn *c = UTLS_CONN_OF(s);

    /* The sealed record being built, or nothing sealed: any record goes. */
    if (c == NULL || c->ern.num_sealed == 0
        || (c->ern.sealing && type == SSL3_RT_APPLICATION_DATA))
        return 1;
    /*
     * Any other record (a handshake message the library answers with, an
     * alert) would take a number above the sealed ones; the peer, still
     * counting below them, would fail it with bad_record_mac. It waits: the
     * call that wanted it fails, and the next call after the sealed records
     * are written or dropped sends it (the state machine resumes where it
     * stopped, as after a partial write).
     */
    utls_raise(UTLS_R_ERN_SEALED_PENDING, "record type %d waits for %zu sealed records", type,
               c->ern.num_sealed);
    return 0;
}
