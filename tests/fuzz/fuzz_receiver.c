/* fuzz_receiver.c: libFuzzer target for the fork's whole out-of-order receive
 * path: the segment BIO and its store, the uTCP BIO, the record hooks in
 * OpenSSL's record layer (skip_decrypt, skip_body, record_done), the probes,
 * the chain fast path and UTLS_read_record().
 *
 * Per input, a client (the sender) and a server (the receiver, in
 * SSL_MODE_UNORDERED behind the segment BIO or the uTCP BIO) make a real
 * handshake in memory (tests/common/uharness.c). The first four bytes
 * choose the configuration:
 *   [0] suite (TLS 1.3 AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305,
 *       AES-128-CCM; TLS 1.2 ECDHE AES-128/256-GCM, ChaCha20, AES-128-CCM,
 *       CBC SHA-256 and SHA-1 with encrypt-then-MAC and MAC-then-encrypt)
 *   [1] flags: uTCP transport, KeyUpdate midway (TLS 1.3), variable sizes,
 *       small limits (and a small segment-BIO window), a size class, the
 *       KeyUpdate asking for one back, a second KeyUpdate
 *   [2] number of records (1..MAX_RECORDS)
 *   [3] size seed; with it, SSL_MODE_UNORDERED_PARTIAL (records in parts)
 * The sender writes that many self-describing messages (uh_msg_build: index,
 * length, checksum), one record each, then close_notify. The rest of the
 * input is a program of operations on the receiver (see enum op below):
 * genuine slices, duplicates and overlaps, bit flips, forged bytes and forged
 * headers, records copied to other offsets, out-of-window segments, short or
 * odd uTCP units, EOF, SSL_pending(), and reads of every kind. At the end
 * every genuine byte is pushed in order (as TCP's retransmissions would) and
 * the receiver reads to the end.
 *
 * FUZZ_RECEIVER_TRACE=1 prints the records and every operation of an input,
 * FUZZ_RECEIVER_VERBOSE=1 the statistics at its end.
 *
 * The oracle (abort() on failure):
 *  - every record delivered is a genuine message, intact, delivered at most
 *    once, with the genuine record's sequence number, key generation and
 *    length; in order (out_of_order 0) only once every byte before its end
 *    was pushed, and then at its genuine stream offset; out of order only if
 *    it was complete at some moment while a byte before it was missing; its
 *    stream offset the genuine one unless something forged was pushed;
 *  - if the first copy of every byte the receiver took was genuine (TCP keeps
 *    the first copy) and no early EOF was pushed, the connection ends with
 *    close_notify, no error, every record delivered exactly once;
 *  - otherwise a fatal error is allowed, raised by OpenSSL's own record layer
 *    (library SSL), and every record before the first wrong byte was still
 *    delivered exactly once;
 *  - genuine pushes are accepted (or refused past a window set smaller);
 *    refused forged ones fail with a uTLS reason; the statistics agree with
 *    what was delivered; trial decryptions stay within the probe budget
 *    (max_probes_per_kib per KiB received plus the burst) and
 *    max_probes_per_record per header; SSL_pending() never exceeds the
 *    plaintext not yet delivered nor max_ready_records records, and
 *    SSL_has_pending() agrees with it.
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


#define FUZZ_NAME "fuzz_receiver"
#define FUZZ_ON_FAILURE() uh_errors_to_stderr("receiver")
#include "fuzz_check.h"

/* Application records per input: bounds the wire (and the run time) of one
 * input. */
#define MAX_RECORDS 48
/* Records on the wire: the application records, two KeyUpdates,
 * close_notify. */
#define MAX_WIRE_RECORDS (MAX_RECORDS + 3)
/* The longest message (the large size class): 16384 is one full record. */
#define MAX_MSG UH_MSG_MAX
/* Bytes of the data phase: every record at its largest, with the overhead
 * of the widest suite (CBC: IV, MAC, padding) and the header. */
#define MAX_WIRE (MAX_WIRE_RECORDS * (MAX_MSG + 128))
/* Operations per input: bounds one execution's time. */
#define MAX_OPS 256
/* Forged segments: at most this long. */
#define MAX_FORGED 2048
/* Reads in the final drain: more than the records there are. */
#define MAX_FINAL_READS (4 * MAX_WIRE_RECORDS + 16)
/* The segment BIO's receive window (its default). Forged "far" segments
 * land past it. */
#define SEG_WINDOW (16u << 20)
/* Segment size of the final in-order push (TCP's retransmissions). */
#define FINAL_SEGMENT 1448

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
    {"ECDHE-ECDSA-CHACHA20-POLY1305", NULL, 0},
    {"ECDHE-ECDSA-AES128-CCM", NULL, 0},
    {"ECDHE-ECDSA-AES128-SHA256", NULL, 0},
    {"ECDHE-ECDSA-AES128-SHA256", NULL, 1},
    {"ECDHE-ECDSA-AES256-SHA", NULL, 0},
    {"ECDHE-ECDSA-AES256-SHA", NULL, 1},
};
#define NUM_SUITES (sizeof(suites) / sizeof(suites[0]))

enum {
    FLAG_UTCP = 0x01,
    FLAG_KEYUPDATE = 0x02,
    FLAG_VARIABLE = 0x04,
    FLAG_SMALL_LIMITS = 0x08,
    FLAG_LARGE = 0x10,
    FLAG_TINY = 0x20,
    FLAG_KU_REQUESTED = 0x40, /* the KeyUpdate asks the receiver for one */
    FLAG_KU_TWICE = 0x80,     /* a second KeyUpdate, three quarters in */
};

enum op {
    OP_PUSH_RECORD,   /* k: a whole genuine record */
    OP_PUSH_RANGE,    /* a, da, b, db: a genuine slice, any overlap */
    OP_PUSH_SPLIT,    /* k, cut: a record's tail, then its head */
    OP_FLIP,          /* k, pos(2), bit: a record with one bit flipped */
    OP_FORGE_RANDOM,  /* rel(3), len, seed: random bytes near the data */
    OP_FORGE_HEADER,  /* k, where, type, len(2), seed: a plausible header */
    OP_RELOCATE,      /* j, k, shift: record j's bytes at record k's offset */
    OP_FAR,           /* k: a genuine record past the receive window */
    OP_READ_INFO,     /* UTLS_read_record with metadata */
    OP_READ_NOINFO,   /* UTLS_read_record without */
    OP_READ_EX,       /* SSL_read_ex */
    OP_PEEK,          /* SSL_peek_ex */
    OP_READ_SMALL,    /* len(2): a buffer that may be too small */
    OP_EOF,           /* where: EOF at the genuine end, or early */
    OP_READ_MANY,     /* n: up to n reads with metadata */
    OP_UNIT,          /* sel: uTCP: a unit shorter than its header, or with
                       * odd flags; segment BIO: an empty segment */
    OP_PENDING,       /* SSL_pending and SSL_has_pending */
    NUM_OPS
};

#define FUZZ_WIRE_MAX MAX_WIRE
#define FUZZ_WIRE_MAX_RECORDS MAX_WIRE_RECORDS
#include "fuzz_wire.h"

static struct {
    uh_seg_pair p;
    size_t num_app;
    int delivered[MAX_RECORDS];
    size_t num_delivered;
    size_t num_ooo;           /* delivered with metadata, out of order */
    size_t num_inorder;       /* delivered with metadata, in order */
    uint64_t early_eof;       /* the lowest early EOF pushed */
    int dead;                 /* a fatal error was raised */
    int closed;               /* close_notify was read */
    int small_limits;
    int partial_mode;         /* SSL_MODE_UNORDERED_PARTIAL */
    size_t part_len;          /* bytes of the record being returned in parts */
    UTLS_RECORD_INFO part_info;
    int part_has_info;
    int keyupdates;           /* KeyUpdates the sender sent */
    UTLS_LIMITS limits;
} g;

static uint8_t g_part[MAX_MSG];
static uint8_t g_expect[MAX_MSG];

static EVP_PKEY *g_key;
static X509 *g_cert;
static uint8_t g_buf[SSL3_RT_MAX_PLAIN_LENGTH + 1024];
static uint8_t g_forged[MAX_FORGED + 8];

static int corrupt(void)
{
    uint64_t bad = g.small_limits ? gw.loose_bad : gw.strict_bad;
    return bad < gw.wire_len || g.early_eof < gw.wire_len;
}

/* clean_prefix: data-phase bytes the in-order stream must carry intact. */
static uint64_t clean_prefix(void)
{
    uint64_t bad = g.small_limits ? gw.loose_bad : gw.strict_bad;
    if (g.early_eof < bad) {
        bad = g.early_eof;
    }
    return bad < gw.wire_len ? bad : gw.wire_len;
}

static void check_stats(void)
{
    UTLS_STATS st;
    CHECK(UTLS_get_stats(g.p.s, &st) == 1);
    /* Reads without metadata do not say how a record came. */
    CHECK(st.records_out_of_order >= g.num_ooo);
    /* A record being returned in parts counts from its first part. */
    CHECK(st.records_out_of_order <= g.num_delivered - g.num_inorder + (g.part_len > 0));
    CHECK(st.records_in_order + st.records_out_of_order >= g.num_delivered);
    CHECK(st.records_skipped <= st.records_out_of_order);
    CHECK(st.decryptions_saved <= st.records_skipped);
    CHECK(st.bodies_skipped <= st.decryptions_saved);
    if (st.fallback != UTLS_FALLBACK_NONE && st.fallback != UTLS_FALLBACK_HANDSHAKE) {
        fprintf(stderr, "fallback %s\n", UTLS_fallback_string(st.fallback));
    }
    /* HANDSHAKE until the first read after the handshake looks at the keys. */
    CHECK(st.fallback == UTLS_FALLBACK_NONE || st.fallback == UTLS_FALLBACK_HANDSHAKE);
    /* The probe budget: a burst, then max_probes_per_kib per KiB that
     * arrived, and once more per key change for the bytes held. */
    double budget = 256.0
                    + (double)g.limits.max_probes_per_kib * (double)gw.pushed_bytes / 1024.0
                          * (1.0 + g.keyupdates)
                    + 1.0;
    CHECK((double)st.probes <= budget);
    /* max_probes_per_record per plausible header (retries included); a
     * record checked at the end of a verified one (the chain) is found
     * without a header scan, with one probe; a verified record starts at
     * most one such check, which, failing, leaves the record to the scan. */
    CHECK(st.probes <= st.headers_found * g.limits.max_probes_per_record
                           + 2 * st.records_out_of_order);
}

/* delivered checks one record the receiver returned. */
static void delivered(const uint8_t *buf, size_t n, const UTLS_RECORD_INFO *info, int peek)
{
    uint32_t idx;
    CHECK(uh_msg_check(buf, n, &idx) == 1);
    CHECK(idx < g.num_app);
    fuzz_rec *r = fuzz_app_rec(idx);
    CHECK(n == r->msg_len);
    CHECK(!g.delivered[idx]);
    if (info != NULL) {
        CHECK(info->seq == r->seq);
        CHECK(info->key_generation == r->gen);
        CHECK(info->wire_len == r->wire_len);
        if (!info->out_of_order) {
            CHECK(gw.contig >= r->off + r->wire_len);
            CHECK(info->stream_offset == gw.base + r->off);
        } else if (!gw.forged) {
            /* A genuine record copied to another offset past a hole may be
             * delivered (once, intact) from the copy, with the copy's offset
             * (docs/unordered.md, stream_offset): only a stream without
             * forgeries pins where and when it completed. */
            CHECK(r->complete_early);
            CHECK(info->stream_offset == gw.base + r->off);
        }
    }
    if (peek) {
        return;
    }
    g.delivered[idx] = 1;
    g.num_delivered++;
    if (info != NULL && info->out_of_order) {
        g.num_ooo++;
    } else if (info != NULL) {
        g.num_inorder++;
    }
}

/* failed handles a read that returned 0. Returns 1 if reading can go on. */
static int failed(int small)
{
    int err = SSL_get_error(g.p.s, 0);
    /* The reason that ended the call (a provider may add its own first). */
    unsigned long e = ERR_peek_last_error();

    switch (err) {
    case SSL_ERROR_WANT_READ:
        ERR_clear_error();
        return 1;
    case SSL_ERROR_ZERO_RETURN:
        /* close_notify is the last genuine record: everything before it
         * came in order, so every message has been delivered. */
        for (size_t i = 0; i < g.num_app; i++) {
            CHECK(g.delivered[i]);
        }
        g.closed = 1;
        ERR_clear_error();
        return 0;
    case SSL_ERROR_SSL:
        if (small && !g.partial_mode && ERR_GET_LIB(e) == UTLS_get_lib()
            && ERR_GET_REASON(e) == UTLS_R_BUFFER_TOO_SMALL) {
            ERR_clear_error();
            return 1;
        }
        /* Only a wrong in-order stream may kill the connection, and only
         * OpenSSL's own record layer kills it. */
        if (!corrupt()) {
            fprintf(stderr, "fuzz_receiver: fatal error on a genuine stream\n");
        }
        CHECK(corrupt());
        CHECK(ERR_GET_LIB(e) == ERR_LIB_SSL);
        g.dead = 1;
        ERR_clear_error();
        return 0;
    default:
        /* SSL_ERROR_SYSCALL: the stream ended (an early EOF). */
        CHECK(corrupt());
        g.dead = 1;
        ERR_clear_error();
        return 0;
    }
}


/* check_prefix: |buf|[0..n) is the start of a genuine message. */
static void check_prefix(const uint8_t *buf, size_t n)
{
    static const uint8_t magic[4] = {'u', 'T', 'L', 'S'};

    if (n < 12) {
        CHECK(memcmp(buf, magic, n < 4 ? n : 4) == 0);
        return;
    }
    size_t total = uh_msg_peek_len(buf, n);
    uint32_t idx = ((uint32_t)buf[4] << 24) | ((uint32_t)buf[5] << 16)
                   | ((uint32_t)buf[6] << 8) | buf[7];
    CHECK(idx < g.num_app && total >= UH_MSG_MIN && total <= MAX_MSG && n <= total);
    CHECK(uh_msg_build(g_expect, idx, total));
    CHECK(memcmp(g_expect, buf, n) == 0);
}

/* partial_read handles what a read returned in SSL_MODE_UNORDERED_PARTIAL:
 * a whole record, or a part of one whose rest the next reads return first
 * (docs/unordered.md, "One record per read"). Every part carries the
 * record's metadata. */
static void partial_read(const uint8_t *buf, size_t n, const UTLS_RECORD_INFO *info)
{
    if (g.part_len == 0 && n >= 12 && uh_msg_peek_len(buf, n) == n) {
        delivered(buf, n, info, 0);
        return;
    }
    CHECK(n > 0 && g.part_len + n <= MAX_MSG);
    if (info != NULL) {
        if (!g.part_has_info) {
            g.part_info = *info;
            g.part_has_info = 1;
        } else {
            CHECK(info->seq == g.part_info.seq);
            CHECK(info->key_generation == g.part_info.key_generation);
            CHECK(info->stream_offset == g.part_info.stream_offset);
            CHECK(info->out_of_order == g.part_info.out_of_order);
            CHECK(info->wire_len == g.part_info.wire_len);
        }
    }
    memcpy(g_part + g.part_len, buf, n);
    g.part_len += n;
    check_prefix(g_part, g.part_len);
    size_t total = g.part_len >= 12 ? uh_msg_peek_len(g_part, g.part_len) : 0;
    if (total != 0 && g.part_len == total) {
        delivered(g_part, total, g.part_has_info ? &g.part_info : NULL, 0);
        g.part_len = 0;
        g.part_has_info = 0;
    }
}

/* do_read reads once. Returns 1 if a record was returned, 0 if not. */
static int do_read(int kind, size_t small_len)
{
    UTLS_RECORD_INFO info;
    size_t n = 0;
    int ok;

    if (g.dead || g.closed) {
        return 0;
    }
    ERR_clear_error();
    memset(&info, 0xa5, sizeof(info));
    ok = fuzz_read(g.p.s, kind, g_buf, small_len, &n, &info);
    if (!ok) {
        TRACE("  read %d (small %zu): fails, error %d\n", kind, small_len,
              SSL_get_error(g.p.s, 0));
        failed(kind == READ_SMALL);
        return 0;
    }
    if (kind == READ_INFO || kind == READ_SMALL) {
        TRACE("  read %d: %zu bytes, seq %llu gen %u ooo %d offset %llu\n", kind, n,
              (unsigned long long)info.seq, info.key_generation, info.out_of_order,
              (unsigned long long)(info.stream_offset - gw.base));
    } else {
        TRACE("  read %d: %zu bytes\n", kind, n);
    }
    CHECK(kind != READ_SMALL || n <= small_len);
    if (g.partial_mode) {
        if (kind == READ_PEEK) {
            /* The next part, unconsumed. */
            if (g.part_len > 0) {
                CHECK(g.part_len + n <= MAX_MSG);
                memcpy(g_part + g.part_len, g_buf, n);
                check_prefix(g_part, g.part_len + n);
            } else {
                check_prefix(g_buf, n);
            }
            return 1;
        }
        partial_read(g_buf, n, (kind == READ_INFO || kind == READ_SMALL) ? &info : NULL);
        return 1;
    }
    delivered(g_buf, n, (kind == READ_INFO || kind == READ_SMALL) ? &info : NULL,
              kind == READ_PEEK);
    return 1;
}

static void setup_identity(void)
{
    if (g_key == NULL) {
        CHECK(uh_make_identity(1, &g_key, &g_cert));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_cursor in = {data, size};
    uint8_t msg[MAX_MSG];

    setup_identity();
    if (size < 4) {
        return 0;
    }
    unsigned suite_i = fuzz_get_u8(&in) % NUM_SUITES;
    unsigned flags = fuzz_get_u8(&in);
    size_t num = 1 + fuzz_get_u8(&in) % MAX_RECORDS;
    uint32_t rng = 0x9e3779b9u ^ (fuzz_get_u8(&in) * 0x01000193u);
    const suite *su = &suites[suite_i];
    if (flags & FLAG_LARGE) {
        num = 1 + num % 6; /* bounds the wire */
    }

    memset(&g, 0, sizeof(g));
    fuzz_wire_reset(&g.p, "FUZZ_RECEIVER_TRACE");
    g.early_eof = UINT64_MAX;
    uh_pair_opts o;
    memset(&o, 0, sizeof(o));
    o.server_mode = SSL_MODE_UNORDERED;
    if (rng & 0x80000000u) {
        /* The size seed's top bit: records in parts for small buffers. */
        o.server_mode |= SSL_MODE_UNORDERED_PARTIAL;
        g.partial_mode = 1;
    }
    o.tls12_cipher = su->tls12;
    o.tls13_suites = su->tls13;
    o.no_etm = su->no_etm;
    o.utcp = (flags & FLAG_UTCP) != 0;
    ERR_clear_error();
    if (!uh_seg_pair_new_opts(&g.p, g_key, g_cert, &o)) {
        uh_errors_to_stderr("handshake");
        CHECK(!"handshake failed");
    }
    gw.base = g.p.base;
    fuzz_drain_server_output();
    UTLS_limits_default(&g.limits);
    if (flags & FLAG_SMALL_LIMITS) {
        /* Small enough that every limit is reached by a short program. */
        g.small_limits = 1;
        g.limits.max_bytes_held = 6000;
        g.limits.max_fragments = 6;
        g.limits.max_window = 20000;
        g.limits.max_probes_per_record = 4;
        g.limits.max_probes_per_kib = 2;
        g.limits.max_ready_records = 2;
        CHECK(UTLS_set_limits(g.p.s, &g.limits) == 1);
        if (g.p.seg != NULL) {
            /* A receive window smaller than a large stream: pushes past it
             * are refused, the store evicts and spills at its limit. */
            gw.window = 24576 + (rng % 8) * 4096;
            CHECK(UTLS_BIO_segment_set_window(g.p.seg, gw.window) == 1);
            TRACE("window %llu\n", (unsigned long long)gw.window);
        }
    }

    /* The sender: num messages, a KeyUpdate midway (TLS 1.3), close_notify. */
    int tls13 = su->tls12 == NULL;
    size_t ku_at = (tls13 && (flags & FLAG_KEYUPDATE)) ? num / 2 : SIZE_MAX;
    size_t ku2_at = (ku_at != SIZE_MAX && (flags & FLAG_KU_TWICE) && num * 3 / 4 > ku_at)
                        ? num * 3 / 4
                        : SIZE_MAX;
    uint32_t gen = 0;
    uint64_t seq = tls13 ? 0 : 1; /* TLS 1.2: Finished took number 0 */
    g.keyupdates = (ku_at != SIZE_MAX) + (ku2_at != SIZE_MAX);
    for (uint32_t i = 0; i < num; i++) {
        size_t before = gw.num_recs;
        int ku = i == ku_at || i == ku2_at;
        if (ku) {
            CHECK(SSL_key_update(g.p.c, (flags & FLAG_KU_REQUESTED)
                                            ? SSL_KEY_UPDATE_REQUESTED
                                            : SSL_KEY_UPDATE_NOT_REQUESTED) == 1);
        }
        size_t len = fuzz_msg_len((flags & FLAG_LARGE) != 0, (flags & FLAG_TINY) != 0,
                                  (flags & FLAG_VARIABLE) != 0, MAX_MSG, &rng);
        CHECK(uh_msg_build(msg, i, len));
        size_t w = 0;
        CHECK(SSL_write_ex(g.p.c, msg, len, &w) == 1 && w == len);
        CHECK(fuzz_take_client_output() >= 0);
        CHECK(gw.num_recs == before + (ku ? 2 : 1));
        if (ku) {
            gw.recs[before].seq = seq;
            gw.recs[before].gen = gen;
            gen++;
            seq = 0;
            before++;
        }
        fuzz_rec *r = &gw.recs[before];
        r->app = 1;
        r->index = i;
        r->msg_len = len;
        r->gen = gen;
        r->seq = seq++;
    }
    g.num_app = num;
    SSL_shutdown(g.p.c);
    CHECK(fuzz_take_client_output() >= 0);
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
        case OP_FLIP: {
            size_t pos = fuzz_get_u16(&in) % r->wire_len;
            unsigned bit = fuzz_get_u8(&in) % 8;
            memcpy(g_forged, gw.wire + r->off, r->wire_len < MAX_FORGED ? r->wire_len : 0);
            if (r->wire_len <= MAX_FORGED) {
                g_forged[pos] ^= (uint8_t)(1u << bit);
                fuzz_push_forged((int64_t)r->off, g_forged, r->wire_len);
            } else {
                uint8_t b = gw.wire[r->off + pos] ^ (uint8_t)(1u << bit);
                fuzz_push_forged((int64_t)(r->off + pos), &b, 1);
            }
            break;
        }
        case OP_FORGE_RANDOM: {
            unsigned hi = fuzz_get_u8(&in);
            int64_t rel = (int64_t)r->off + (int64_t)(int16_t)fuzz_get_u16(&in) + (hi & 1) * 65536;
            size_t len = 1 + fuzz_get_u8(&in) * 8u;
            uint32_t s = 0x2545f491u ^ (fuzz_get_u8(&in) * 0x9e3779b1u) ^ (uint32_t)rel;
            if (len > MAX_FORGED) {
                len = MAX_FORGED;
            }
            fuzz_fill_random(g_forged, len, &s);
            fuzz_push_forged(rel, g_forged, len);
            break;
        }
        case OP_FORGE_HEADER: {
            static const uint8_t types[] = {23, 22, 21, 20, 24, 0};
            unsigned where = fuzz_get_u8(&in);
            unsigned type = types[fuzz_get_u8(&in) % sizeof(types)];
            unsigned len = fuzz_get_u16(&in);
            uint32_t s = 0x68e31da4u ^ (fuzz_get_u8(&in) * 0x85ebca6bu);
            int64_t rel = (int64_t)r->off;
            switch (where % 4) {
            case 0:
                break;
            case 1:
                rel += (int64_t)r->wire_len; /* where the next one starts */
                break;
            case 2:
                rel += (int64_t)(where >> 2); /* inside it */
                break;
            default:
                rel -= (int64_t)(where >> 2) + 1;
                break;
            }
            if (len & 0x8000) {
                /* A genuine record's length: the scanner's likeliest bait. */
                len = (unsigned)gw.recs[len % gw.num_recs].wire_len - 5;
            }
            g_forged[0] = (uint8_t)type;
            g_forged[1] = 3;
            g_forged[2] = (s & 1) ? 3 : (uint8_t)(fuzz_rng_next(&s) % 5);
            g_forged[3] = (uint8_t)(len >> 8);
            g_forged[4] = (uint8_t)len;
            size_t body = len < MAX_FORGED - 5 ? len : MAX_FORGED - 5;
            if (s & 2) {
                body = body / 2; /* header only in part */
            }
            fuzz_fill_random(g_forged + 5, body, &s);
            fuzz_push_forged(rel, g_forged, 5 + body);
            break;
        }
        case OP_RELOCATE: {
            fuzz_rec *dst = &gw.recs[fuzz_get_u8(&in) % gw.num_recs];
            int64_t shift = (int8_t)fuzz_get_u8(&in);
            size_t len = r->wire_len < MAX_FORGED ? r->wire_len : MAX_FORGED;
            if (dst == r && shift == 0) {
                shift = 1;
            }
            memcpy(g_forged, gw.wire + r->off, len);
            fuzz_push_forged((int64_t)dst->off + shift, g_forged, len);
            break;
        }
        case OP_FAR: {
            size_t len = r->wire_len < MAX_FORGED ? r->wire_len : MAX_FORGED;
            memcpy(g_forged, gw.wire + r->off, len);
            fuzz_push_forged((int64_t)gw.wire_len + SEG_WINDOW + fuzz_get_u8(&in), g_forged, len);
            break;
        }
        case OP_READ_INFO:
            do_read(READ_INFO, 0);
            break;
        case OP_READ_NOINFO:
            do_read(READ_NOINFO, 0);
            break;
        case OP_READ_EX:
            do_read(READ_EX, 0);
            break;
        case OP_PEEK:
            do_read(READ_PEEK, 0);
            break;
        case OP_READ_SMALL: {
            /* In parts, an empty buffer is upstream's zero-length read (0,
             * no error): not exercised. */
            size_t small = fuzz_get_u16(&in) % (r->msg_len + 2);
            do_read(READ_SMALL, g.partial_mode && small == 0 ? 1 : small);
            break;
        }
        case OP_EOF:
            if (fuzz_get_u8(&in) & 1) {
                ERR_clear_error();
                CHECK(uh_pair_push_eof(&g.p, gw.base + gw.wire_len) == 1);
            } else {
                uint64_t at = r->off;
                if (at < gw.wire_len && at < g.early_eof) {
                    g.early_eof = at;
                }
                gw.forged = 1;
                ERR_clear_error();
                uh_pair_push_eof(&g.p, gw.base + at);
                ERR_clear_error();
            }
            break;
        case OP_UNIT: {
            unsigned sel = fuzz_get_u8(&in);
            if (g.p.units == NULL) {
                ERR_clear_error();
                if (!UTLS_BIO_segment_push(g.p.seg, gw.base + r->off, g_forged, 0)) {
                    CHECK(ERR_GET_LIB(ERR_peek_error()) == UTLS_get_lib());
                }
                ERR_clear_error();
            } else if (sel & 1) {
                /* Malformed: shorter than the 5-byte unit header. */
                memcpy(g_forged, gw.wire + r->off, 4);
                gw.forged = 1;
                /* 1 to 4 bytes: a read of 0 bytes from the next BIO is its end of
                 * file (BIO_read()), not a unit. */
                CHECK(uh_units_push(g.p.units, g_forged, 1 + (sel >> 1) % 4));
            } else {
                /* A genuine segment under flags other than the usual ones. */
                uint8_t flags = (uint8_t)(sel >> 1);
                size_t len = r->wire_len < MAX_FORGED ? r->wire_len : MAX_FORGED;
                uint64_t at = gw.base + r->off;
                g_forged[0] = flags;
                g_forged[1] = (uint8_t)(at >> 24);
                g_forged[2] = (uint8_t)(at >> 16);
                g_forged[3] = (uint8_t)(at >> 8);
                g_forged[4] = (uint8_t)at;
                memcpy(g_forged + 5, gw.wire + r->off, len);
                CHECK(uh_units_push(g.p.units, g_forged, 5 + len));
                if (flags & UTLS_UTCP_FLAG_EOF) {
                    /* An EOF unit: its data is not taken. */
                    if (r->off < g.early_eof) {
                        g.early_eof = r->off;
                    }
                    gw.forged = 1;
                } else {
                    fuzz_note_push((int64_t)r->off, gw.wire + r->off, len);
                }
            }
            break;
        }
        case OP_PENDING: {
            /* Never more than the plaintext not yet delivered. */
            size_t left = 0;
            for (size_t i = 0; i < gw.num_recs; i++) {
                if (gw.recs[i].app && !g.delivered[gw.recs[i].index]) {
                    left += gw.recs[i].msg_len;
                }
            }
            int pend = SSL_pending(g.p.s);
            CHECK(pend >= 0 && (size_t)pend <= left);
            /* max_ready_records verified records, plus the rest of one
             * being returned in parts. */
            CHECK((size_t)pend <= (g.limits.max_ready_records + 1) * (size_t)MAX_MSG);
            if (pend > 0) {
                CHECK(SSL_has_pending(g.p.s) == 1);
            }
            break;
        }
        case OP_READ_MANY:
        default: {
            unsigned k = 1 + (unsigned)(r - gw.recs) % 8;
            for (unsigned i = 0; i < k && do_read(READ_INFO, 0); i++) {
            }
            break;
        }
        }
        fuzz_drain_server_output();
        if (!g.dead) {
            check_stats();
        }
    }

    /* TCP's retransmissions: every genuine byte, in order; then read to the
     * end. */
    for (size_t off = 0; off < gw.wire_len; off += FINAL_SEGMENT) {
        if (!fuzz_push_genuine(off, FINAL_SEGMENT)) {
            /* Past the window: reading moves it on (at most a record
             * behind, and the window holds more than two). */
            while (do_read(READ_INFO, 0)) {
            }
            if (g.dead || g.closed) {
                break;
            }
            if (!fuzz_push_genuine(off, FINAL_SEGMENT)) {
                CHECK(corrupt());
                break;
            }
        }
    }
    for (size_t i = 0; i < MAX_FINAL_READS && !g.dead && !g.closed; i++) {
        if (!do_read(i % 3 == 2 ? READ_NOINFO : READ_INFO, 0)) {
            if (!g.dead && !g.closed) {
                /* Nothing more to read with every byte present: only a wrong
                 * in-order stream (a bad length, say) may leave it stuck. */
                CHECK(corrupt());
                break;
            }
        }
    }
    if (!corrupt()) {
        CHECK(g.closed && !g.dead);
        CHECK(g.num_delivered == g.num_app);
    } else {
        /* Records wholly before the first wrong byte were delivered. */
        uint64_t clean = clean_prefix();
        TRACE("corrupt: strict %lld loose %lld eof %lld clean %llu dead %d closed %d\n",
              (long long)gw.strict_bad, (long long)gw.loose_bad, (long long)g.early_eof,
              (unsigned long long)clean, g.dead, g.closed);
        for (size_t i = 0; i < gw.num_recs; i++) {
            if (gw.recs[i].app && gw.recs[i].off + gw.recs[i].wire_len <= clean) {
                CHECK(g.delivered[gw.recs[i].index]);
            }
        }
    }
    if (!g.dead) {
        UTLS_STATS st;
        check_stats();
        CHECK(UTLS_get_stats(g.p.s, &st) == 1);
        if (st.fallback != UTLS_FALLBACK_NONE) {
            TRACE("fallback at the end: %s\n", UTLS_fallback_string(st.fallback));
        }
        /* Decided when the first record after the handshake is read in
         * order or past a hole: a stream wrong from its first byte on may
         * never get there. */
        CHECK(st.fallback == UTLS_FALLBACK_NONE
              || (corrupt() && st.fallback == UTLS_FALLBACK_HANDSHAKE));
        if (getenv("FUZZ_RECEIVER_VERBOSE") != NULL) {
            fprintf(stderr,
                    "suite %u flags 0x%02x records %zu: in order %llu, out of order %llu, "
                    "skipped %llu, bodies skipped %llu, probes %llu, soft failures %llu, "
                    "dropped %llu, forged %d, corrupt %d\n",
                    suite_i, flags, num, (unsigned long long)st.records_in_order,
                    (unsigned long long)st.records_out_of_order,
                    (unsigned long long)st.records_skipped,
                    (unsigned long long)st.bodies_skipped, (unsigned long long)st.probes,
                    (unsigned long long)st.soft_failures, (unsigned long long)st.bytes_dropped,
                    gw.forged, corrupt());
        }
    } else if (getenv("FUZZ_RECEIVER_VERBOSE") != NULL) {
        fprintf(stderr, "suite %u flags 0x%02x records %zu: fatal error, delivered %zu\n",
                suite_i, flags, num, g.num_delivered);
    }
    uh_seg_pair_free(&g.p);
    ERR_clear_error();
    return 0;
}
