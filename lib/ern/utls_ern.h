/*
 * Explicit record numbers (docs/ern.md), lib/ern/: the constants, the raw
 * read keys of the one-block test, and the pure parts (the receive window,
 * the hints, the out-of-order number search, the sealed slots). The parts
 * that touch the record layer (negotiation, the write and read hooks) are
 * in lib/glue/ern_*.c.
 */
#ifndef UTLS_LIB_ERN_H
#define UTLS_LIB_ERN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/utls.h>

typedef struct utls_conn_st utls_conn;

/* Explicit record numbers (docs/ern.md). */
/* RFC 8446 4.2: 65280-65535 are reserved for private use. "u" = 0x75. */
#define UTLS_ERN_EXT_TYPE 0xFF75

#define UTLS_ERN_LABEL "EXPORTER-uTLS-ERN-v1"

/* The record number in front of a numbered record's plaintext. */
#define UTLS_ERN_LEN 8

/* RFC 5288 3: a TLS 1.2 AES-GCM record is explicit nonce (8) || ciphertext
 * || tag; the nonce is salt (4, from the key block) || explicit nonce. */
#define UTLS_GCM12_EXPLICIT_LEN 8

#define UTLS_GCM12_SALT_LEN 4
#define UTLS_ERN_TOKEN_LEN 16
#define UTLS_ERN_OFFER 0  /* index into utls_ern_state.token; also "due" values: */
#define UTLS_ERN_ACCEPT 1 /* the client owes the server its accept */
#define UTLS_ERN_SWITCH 2 /* the server owes the client its switch */
#define UTLS_ERN_KIND_GCM 1
#define UTLS_ERN_KIND_CCM 2
#define UTLS_ERN_KIND_CHACHA 3
#define UTLS_ERN_KIND_GCM12 4 /* TLS 1.2 AES-GCM: salt || explicit nonce */
#define UTLS_ERN_KIND_CBC12 5 /* TLS 1.2 AES-CBC: explicit IV, then blocks */
/* TLS 1.2: the offer, the whole 16-byte explicit IV of an AES-CBC record
 * (RFC 5246 6.2.3.2), or its first 8 bytes as an AES-GCM explicit nonce
 * (RFC 5288 3). */
#define UTLS_ERN_OFFER12_LEN 16
/* Sealed records are recognised by their last 16 bytes (AEAD tag, or the
 * last CBC block): unique per record with overwhelming probability. */
#define UTLS_ERN_SEAL_TAIL 16
#define UTLS_ERN_SLOT_FREE 0
#define UTLS_ERN_SLOT_SEALED 1
/* Out of order, what a header's own number said (utls_ern_state.ooo_verdict):
 * nothing (no number matched: tried as before), a number of the key tried
 * matched (no other key generation is tried), or it matched and the record
 * is settled (verified, or left to the in-order path): not retried. */
#define UTLS_ERN_OOO_NONE 0
#define UTLS_ERN_OOO_MATCHED 1
#define UTLS_ERN_OOO_SETTLED 2
/*
 * UTLS_ERN_OOO_SPAN: how far on each side of its center (the highest number
 * known before the record in the stream, + 1) the out-of-order path looks
 * for a record's own number. The sender writes every record within
 * UTLS_ERN_REORDER_WINDOW of the highest number it had written (docs/ern.md,
 * "The window"), and that is at least the highest number before the record.
 * Attack bounded: a forged plausible header (the tap sees segments before
 * TCP validates them) costs at most UTLS_ERN_OOO_MAX_CHECKS (+ 2: the number
 * found there before, the predictor's guess) one-block tests per key
 * generation each time it is tried, and a header whose number matched is
 * not tried again.
 */
#define UTLS_ERN_OOO_SPAN UTLS_ERN_REORDER_WINDOW
#define UTLS_ERN_OOO_MAX_CHECKS (2 * UTLS_ERN_OOO_SPAN + 1)
/*
 * UTLS_ERN_HINTS: how many (offset, number) pairs found out of order are
 * remembered (a ring; the oldest is forgotten). A record whose number the
 * out-of-order side already found costs the in-order check one block test,
 * and its number is skipped when other headers are searched. Attack bounded:
 * a hint is only the first candidate tried, never trusted (the block test
 * and the AEAD check decide), so a forged segment can cost at most one
 * extra block test per record, and the ring is fixed size.
 */
#define UTLS_ERN_HINTS 64
/* No predicted number to try first (utls_ern_ooo_find). */
#define UTLS_ERN_NO_GUESS UINT64_MAX
typedef struct {
    uint64_t offset;
    uint64_t number;
    uint32_t gen;
} utls_ern_hint;

/* Raw key material of one read key, for the one-block candidate test. */
typedef struct {
    int valid;
    int kind;
    EVP_CIPHER_CTX *ctx;  /* AES-ECB keyed, or ChaCha20 (keyed per use) */
    unsigned char key[32]; /* ChaCha20 only */
    unsigned char iv[12];
} utls_ern_keys;

/* A record sealed out of sequence order and not yet written (UTLS_ern_seal). */
typedef struct {
    int state; /* UTLS_ERN_SLOT_* */
    uint64_t number;
    size_t len;
    unsigned char tail[UTLS_ERN_SEAL_TAIL]; /* the record's last bytes: its tag or MAC */
} utls_ern_slot;

/* The per-connection state of explicit record numbers: the negotiation and
 * both directions (utls_conn_st.ern). */
typedef struct {
    int tokens_ready;
    unsigned char token[3][UTLS_ERN_TOKEN_LEN];
    int offered;         /* server: the offer went out */
    int accepted;        /* client: the accept went out */
    int token_due;       /* UTLS_ERN_ACCEPT/SWITCH to send, or 0 */
    int flush_pending;   /* UTLS_ern_flush() is waiting to be retried */
    unsigned char flush_buf[1];
    int tx;              /* our application records carry numbers */
    int rx;              /* the peer's do (in order, from here on) */
    utls_ern_keys cur, next;
    /* TLS 1.2 (docs/ern.md): the offer, whether the client looked for it,
     * and the raw AES read key and IV (secret; the key block they come from
     * is freed at the end of the handshake) for the one-block test. */
    unsigned char offer12[UTLS_ERN_OFFER12_LEN];
    int tls12_checked;
    int tls12_cbc_offer_due; /* server: the next CBC explicit IV is the offer */
    int tls12_rx_valid;
    size_t tls12_rx_key_len;
    unsigned char tls12_rx_key[32];
    unsigned char tls12_rx_iv[16]; /* GCM: the 4-byte salt; CBC: the first chaining IV */
    /* Out-of-sequence sending (UTLS_ern_seal): sealed unwritten records,
     * slot = number mod UTLS_ERN_REORDER_WINDOW (they all lie in one window).
     * UTLS_ERN_REORDER_WINDOW of them, made at the first seal
     * (utls_ern_slots_make): most connections never seal, and a server
     * with thousands of them would otherwise hold 2.5 KiB each. */
    utls_ern_slot *slot;
    size_t num_sealed;
    int sealing;          /* inside UTLS_ern_seal: do not count as written */
    uint64_t seal_next;   /* the write sequence after the last seal */
    uint64_t tx_top_next; /* highest number written under this key, + 1 */
    int wpending;         /* a sealed record is partly written */
    uint64_t wpending_number;
    /* Receiving numbers out of sequence order: rx_next is the highest
     * number seen + 1 (the read sequence between records); bit i of
     * rx_seen is number rx_next - 1 - i. */
    int rxw_valid;
    int rx_checked; /* utls_hook_ern_pre_decrypt saw the current record */
    uint64_t rx_next;
    uint64_t rx_seen;
    /* What the last out-of-order try learnt from the record's own number
     * (UTLS_ERN_OOO_*, utls_ern_ooo_find). */
    int ooo_verdict;
    /* Numbers the out-of-order side matched, by stream offset, so that the
     * in-order check and later tries of the same header test them first. */
    utls_ern_hint *hint; /* UTLS_ERN_HINTS of them, made at the first added */
    size_t num_hints, hint_next;
} utls_ern_state;

void utls_ern_keys_clear(utls_ern_keys *k);
/* utls_ern_read_key_changed: the read key changed; |update|: by a KeyUpdate
 * after the handshake (the next key's test keys become the current ones),
 * otherwise the current ones are made again from the new key. */
void utls_ern_read_key_changed(utls_conn *c, int update);
int utls_ern_block_matches(utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                           uint64_t seq);
/* utls_ern_ooo_find looks for the own number of the record |wire| at stream
 * offset |offset| (found past a hole) under the read key |k|. With |current|
 * (the current key, whose read sequence is |floor|): first the number found
 * before at |offset| (UTLS_ERN_HINTS), then |guess| (the predictor's, or
 * UTLS_ERN_NO_GUESS), then nearest first around the highest number known
 * before |offset| + 1, up to UTLS_ERN_OOO_SPAN on each side, skipping numbers
 * below the in-order window (|floor| - UTLS_ERN_REORDER_WINDOW), those the
 * in-order side authenticated and those found at other offsets. For the next
 * key: nearest first around |guess| (0 without one). At most
 * UTLS_ERN_OOO_MAX_CHECKS + 2 block tests, each counted in
 * c->stats.ern_block_checks. Returns 1 and sets |*out_seq| if a number
 * matched (remembered for |offset| under the current key), 0 if none did. */
int utls_ern_ooo_find(utls_conn *c, utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                      uint64_t offset, uint64_t guess, uint64_t floor, int current,
                      uint64_t *out_seq);

/* What utls_ern_rx_find found for a record read in order. */
#define UTLS_ERN_RX_COUNTED 0 /* decrypt it under the counted sequence number */
#define UTLS_ERN_RX_FOUND 1   /* decrypt it under *out_n */
#define UTLS_ERN_RX_REPLAY 2  /* *out_n was seen before: fatal */
#define UTLS_ERN_RX_OUTSIDE 3 /* *out_n lies outside the window: fatal */
/* utls_ern_rx_find: the record |wire| (|wire_len| bytes, header included),
 * read in order from a peer whose records carry numbers while the read
 * sequence counts |ctr|, is about to be decrypted under the read key |k|.
 * Finds its number with the one-block test (docs/ern.md "Receiving"):
 * |ctr| first, then |hint| (with |have_hint|: the number the out-of-order
 * side found at this record's offset), then nearest first among the unseen
 * numbers of the window; only then the seen numbers (a replay) and one
 * window further each way (to name the error). Restarts the window when
 * |ctr| is not the highest number seen + 1 (a new key). Returns a
 * UTLS_ERN_RX_* value; every block test but the error search is counted in
 * c->stats.ern_block_checks. Base-neutral: the glue sets the read sequence
 * and raises the fatal alert. */
int utls_ern_rx_find(utls_conn *c, utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                     uint64_t ctr, int have_hint, uint64_t hint, uint64_t *out_n);
/* utls_ern_window_note: the record numbered |seq| was authenticated in
 * order: mark it seen in the receive window. Returns 1 when the read
 * sequence is to be set to c->ern_rx_next (the highest number + 1), 0 when
 * it stays (no window, or numbering restarts with the next record). */
int utls_ern_window_note(utls_conn *c, uint64_t seq);
/* utls_ern_inorder_seen: the in-order side authenticated |n| under the
 * current key, or |n| lies below the receive window. */
int utls_ern_inorder_seen(const utls_conn *c, uint64_t n);
/* utls_ern_hint_find: the number found out of order at |offset|, if any
 * (returns 1 and sets |*out_n|). */
int utls_ern_hint_find(const utls_conn *c, uint64_t offset, uint64_t *out_n);
/* utls_ern_hint_add remembers |n| found at |offset| (a ring of
 * UTLS_ERN_HINTS). */
void utls_ern_hint_add(utls_conn *c, uint64_t offset, uint64_t n);

/* slots.c: the sealed, unwritten records. utls_ern_seal_low: the lowest
 * number sealed and not written, or |dflt| when none is. */
uint64_t utls_ern_seal_low(const utls_conn *c, uint64_t dflt);
/* utls_ern_slots_make makes the slots if they are not made yet. Returns 1,
 * or 0 with an error raised. */
int utls_ern_slots_make(utls_conn *c);
/* utls_ern_state_free frees the slots and the hints (utls_conn_clear). */
void utls_ern_state_free(utls_conn *c);
/* utls_ern_slots_clear forgets every sealed record. */
void utls_ern_slots_clear(utls_conn *c);
/* utls_ern_find_sealed: the slot of the sealed record |rec| (|len| bytes),
 * or -1. */
int utls_ern_find_sealed(const utls_conn *c, const unsigned char *rec, size_t len);

#endif
