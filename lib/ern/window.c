/*
 * Explicit record numbers on the receive side, without the record layer:
 * the one-block test of a candidate number, the in-order receive window,
 * the hints the out-of-order side leaves, and the search for an
 * out-of-order record's own number (docs/ern.md).
 */
#include <string.h>

#include <openssl/evp.h>

#include "common/utls_conn.h"

#include "utls/be64.h"

void utls_ern_keys_clear(utls_ern_keys *k)
{
    EVP_CIPHER_CTX_free(k->ctx);
    OPENSSL_cleanse(k, sizeof(*k));
}

void utls_ern_read_key_changed(utls_conn *c, int update)
{
    utls_ern_keys t;

    if (!update) {
        c->ern.cur.valid = 0; /* made again from the new key when needed */
        return;
    }
    /* A KeyUpdate: the next key's one-block test keys become the current
     * ones; the next ones are made again when needed. */
    t = c->ern.cur;
    c->ern.cur = c->ern.next;
    c->ern.next = t;
    c->ern.next.valid = 0;
}

/*
 * utls_ern_block_matches: does the record |wire| decrypt, in its first 8
 * plaintext bytes and under the nonce for |seq|, to |seq| itself? One block
 * cipher operation; no tag is checked (the full AEAD check follows).
 */
int utls_ern_block_matches(utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                           uint64_t seq)
{
    unsigned char nonce[12], blk[16], ks[64], want[UTLS_ERN_LEN];
    /* where the plaintext starts, for keystream; 0 when |ks| is plaintext */
    size_t pt_off = SSL3_RT_HEADER_LENGTH;
    int outl, i;

    if (!k->valid || wire_len < SSL3_RT_HEADER_LENGTH + UTLS_ERN_LEN)
        return 0;
    /* RFC 8446 5.3: nonce = iv XOR (0^4 || seq) */
    memcpy(nonce, k->iv, 12);
    for (i = 0; i < 8; i++)
        nonce[4 + i] ^= (unsigned char)(seq >> (56 - 8 * i));
    switch (k->kind) {
    case UTLS_ERN_KIND_GCM12:
        /* RFC 5288 3: nonce = salt || the record's explicit nonce, whatever
         * |seq| is; only the comparison depends on the candidate. */
        if (wire_len < SSL3_RT_HEADER_LENGTH + UTLS_GCM12_EXPLICIT_LEN + UTLS_ERN_LEN)
            return 0;
        memcpy(blk, k->iv, UTLS_GCM12_SALT_LEN);
        memcpy(blk + UTLS_GCM12_SALT_LEN, wire + SSL3_RT_HEADER_LENGTH, UTLS_GCM12_EXPLICIT_LEN);
        blk[12] = blk[13] = blk[14] = 0;
        blk[15] = 2;
        if (EVP_EncryptUpdate(k->ctx, ks, &outl, blk, 16) <= 0)
            return 0;
        pt_off += UTLS_GCM12_EXPLICIT_LEN;
        break;
    case UTLS_ERN_KIND_CBC12:
        /* RFC 5246 6.2.3.2: IV || blocks; P1 = D(C1) XOR IV, whatever |seq|
         * is; the IV is the wire's first block. The MAC check follows. */
        if (wire_len < SSL3_RT_HEADER_LENGTH + 2 * 16)
            return 0;
        if (EVP_CipherUpdate(k->ctx, ks, &outl, wire + SSL3_RT_HEADER_LENGTH + 16, 16) <= 0
            || outl != 16)
            return 0;
        /* The plaintext itself, not keystream: XOR the IV in, no ciphertext. */
        for (i = 0; i < UTLS_ERN_LEN; i++)
            ks[i] ^= wire[SSL3_RT_HEADER_LENGTH + i];
        pt_off = 0;
        break;
    case UTLS_ERN_KIND_GCM:
        /* NIST SP 800-38D: J0 = nonce || 1; the first plaintext block uses 2. */
        memcpy(blk, nonce, 12);
        blk[12] = blk[13] = blk[14] = 0;
        blk[15] = 2;
        if (EVP_EncryptUpdate(k->ctx, ks, &outl, blk, 16) <= 0)
            return 0;
        break;
    case UTLS_ERN_KIND_CCM:
        /* RFC 3610: A_i = flags(L-1 = 2) || nonce || i, first payload block i = 1. */
        blk[0] = 2;
        memcpy(blk + 1, nonce, 12);
        blk[13] = blk[14] = 0;
        blk[15] = 1;
        if (EVP_EncryptUpdate(k->ctx, ks, &outl, blk, 16) <= 0)
            return 0;
        break;
    case UTLS_ERN_KIND_CHACHA: {
        /* RFC 8439 2.8: the payload starts at block counter 1. */
        unsigned char iv[16] = {1, 0, 0, 0};
        static const unsigned char zero[UTLS_ERN_LEN];

        memcpy(iv + 4, nonce, 12);
        if (EVP_EncryptInit_ex(k->ctx, NULL, NULL, k->key, iv) <= 0
            || EVP_EncryptUpdate(k->ctx, ks, &outl, zero, UTLS_ERN_LEN) <= 0)
            return 0;
        break;
    }
    default:
        return 0;
    }
    utls_store_be64(want, seq);
    if (pt_off != 0) /* keystream: the plaintext is it XOR the ciphertext */
        for (i = 0; i < UTLS_ERN_LEN; i++)
            ks[i] ^= wire[pt_off + i];
    return CRYPTO_memcmp(ks, want, UTLS_ERN_LEN) == 0;
}

/* --- Out of order: the record's own number ----------------------------------- */

/* utls_ern_inorder_seen: the in-order side authenticated |n| under the current key
 * (n is in the window below ern_rx_next and marked), or |n| lies below that
 * window (processed, or a gap that can no longer be filled). Only meaningful
 * while the read sequence is ern_rx_next (between records, same key). */
int utls_ern_inorder_seen(const utls_conn *c, uint64_t n)
{
    uint64_t d;

    if (n >= c->ern.rx_next)
        return 0;
    d = c->ern.rx_next - 1 - n;
    return d >= UTLS_ERN_REORDER_WINDOW || ((c->ern.rx_seen >> d) & 1) != 0;
}

/* utls_ern_hint_find: the number found before for the record at |offset| under
 * the current key generation. Returns 1 and sets |*out_n| if there is one. */
int utls_ern_hint_find(const utls_conn *c, uint64_t offset, uint64_t *out_n)
{
    size_t i;

    for (i = 0; i < c->ern.num_hints; i++)
        if (c->ern.hint[i].offset == offset && c->ern.hint[i].gen == c->rx.gen) {
            *out_n = c->ern.hint[i].number;
            return 1;
        }
    return 0;
}

/* utls_ern_hint_add remembers |n| for the record at |offset| (replacing what was
 * remembered there, else the oldest entry). */
void utls_ern_hint_add(utls_conn *c, uint64_t offset, uint64_t n)
{
    size_t i;

    if (c->ern.hint == NULL
        && (c->ern.hint = OPENSSL_malloc(UTLS_ERN_HINTS * sizeof(*c->ern.hint))) == NULL)
        return; /* a hint only spares a search */
    for (i = 0; i < c->ern.num_hints; i++)
        if (c->ern.hint[i].offset == offset)
            break;
    if (i == c->ern.num_hints) {
        i = c->ern.hint_next;
        c->ern.hint_next = (c->ern.hint_next + 1) % UTLS_ERN_HINTS;
        if (c->ern.num_hints < UTLS_ERN_HINTS)
            c->ern.num_hints++;
    }
    c->ern.hint[i].offset = offset;
    c->ern.hint[i].number = n;
    c->ern.hint[i].gen = c->rx.gen;
}

int utls_ern_ooo_find(utls_conn *c, utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                      uint64_t offset, uint64_t guess, uint64_t floor, int current,
                      uint64_t *out_seq)
{
    /* Below the in-order window: processed in order, or a gap that can no
     * longer be filled (docs/ern.md, "Receiving"). The next key starts at 0. */
    uint64_t lo = current && floor > UTLS_ERN_REORDER_WINDOW ? floor - UTLS_ERN_REORDER_WINDOW : 0;
    /* The bitmap speaks for the current key only while the read sequence is
     * its ern_rx_next (after a KeyUpdate it is stale until the next numbered
     * record resets it). */
    int use_seen = current && c->ern.rxw_valid && c->ern.rx_next == floor;
    /* Numbers found at other offsets, relative to |base|. */
    uint64_t taken[(UTLS_ERN_OOO_MAX_CHECKS + 63) / 64] = {0};
    uint64_t center = guess == UTLS_ERN_NO_GUESS ? 0 : guess, base, d, n;
    uint64_t tested = UTLS_ERN_NO_GUESS; /* the guess, once tested */
    size_t i;

    if (current) {
        /*
         * Around the highest number known before this record in the stream
         * + 1, as the in-order check searches around top + 1: the sender
         * writes within a window of the highest number it had written. The
         * predictor's guess (exact for TLS 1.2 AES-GCM, whose explicit nonce
         * pins the number) is tested first.
         */
        center = floor;
        for (i = 0; i < c->ern.num_hints; i++)
            if (c->ern.hint[i].gen == c->rx.gen && c->ern.hint[i].offset < offset
                && c->ern.hint[i].number >= center)
                center = c->ern.hint[i].number + 1;
        if (utls_ern_hint_find(c, offset, &n)) {
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
    }
    base = center > UTLS_ERN_OOO_SPAN ? center - UTLS_ERN_OOO_SPAN : 0;
    for (i = 0; current && i < c->ern.num_hints; i++) {
        n = c->ern.hint[i].number;
        if (c->ern.hint[i].gen == c->rx.gen && c->ern.hint[i].offset != offset && n >= base
            && n - base < UTLS_ERN_OOO_MAX_CHECKS)
            taken[(n - base) / 64] |= (uint64_t)1 << ((n - base) % 64);
    }
    if (current && guess != UTLS_ERN_NO_GUESS && guess != center && guess >= lo
        && !(use_seen && utls_ern_inorder_seen(c, guess))) {
        c->stats.ern_block_checks++;
        if (utls_ern_block_matches(k, wire, wire_len, guess)) {
            n = guess;
            goto found;
        }
        tested = guess;
    }
    for (d = 0; d <= UTLS_ERN_OOO_SPAN; d++) {
        /* Nearest first: center + d, then center - d. */
        n = center + d;
        if (n >= center && n != tested
            && ((taken[(n - base) / 64] >> ((n - base) % 64)) & 1) == 0) {
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
        if (d == 0 || d > center || (n = center - d) < lo || n == tested
            || (use_seen && utls_ern_inorder_seen(c, n))
            || ((taken[(n - base) / 64] >> ((n - base) % 64)) & 1) != 0)
            continue;
        c->stats.ern_block_checks++;
        if (utls_ern_block_matches(k, wire, wire_len, n))
            goto found;
    }
    return 0;
found:
    if (current)
        utls_ern_hint_add(c, offset, n);
    *out_seq = n;
    return 1;
}

int utls_ern_window_note(utls_conn *c, uint64_t seq)
{
    uint64_t shift;

    if (!c->ern.rx || !c->ern.rxw_valid)
        return 0;
    if (!c->ern.rx_checked) {
        /* Not looked at before decryption (a handshake record, or one under
         * a new key): decrypted under the counted sequence. In sequence, it
         * extends the window; otherwise numbering restarts with the next
         * record (utls_hook_ern_pre_decrypt). */
        if (seq != c->ern.rx_next) {
            c->ern.rxw_valid = 0;
            return 0;
        }
    }
    c->ern.rx_checked = 0;
    if (seq >= c->ern.rx_next) {
        shift = seq - c->ern.rx_next + 1;
        c->ern.rx_seen = shift >= 64 ? 0 : c->ern.rx_seen << shift;
        c->ern.rx_seen |= 1;
        c->ern.rx_next = seq + 1;
    } else if (c->ern.rx_next - 1 - seq < UTLS_ERN_REORDER_WINDOW) {
        c->ern.rx_seen |= (uint64_t)1 << (c->ern.rx_next - 1 - seq);
    }
    /* Between records the read sequence is to be the highest number seen
     * + 1 (the glue sets it: utls_ern_rx_done). */
    return 1;
}

int utls_ern_rx_find(utls_conn *c, utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                     uint64_t ctr, int have_hint, uint64_t hint, uint64_t *out_n)
{
    uint64_t n, w = UTLS_ERN_REORDER_WINDOW;
    int i;

    if (!c->ern.rxw_valid || ctr != c->ern.rx_next) {
        /* The first numbered record, or a new key: numbers restart here. */
        c->ern.rxw_valid = 1;
        c->ern.rx_next = ctr;
        /* Every number below was taken by a record already processed. */
        c->ern.rx_seen = ~(uint64_t)0;
    }
    c->ern.rx_checked = 1;
    if (!k->valid)
        return UTLS_ERN_RX_COUNTED; /* no test possible: in sequence, as before */
    /* The trivial window: the sender did not reorder. One block. */
    c->stats.ern_block_checks++;
    if (utls_ern_block_matches(k, wire, wire_len, ctr))
        return UTLS_ERN_RX_COUNTED;
    /* The number the out-of-order side found for this record, if it is one
     * the loop below would accept: one block instead of a search. */
    if (have_hint && hint != ctr
        && (hint > ctr ? hint - ctr < w
                       : ctr - 1 - hint < w && ((c->ern.rx_seen >> (ctr - 1 - hint)) & 1) == 0)) {
        c->stats.ern_block_checks++;
        if (utls_ern_block_matches(k, wire, wire_len, hint)) {
            *out_n = hint;
            return UTLS_ERN_RX_FOUND;
        }
    }
    /*
     * Nearest first: ahead of the highest number seen (top = ctr - 1), and
     * the unseen numbers behind it, by distance. A sender that reorders
     * within a short span pays a few block tests, not a window's worth.
     */
    for (i = 0; i < (int)w; i++) {
        n = ctr + (uint64_t)i;
        if (i > 0 && n > ctr) {
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
        if ((uint64_t)i < ctr && ((c->ern.rx_seen >> i) & 1) == 0) {
            n = ctr - 1 - (uint64_t)i;
            c->stats.ern_block_checks++;
            if (utls_ern_block_matches(k, wire, wire_len, n))
                goto found;
        }
    }
    /* A number seen before: the same record again. Tested only now, so
     * that an honest sender never pays for it. */
    for (i = 0; i < (int)w && (uint64_t)i < ctr; i++) {
        if (((c->ern.rx_seen >> i) & 1) == 0)
            continue;
        n = ctr - 1 - (uint64_t)i;
        if (utls_ern_block_matches(k, wire, wire_len, n)) {
            *out_n = n;
            return UTLS_ERN_RX_REPLAY;
        }
    }
    /*
     * No number in the window. Records without a number (TLS 1.3 handshake
     * messages, alerts) and damaged ones are decrypted with the counted
     * sequence and pass or fail the AEAD/MAC check as before. Only to name
     * the error, look one window further each way: a sender that keeps the
     * rules never writes there.
     */
    for (n = ctr + w; n < ctr + 2 * w && n > ctr; n++)
        if (utls_ern_block_matches(k, wire, wire_len, n)) {
            *out_n = n;
            return UTLS_ERN_RX_OUTSIDE;
        }
    for (i = 0; i < (int)w && ctr > w + (uint64_t)i; i++) {
        n = ctr - w - 1 - (uint64_t)i;
        if (utls_ern_block_matches(k, wire, wire_len, n)) {
            *out_n = n;
            return UTLS_ERN_RX_OUTSIDE;
        }
    }
    return UTLS_ERN_RX_COUNTED;
found:
    *out_n = n;
    return UTLS_ERN_RX_FOUND;
}
