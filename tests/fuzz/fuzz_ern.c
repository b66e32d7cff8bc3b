/* fuzz_ern.c: libFuzzer target for the receive path of explicit record
 * numbers (docs/ern.md; lib/ern/ and lib/glue/ern_*.c, patches 0006-0008):
 * the in-order number check with its reorder window and replay bitmap, the
 * out-of-order number search (utls_ern_ooo_find) and the number hints, under
 * the segment BIO or the uTCP BIO, fed bytes an attacker chose.
 *
 * Per input, a client (the sender) and a server (the receiver, in
 * SSL_MODE_UNORDERED), both with SSL_MODE_UTLS_NEGOTIATE, make a real
 * handshake in memory (tests/common/uharness.c) and negotiate numbers for
 * the client's direction: the client reads the server's offer (TLS 1.3
 * tickets, TLS 1.2 Finished) and sends the accept (UTLS_ern_flush); the
 * server must then report UTLS_ERN_RX and the client UTLS_ERN_TX, or the
 * input aborts. The first four bytes choose the configuration:
 *   [0] suite (TLS 1.3 AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305,
 *       AES-128-CCM; TLS 1.2 ECDHE AES-128/256-GCM, AES-128-CBC-SHA256 and
 *       AES-256-CBC-SHA with encrypt-then-MAC and MAC-then-encrypt)
 *   [1] flags: uTCP transport, a KeyUpdate midway (TLS 1.3), size classes
 *   [2] number of messages (1..MAX_RECORDS)
 *   [3] size seed
 * Then the sender's plan, three bytes per batch: a plain SSL_write of one
 * message, or a batch of up to MAX_BATCH messages sealed with
 * UTLS_ern_seal(), written with UTLS_ern_write_sealed() in an order the
 * input shuffles, some dropped with UTLS_ern_drop() (gaps in the numbers),
 * until every message is sealed or written; then close_notify. Each message
 * is self-describing (uh_msg_build: index, length, checksum).
 *
 * The rest of the input is a program of operations on the receiver (enum
 * op): genuine records and slices, a record's tail before its head,
 * duplicates of whole records at their own offset and replays at other
 * offsets (exact and shifted), bit flips, forged bytes, forged headers, and
 * reads with and without metadata and peeks. At the end every genuine byte is
 * pushed in order (TCP's retransmissions) and the receiver reads to the end.
 *
 * The oracle (abort() on failure):
 *  - every record delivered is a message the sender wrote (never a dropped
 *    one), intact, delivered at most once (a replay is never delivered
 *    twice), with the number it was sealed or written under as its sequence
 *    number, its key generation and wire length; in order only once every
 *    byte before its end was pushed, at its genuine stream offset; out of
 *    order, unless something forged was pushed, only if it was complete
 *    while a byte before it was missing, at its genuine offset;
 *  - if the first copy of every byte the receiver took was genuine (TCP
 *    keeps the first copy), the connection ends with close_notify, without
 *    error, every written message delivered exactly once whatever the
 *    sender reordered or dropped, and every one of them passed the in-order
 *    number check (ern_records_received + records_skipped);
 *  - otherwise a fatal error is allowed (docs/ern.md, "Failure cases": a
 *    replayed number, a number outside the window, a wrong number or a bad
 *    MAC in order), raised by OpenSSL's record layer or as UTLS_R_ERN_REPLAY
 *    or UTLS_R_ERN_OUT_OF_WINDOW, and every message wholly before the first
 *    wrong byte was still delivered;
 *  - bounded work: ern_block_checks stay within the per-record bounds of
 *    docs/ern.md ("Security argument" of "Sending out of sequence order"),
 *    see check_block_checks().
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "fuzz_input.h"
#include "uharness.h"


#define FUZZ_NAME "fuzz_ern"
#define FUZZ_ON_FAILURE() uh_errors_to_stderr("receiver")
#include "fuzz_check.h"

/* Messages per input: bounds the wire (and the run time) of one input. */
#define MAX_RECORDS 48
/* Records on the wire: the messages, a KeyUpdate, close_notify. */
#define MAX_WIRE_RECORDS (MAX_RECORDS + 2)
/* Messages sealed in one batch: well inside UTLS_ERN_REORDER_WINDOW, so
 * the sender never refuses (the window itself is the receiver's to check). */
#define MAX_BATCH 24
/* The longest message: the most content a numbered record holds. */
#define MAX_MSG UTLS_ERN_SEAL_MAX_CONTENT
/* Bytes of the data phase: every record at its largest (header included). */
#define MAX_WIRE (MAX_WIRE_RECORDS * UTLS_ERN_SEAL_MAX_RECORD)
/* Operations per input: bounds one execution's time. */
#define MAX_OPS 256
/* Forged segments: at most this long. */
#define MAX_FORGED 2048
/* Reads in the final drain: more than the records there are. */
#define MAX_FINAL_READS (4 * MAX_WIRE_RECORDS + 16)
/* Segment size of the final in-order push (TCP's retransmissions). */
#define FINAL_SEGMENT 1448
/* Session tickets the TLS 1.3 server sends: the offer rides in them. */
#define TICKETS 2

/*-
 * Block tests (docs/ern.md, "Security argument" under "Sending out of
 * sequence order", lib/glue/ern_hooks.c and lib/ern/window.c):
 *  - in order, per application-data record that reaches the check: the
 *    counted number, the out-of-order side's hint, then the window nearest
 *    first (63 ahead, 64 behind): at most 129 counted (the replay and
 *    one-more-window searches that only name a fatal error are not counted);
 *  - out of order, per header and per try: at most UTLS_ERN_OOO_MAX_CHECKS
 *    + 2 = 131 under the current key and 129 under the next (TLS 1.3);
 *  - headers that match no number are retried as headers without numbers,
 *    within their probe allowance, at most UTLS_MAX_FAILED_HITS (64) of them
 *    per pass; a pass runs per push and per read.
 * So ern_block_checks <= 129 * (wire records + 1)
 *                        + 260 * (headers_found + 64 * (pushes + reads)).
 * That is linear in what the attacker sent: no quadratic blow-up.
 */
#define BLOCK_CHECKS_IN_ORDER 129
#define BLOCK_CHECKS_PER_TRY (131 + 129)
#define FAILED_HITS_PER_PASS 64

typedef struct {
    const char *tls12;  /* TLS 1.2 cipher list, or NULL for TLS 1.3 */
    const char *tls13;  /* TLS 1.3 ciphersuite */
    int no_etm;
} suite;

static const suite suites[] = {
    {NULL, "TLS_AES_128_GCM_SHA256", 0},
    {NULL, "TLS_AES_256_GCM_SHA384", 0},
    {NULL, "TLS_CHACHA20_POLY1305_SHA256", 0},
    {NULL, "TLS_AES_128_CCM_SHA256", 0},
    {"ECDHE-ECDSA-AES128-GCM-SHA256", NULL, 0},
    {"ECDHE-ECDSA-AES256-GCM-SHA384", NULL, 0},
    {"ECDHE-ECDSA-AES128-SHA256", NULL, 0},
    {"ECDHE-ECDSA-AES128-SHA256", NULL, 1},
    {"ECDHE-ECDSA-AES256-SHA", NULL, 0},
    {"ECDHE-ECDSA-AES256-SHA", NULL, 1},
};
#define NUM_SUITES (sizeof(suites) / sizeof(suites[0]))

enum {
    FLAG_UTCP = 0x01,
    FLAG_KEYUPDATE = 0x02,
    FLAG_LARGE = 0x04,
    FLAG_TINY = 0x08,
    FLAG_VARIABLE = 0x10,
};

enum op {
    OP_PUSH_RECORD,  /* k: a whole genuine record (again: a TCP duplicate) */
    OP_PUSH_RANGE,   /* a, j, b: a genuine slice from record k to record j */
    OP_PUSH_SPLIT,   /* k, cut(2): a record's tail, then its head */
    OP_REPLAY,       /* k, j, shift: record k's bytes at record j's offset
                      * (+ shift): a replay of a genuine record */
    OP_FLIP,         /* k, pos(2), bit: a record with one bit flipped */
    OP_FORGE_RANDOM, /* k, rel(2), len, seed: random bytes near record k */
    OP_FORGE_HEADER, /* k, where, len(2), seed: a plausible header */
    OP_READ_INFO,    /* UTLS_read_record with metadata */
    OP_READ_NOINFO,  /* UTLS_read_record without */
    OP_READ_EX,      /* SSL_read_ex */
    OP_PEEK,         /* SSL_peek_ex */
    OP_READ_MANY,    /* k: up to 1 + k % 8 reads with metadata */
    NUM_OPS
};

#define FUZZ_WIRE_MAX MAX_WIRE
#define FUZZ_WIRE_MAX_RECORDS MAX_WIRE_RECORDS
#include "fuzz_wire.h"

static struct {
    uh_seg_pair p;
    size_t num_msgs;
    int dropped[MAX_RECORDS];
    size_t num_written;
    int delivered[MAX_RECORDS];
    size_t num_delivered;
    int dead;
    int closed;
    uint64_t reads;      /* read calls (with gw.pushes: the receiver's passes) */
    UTLS_STATS st0;      /* the statistics after the negotiation */
} g;

static EVP_PKEY *g_key;
static X509 *g_cert;
static uint8_t g_buf[SSL3_RT_MAX_PLAIN_LENGTH + 1024];
static uint8_t g_forged[MAX_FORGED + 8];
static uint8_t g_sealed[MAX_BATCH][UTLS_ERN_SEAL_MAX_RECORD];

static int corrupt(void)
{
    return gw.strict_bad < gw.wire_len;
}

static uint64_t block_checks_bound(const UTLS_STATS *st)
{
    return BLOCK_CHECKS_IN_ORDER * (uint64_t)(gw.num_recs + 1)
           + BLOCK_CHECKS_PER_TRY * (st->headers_found + FAILED_HITS_PER_PASS * (gw.pushes + g.reads));
}

static void check_block_checks(const UTLS_STATS *st)
{
    uint64_t checks = st->ern_block_checks - g.st0.ern_block_checks;
    uint64_t bound = block_checks_bound(st);
    if (checks > bound) {
        fprintf(stderr, "fuzz_ern: %llu block checks, bound %llu\n",
                (unsigned long long)checks, (unsigned long long)bound);
    }
    CHECK(checks <= bound);
}

static void check_stats(void)
{
    UTLS_STATS st;
    CHECK(UTLS_get_stats(g.p.s, &st) == 1);
    CHECK(st.records_skipped <= st.records_out_of_order);
    CHECK(st.decryptions_saved <= st.records_skipped);
    check_block_checks(&st);
}

/* delivered checks one record the receiver returned. */
static void delivered(const uint8_t *buf, size_t n, const UTLS_RECORD_INFO *info, int peek)
{
    uint32_t idx;
    if (uh_msg_check(buf, n, &idx) != 1) {
        fprintf(stderr, "fuzz_ern: %zu bytes delivered are no message:", n);
        for (size_t i = 0; i < n && i < 24; i++) {
            fprintf(stderr, " %02x", buf[i]);
        }
        fprintf(stderr, " ... claims %zu\n", uh_msg_peek_len(buf, n));
    }
    CHECK(uh_msg_check(buf, n, &idx) == 1);
    CHECK(idx < g.num_msgs);
    /* A dropped message was never on the wire. */
    CHECK(!g.dropped[idx]);
    fuzz_rec *r = fuzz_app_rec(idx);
    CHECK(n == r->msg_len);
    /* At most once: a replayed record is never delivered again. */
    CHECK(!g.delivered[idx]);
    if (info != NULL) {
        /* The receiver learns each record's true number (docs/ern.md). */
        CHECK(info->seq == r->seq);
        CHECK(info->key_generation == r->gen);
        CHECK(info->wire_len == r->wire_len);
        if (!info->out_of_order) {
            /* In order: from the bytes the receiver took (the first copy of
             * each), which are this record's wherever they stand. Within
             * the reorder window a replayed copy moved to an earlier offset
             * is accepted there, once (docs/ern.md: the receiver cannot tell
             * the attacker's reordering from the sender's). */
            CHECK(info->stream_offset >= gw.base);
            uint64_t at = info->stream_offset - gw.base;
            CHECK(at <= gw.wire_len && r->wire_len <= gw.wire_len - at);
            CHECK(gw.contig >= at + r->wire_len);
            CHECK(memcmp(gw.first + at, gw.wire + r->off, r->wire_len) == 0);
            CHECK(gw.forged || at == r->off);
        } else if (!gw.forged) {
            CHECK(r->complete_early);
            CHECK(info->stream_offset == gw.base + r->off);
        }
    }
    if (peek) {
        return;
    }
    g.delivered[idx] = 1;
    g.num_delivered++;
}

/* failed handles a read that returned 0. */
static void failed(void)
{
    int err = SSL_get_error(g.p.s, 0);
    unsigned long e = ERR_peek_last_error();

    switch (err) {
    case SSL_ERROR_WANT_READ:
        ERR_clear_error();
        return;
    case SSL_ERROR_ZERO_RETURN:
        /* close_notify is the last genuine record: on a genuine stream
         * everything before it came in order, so every message written has
         * been delivered. A copy of close_notify moved forward to just after
         * the highest-numbered record decrypts under the counted number
         * there and closes cleanly, losing records the sender wrote after
         * that one with lower numbers: the receiver cannot tell them from
         * records the sender dropped (docs/ern.md, "Known limits"). */
        for (size_t i = 0; i < g.num_msgs; i++) {
            CHECK(g.delivered[i] || g.dropped[i] || corrupt());
        }
        g.closed = 1;
        ERR_clear_error();
        return;
    case SSL_ERROR_SSL:
        if (!corrupt()) {
            fprintf(stderr, "fuzz_ern: fatal error on a genuine stream\n");
        }
        CHECK(corrupt());
        /* OpenSSL's record layer (a bad MAC, a wrong number in order:
         * decode_error), or the ERN check naming a replay or a number out
         * of the window. */
        CHECK(ERR_GET_LIB(e) == ERR_LIB_SSL
              || (ERR_GET_LIB(e) == UTLS_get_lib()
                  && (ERR_GET_REASON(e) == UTLS_R_ERN_REPLAY
                      || ERR_GET_REASON(e) == UTLS_R_ERN_OUT_OF_WINDOW)));
        g.dead = 1;
        ERR_clear_error();
        return;
    default:
        fprintf(stderr, "fuzz_ern: SSL_get_error %d\n", err);
        CHECK(!"unexpected read error");
    }
}

/* do_read reads once. Returns 1 if a record was returned, 0 if not. */
static int do_read(int kind)
{
    UTLS_RECORD_INFO info;
    size_t n = 0;
    int ok;

    if (g.dead || g.closed) {
        return 0;
    }
    g.reads++;
    ERR_clear_error();
    memset(&info, 0xa5, sizeof(info));
    ok = fuzz_read(g.p.s, kind, g_buf, 0, &n, &info);
    if (!ok) {
        TRACE("  read %d: fails, error %d\n", kind, SSL_get_error(g.p.s, 0));
        failed();
        return 0;
    }
    if (kind == READ_INFO) {
        TRACE("  read: %zu bytes, seq %llu gen %u ooo %d offset %llu\n", n,
              (unsigned long long)info.seq, info.key_generation, info.out_of_order,
              (unsigned long long)(info.stream_offset - gw.base));
    } else {
        TRACE("  read %d: %zu bytes\n", kind, n);
    }
    delivered(g_buf, n, kind == READ_INFO ? &info : NULL, kind == READ_PEEK);
    return 1;
}

/* msg_len: the next message's length for the size class in |flags|. */
static size_t msg_len(unsigned flags, uint32_t *rng)
{
    return fuzz_msg_len((flags & FLAG_LARGE) != 0, (flags & FLAG_TINY) != 0,
                        (flags & FLAG_VARIABLE) != 0, MAX_MSG, rng);
}

/* negotiate: the client reads the offer and sends the accept; the server
 * processes it in order. Returns 1 if numbers are on for the client's
 * direction at both ends. */
static int negotiate(void)
{
    uint8_t buf[16384];
    size_t k;
    int n;

    while ((k = uh_pair_take_output(&g.p, buf, sizeof(buf))) > 0) {
        BIO_write(g.p.c_in, buf, (int)k);
    }
    /* The client reads what the server sent after the handshake (tickets). */
    if (SSL_read(g.p.c, buf, sizeof(buf)) > 0 || UTLS_ern_flush(g.p.c) != 1) {
        return 0;
    }
    while ((n = BIO_read(g.p.c_out, buf, sizeof(buf))) > 0) {
        if (uh_pair_push(&g.p, g.p.base, buf, (size_t)n) != 1) {
            return 0;
        }
        g.p.base += (uint64_t)n;
    }
    if (SSL_read(g.p.s, buf, sizeof(buf)) > 0 || SSL_get_error(g.p.s, 0) != SSL_ERROR_WANT_READ) {
        return 0;
    }
    ERR_clear_error();
    fuzz_drain_server_output();
    return (UTLS_ern_status(g.p.c) & UTLS_ERN_TX) && (UTLS_ern_status(g.p.s) & UTLS_ERN_RX);
}

/* label_app labels the last record taken as message |idx|. */
static void label_app(uint32_t idx, size_t len, uint32_t gen, uint64_t seq)
{
    fuzz_rec *r = &gw.recs[gw.num_recs - 1];
    r->app = 1;
    r->index = idx;
    r->msg_len = len;
    r->gen = gen;
    r->seq = seq;
    g.num_written++;
}

/* label_keyupdate labels record |k| as the KeyUpdate that ends key
 * generation |*gen| at number |*next|; the next generation counts from 0. */
static void label_keyupdate(size_t k, uint32_t *gen, uint64_t *next)
{
    gw.recs[k].gen = (*gen)++;
    gw.recs[k].seq = *next;
    *next = 0;
}

/* send_plan: the sender's side, directed by |in|. */
static void send_plan(fuzz_cursor *in, size_t num, unsigned flags, int tls13, uint32_t rng)
{
    uint8_t msg[MAX_MSG];
    size_t lens[MAX_BATCH];
    uint64_t nums[MAX_BATCH];
    size_t sealed_len[MAX_BATCH];
    uint32_t order[MAX_BATCH];
    size_t ku_at = (tls13 && (flags & FLAG_KEYUPDATE)) ? num / 2 : SIZE_MAX;
    uint32_t gen = 0;
    /* The next number: TLS 1.3's first application record (the accept)
     * took 0; in TLS 1.2 the Finished took 0 and the accept 1. */
    uint64_t next = tls13 ? 1 : 2;
    size_t i = 0;

    while (i < num) {
        unsigned b = fuzz_get_u8(in);
        unsigned shuffle = fuzz_get_u8(in);
        unsigned drops = fuzz_get_u8(in);
        size_t k = (b & 0x80) ? 1 : 1 + (b & 0x7f) % MAX_BATCH;
        if (k > num - i) {
            k = num - i;
        }
        if (i <= ku_at && i + k > ku_at) {
            /* The KeyUpdate before the batch that reaches ku_at: it goes out
             * before the next record (with the next seal or write). */
            CHECK(SSL_key_update(g.p.c, SSL_KEY_UPDATE_NOT_REQUESTED) == 1);
            ku_at = SIZE_MAX;
            TRACE("sender: KeyUpdate\n");
        }
        if (b & 0x80) {
            size_t len = msg_len(flags, &rng);
            size_t w = 0;
            CHECK(uh_msg_build(msg, (uint32_t)i, len));
            CHECK(SSL_write_ex(g.p.c, msg, len, &w) == 1 && w == len);
            int got = fuzz_take_client_output();
            CHECK(got == 1 || got == 2);
            if (got == 2) {
                label_keyupdate(gw.num_recs - 2, &gen, &next);
            }
            TRACE("sender: write %zu as %llu\n", i, (unsigned long long)next);
            label_app((uint32_t)i, len, gen, next++);
            i++;
            continue;
        }
        /* A batch: seal k, then write them in a shuffled order, dropping
         * some (never the last sealed, which cannot be dropped). */
        for (size_t j = 0; j < k; j++) {
            lens[j] = msg_len(flags, &rng);
            CHECK(uh_msg_build(msg, (uint32_t)(i + j), lens[j]));
            ERR_clear_error();
            if (UTLS_ern_seal(g.p.c, msg, lens[j], g_sealed[j], sizeof(g_sealed[j]),
                              &sealed_len[j], &nums[j]) != 1) {
                uh_errors_to_stderr("seal");
                CHECK(!"UTLS_ern_seal failed");
            }
            int got = fuzz_take_client_output();
            CHECK(got == 0 || got == 1);
            if (got == 1) {
                /* The KeyUpdate owed: written before the first seal. */
                label_keyupdate(gw.num_recs - 1, &gen, &next);
            }
            CHECK(nums[j] == next);
            next++;
            order[j] = (uint32_t)j;
        }
        uint32_t s = 0x811c9dc5u ^ (shuffle * 0x01000193u);
        for (size_t j = k; j > 1; j--) {
            size_t r = fuzz_rng_next(&s) % j;
            uint32_t t = order[j - 1];
            order[j - 1] = order[r];
            order[r] = t;
        }
        for (size_t j = 0; j < k; j++) {
            size_t x = order[j];
            if (x != k - 1 && ((drops >> (x % 8)) & 1) && (b & 0x40)) {
                CHECK(UTLS_ern_drop(g.p.c, nums[x]) == 1);
                g.dropped[i + x] = 1;
                TRACE("sender: drop %zu (number %llu)\n", i + x, (unsigned long long)nums[x]);
                continue;
            }
            CHECK(UTLS_ern_write_sealed(g.p.c, g_sealed[x], sealed_len[x]) == 1);
            CHECK(fuzz_take_client_output() == 1);
            CHECK(memcmp(gw.wire + gw.recs[gw.num_recs - 1].off, g_sealed[x], sealed_len[x]) == 0);
            TRACE("sender: write %zu as %llu\n", i + x, (unsigned long long)nums[x]);
            label_app((uint32_t)(i + x), lens[x], gen, nums[x]);
        }
        CHECK(UTLS_ern_num_sealed(g.p.c) == 0);
        i += k;
    }
    SSL_shutdown(g.p.c);
    CHECK(fuzz_take_client_output() == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_cursor in = {data, size};
    uh_pair_opts o;

    if (g_key == NULL) {
        CHECK(uh_make_identity(1, &g_key, &g_cert));
    }
    if (size < 4) {
        return 0;
    }
    unsigned suite_i = fuzz_get_u8(&in) % NUM_SUITES;
    unsigned flags = fuzz_get_u8(&in);
    size_t num = 1 + fuzz_get_u8(&in) % MAX_RECORDS;
    uint32_t rng = 0x9e3779b9u ^ (fuzz_get_u8(&in) * 0x01000193u);
    const suite *su = &suites[suite_i];
    int tls13 = su->tls12 == NULL;

    memset(&g, 0, sizeof(g));
    fuzz_wire_reset(&g.p, "FUZZ_ERN_TRACE");
    memset(&o, 0, sizeof(o));
    o.server_mode = SSL_MODE_UNORDERED | SSL_MODE_UTLS_NEGOTIATE;
    o.client_mode = SSL_MODE_UTLS_NEGOTIATE;
    o.tls13_tickets = TICKETS;
    o.tls12_cipher = su->tls12;
    o.tls13_suites = su->tls13;
    o.no_etm = su->no_etm;
    o.utcp = (flags & FLAG_UTCP) != 0;
    ERR_clear_error();
    if (!uh_seg_pair_new_opts(&g.p, g_key, g_cert, &o)) {
        uh_errors_to_stderr("handshake");
        CHECK(!"handshake failed");
    }
    /* The suites above are those ERN is negotiated for (docs/ern.md). */
    if (!negotiate()) {
        fprintf(stderr, "fuzz_ern: suite %u: status client 0x%x server 0x%x\n", suite_i,
                UTLS_ern_status(g.p.c), UTLS_ern_status(g.p.s));
        uh_errors_to_stderr("negotiation");
        CHECK(!"ERN not negotiated");
    }
    CHECK(UTLS_get_stats(g.p.s, &g.st0) == 1);
    gw.base = g.p.base;
    g.num_msgs = num;
    send_plan(&in, num, flags, tls13, rng);
    memset(gw.have, 0, gw.wire_len);

    fuzz_trace_records(suite_i, flags);

    /* The program. */
    for (size_t ops = 0; in.len > 0 && ops < MAX_OPS; ops++) {
        unsigned op = fuzz_get_u8(&in) % NUM_OPS;
        fuzz_rec *r = &gw.recs[fuzz_get_u8(&in) % gw.num_recs];
        switch (op) {
        case OP_PUSH_RECORD:
            fuzz_push_genuine(r->off, r->wire_len);
            break;
        case OP_PUSH_RANGE:
            fuzz_op_push_range(&in, r);
            break;
        case OP_PUSH_SPLIT:
            fuzz_op_push_split(&in, r);
            break;
        case OP_REPLAY: {
            fuzz_rec *dst = &gw.recs[fuzz_get_u8(&in) % gw.num_recs];
            int64_t shift = (int8_t)fuzz_get_u8(&in);
            if (shift & 1) {
                shift = 0; /* exactly at the other record's offset */
            }
            size_t len = r->wire_len < MAX_FORGED ? r->wire_len : MAX_FORGED;
            memcpy(g_forged, gw.wire + r->off, len);
            if (dst == r && shift == 0) {
                /* At its own offset: a TCP duplicate, genuine. */
                fuzz_push_genuine(r->off, len);
            } else {
                fuzz_push_forged((int64_t)dst->off + shift, g_forged, len);
            }
            break;
        }
        case OP_FLIP: {
            size_t pos = fuzz_get_u16(&in) % r->wire_len;
            uint8_t b = gw.wire[r->off + pos] ^ (uint8_t)(1u << (fuzz_get_u8(&in) % 8));
            if (r->wire_len <= MAX_FORGED) {
                memcpy(g_forged, gw.wire + r->off, r->wire_len);
                g_forged[pos] = b;
                fuzz_push_forged((int64_t)r->off, g_forged, r->wire_len);
            } else {
                fuzz_push_forged((int64_t)(r->off + pos), &b, 1);
            }
            break;
        }
        case OP_FORGE_RANDOM: {
            int64_t rel = (int64_t)r->off + (int64_t)(int16_t)fuzz_get_u16(&in);
            size_t len = 1 + fuzz_get_u8(&in) * 8u;
            uint32_t s = 0x2545f491u ^ (fuzz_get_u8(&in) * 0x9e3779b1u) ^ (uint32_t)rel;
            if (s == 0) {
                s = 1;
            }
            if (len > MAX_FORGED) {
                len = MAX_FORGED;
            }
            fuzz_fill_random(g_forged, len, &s);
            fuzz_push_forged(rel, g_forged, len);
            break;
        }
        case OP_FORGE_HEADER: {
            unsigned where = fuzz_get_u8(&in);
            unsigned len = fuzz_get_u16(&in);
            uint32_t s = 0x68e31da4u ^ (fuzz_get_u8(&in) * 0x85ebca6bu);
            int64_t rel = (int64_t)r->off;
            if (where & 1) {
                rel += (int64_t)(where >> 1); /* inside it */
            }
            if (len & 0x8000) {
                /* A genuine record's length: the likeliest bait. */
                len = (unsigned)gw.recs[len % gw.num_recs].wire_len - 5;
            }
            g_forged[0] = 23;
            g_forged[1] = 3;
            g_forged[2] = 3;
            g_forged[3] = (uint8_t)(len >> 8);
            g_forged[4] = (uint8_t)len;
            size_t body = len < MAX_FORGED - 5 ? len : MAX_FORGED - 5;
            if (s & 2) {
                body = body / 2; /* the header with part of a body */
            }
            fuzz_fill_random(g_forged + 5, body, &s);
            fuzz_push_forged(rel, g_forged, 5 + body);
            break;
        }
        case OP_READ_INFO:
            do_read(READ_INFO);
            break;
        case OP_READ_NOINFO:
            do_read(READ_NOINFO);
            break;
        case OP_READ_EX:
            do_read(READ_EX);
            break;
        case OP_PEEK:
            do_read(READ_PEEK);
            break;
        case OP_READ_MANY:
        default: {
            unsigned k = 1 + (unsigned)(r - gw.recs) % 8;
            for (unsigned i = 0; i < k && do_read(READ_INFO); i++) {
            }
            break;
        }
        }
        fuzz_drain_server_output();
        check_stats();
    }

    /* TCP's retransmissions: every genuine byte, in order; then read to the
     * end. */
    for (size_t off = 0; off < gw.wire_len; off += FINAL_SEGMENT) {
        fuzz_push_genuine(off, FINAL_SEGMENT);
    }
    for (size_t i = 0; i < MAX_FINAL_READS && !g.dead && !g.closed; i++) {
        if (!do_read(i % 3 == 2 ? READ_NOINFO : READ_INFO) && !g.dead && !g.closed) {
            /* Nothing more to read with every byte present: only a wrong
             * in-order stream may leave it stuck. */
            CHECK(corrupt());
            break;
        }
    }
    UTLS_STATS st;
    CHECK(UTLS_get_stats(g.p.s, &st) == 1);
    check_block_checks(&st);
    if (!corrupt()) {
        CHECK(g.closed && !g.dead);
        CHECK(g.num_delivered == g.num_written);
        /* Every written record passed the in-order number check, delivered
         * then or skipped there after its early delivery. */
        CHECK(st.ern_records_received - g.st0.ern_records_received + st.records_skipped
                  - g.st0.records_skipped
              == g.num_written);
    } else {
        /* Messages wholly before the first wrong byte were delivered. */
        for (size_t i = 0; i < gw.num_recs; i++) {
            if (gw.recs[i].app && gw.recs[i].off + gw.recs[i].wire_len <= gw.strict_bad) {
                CHECK(g.delivered[gw.recs[i].index]);
            }
        }
    }
    if (getenv("FUZZ_ERN_VERBOSE") != NULL) {
        fprintf(stderr,
                "suite %u flags 0x%02x messages %zu written %zu: delivered %zu, in order %llu, "
                "out of order %llu, skipped %llu, probes %llu, block checks %llu, headers "
                "%llu, passes %llu, bound %llu, forged %d, corrupt %d, dead %d\n",
                suite_i, flags, num, g.num_written, g.num_delivered,
                (unsigned long long)st.records_in_order,
                (unsigned long long)st.records_out_of_order,
                (unsigned long long)st.records_skipped, (unsigned long long)st.probes,
                (unsigned long long)(st.ern_block_checks - g.st0.ern_block_checks),
                (unsigned long long)st.headers_found, (unsigned long long)(gw.pushes + g.reads),
                (unsigned long long)block_checks_bound(&st), gw.forged,
                corrupt(), g.dead);
    }
    uh_seg_pair_free(&g.p);
    ERR_clear_error();
    return 0;
}
