/* bench_core.c: benchmarks for core/ printed as JSON.
 *   scan_gbps            scanner throughput on random data (TLS 1.3 profile)
 *   scan_fp_*            false positives per position, measured vs predicted
 *   reasm_inserts_per_s  1448-byte segments past holes, merged and trimmed
 *   probes_per_record    mean candidates tried until the true sequence number,
 *                        for records delivered out of order, per size model
 *                        (cbr, vbr, mixed), averaged over 1%, 2%, 5% loss,
 *                        with the per-rate detail
 *   cobs_gbps            COBS encode and decode throughput (input bytes per
 *                        second) over 1200-byte datagrams of random bytes
 *   ucobs_rx_gbps        uCOBS receiver throughput (wire bytes per second) on
 *                        1440-byte random datagrams fed as 1448-byte
 *                        segments: in order, and with 2% of the segments
 *                        held back 8 segments (the rest arrive past a hole),
 *                        and the ratio of the two, measured in one run
 * Usage: bench_core [--quick] [--out FILE] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "streamgen.h"
#include "utls/cobs.h"
#include "utls/reasm.h"
#include "utls/scan.h"
#include "utls/seqpred.h"
#include "utls/ucobs.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill_random(sg_rng *r, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t v = sg_next(r);
        memcpy(buf + i, &v, 8);
    }
}

typedef struct {
    double encode_gbps;
    double decode_gbps;
} cobs_result;

/* COBS over |count| 1200-byte datagrams of random bytes (so about 4.7 zeros
 * each), encoded into one buffer and decoded from it; the best of |iters|
 * passes, in gigabytes of plaintext per second each way. */
static cobs_result bench_cobs(size_t count, int iters)
{
    enum { DGRAM = 1200 };
    const size_t slot = UTLS_COBS_ENCODE_BOUND(DGRAM);
    cobs_result res = {0.0, 0.0};
    uint8_t *plain = malloc(count * DGRAM);
    uint8_t *enc = malloc(count * slot);
    size_t *enc_len = malloc(count * sizeof(size_t));
    uint8_t *dec = malloc(count * DGRAM);
    if (plain == NULL || enc == NULL || enc_len == NULL || dec == NULL) {
        fprintf(stderr, "bench_cobs: out of memory\n");
        exit(1);
    }
    sg_rng r = {777};
    fill_random(&r, plain, count * DGRAM);
    double best_enc = 1e30;
    double best_dec = 1e30;
    for (int it = 0; it < iters; it++) {
        double t0 = now();
        for (size_t i = 0; i < count; i++) {
            if (utls_cobs_encode(plain + i * DGRAM, DGRAM, enc + i * slot, slot, &enc_len[i]) !=
                UTLS_COBS_OK) {
                fprintf(stderr, "bench_cobs: encode failed\n");
                exit(1);
            }
        }
        double t1 = now();
        for (size_t i = 0; i < count; i++) {
            size_t n = 0;
            if (utls_cobs_decode(enc + i * slot, enc_len[i], dec + i * DGRAM, DGRAM, &n) !=
                    UTLS_COBS_OK ||
                n != DGRAM) {
                fprintf(stderr, "bench_cobs: decode failed\n");
                exit(1);
            }
        }
        double t2 = now();
        best_enc = t1 - t0 < best_enc ? t1 - t0 : best_enc;
        best_dec = t2 - t1 < best_dec ? t2 - t1 : best_dec;
    }
    if (memcmp(plain, dec, count * DGRAM) != 0) {
        fprintf(stderr, "bench_cobs: round trip mismatch\n");
        exit(1);
    }
    res.encode_gbps = (double)(count * DGRAM) / best_enc / 1e9;
    res.decode_gbps = (double)(count * DGRAM) / best_dec / 1e9;
    free(plain);
    free(enc);
    free(enc_len);
    free(dec);
    return res;
}

typedef struct {
    double in_order_gbps;
    double loss_gbps;
    uint64_t out_of_order; /* datagrams delivered past a hole (loss run) */
} ucobs_result;

/* One pass of the receiver over |wire| cut into 1448-byte segments; with
 * |loss|, segment k is held back 8 segments when (k * 2654435761) % 100 < 2.
 * Returns the seconds taken; checks that every datagram came exactly once. */
static double ucobs_pass(const uint8_t *wire, size_t wire_len, size_t count, int loss,
                         uint64_t *out_ooo)
{
    enum { SEG = 1448, DELAY = 8 };
    size_t nseg = (wire_len + SEG - 1) / SEG, delivered = 0;
    utls_ucobs_rx *rx = utls_ucobs_rx_new(NULL, 0);
    utls_ucobs_datagram dg;
    size_t held[64], num_held = 0, held_until[64];
    if (rx == NULL) {
        fprintf(stderr, "bench_ucobs: out of memory\n");
        exit(1);
    }
    double t0 = now();
    for (size_t k = 0; k <= nseg + DELAY; k++) {
        for (size_t h = 0; h < num_held;) {
            if (held_until[h] <= k) {
                size_t o = held[h] * SEG, l = wire_len - o < SEG ? wire_len - o : SEG;
                utls_ucobs_rx_feed(rx, o, wire + o, l, 0);
                held[h] = held[num_held - 1];
                held_until[h] = held_until[--num_held];
            } else {
                h++;
            }
        }
        if (k < nseg) {
            size_t o = k * SEG, l = wire_len - o < SEG ? wire_len - o : SEG;
            if (loss && (k * 2654435761u) % 100 < 2 && num_held < 64) {
                held[num_held] = k;
                held_until[num_held++] = k + DELAY;
            } else if (!utls_ucobs_rx_feed(rx, o, wire + o, l, 0)) {
                fprintf(stderr, "bench_ucobs: feed failed\n");
                exit(1);
            }
        }
        while (utls_ucobs_rx_peek(rx, &dg)) {
            delivered++;
            utls_ucobs_rx_pop(rx);
        }
    }
    double t = now() - t0;
    utls_ucobs_stats st;
    utls_ucobs_rx_get_stats(rx, &st);
    if (delivered != count || st.datagrams_in_order + st.datagrams_out_of_order != count) {
        fprintf(stderr, "bench_ucobs: %zu of %zu datagrams\n", delivered, count);
        exit(1);
    }
    *out_ooo = st.datagrams_out_of_order;
    utls_ucobs_rx_free(rx);
    return t;
}

static ucobs_result bench_ucobs(size_t count, int iters)
{
    enum { DGRAM = 1440 };
    ucobs_result res = {0.0, 0.0, 0};
    size_t slot = utls_ucobs_frame_bound(DGRAM), wire_len = 0;
    uint8_t *plain = malloc(DGRAM + 8), *wire = malloc(count * slot);
    if (plain == NULL || wire == NULL) {
        fprintf(stderr, "bench_ucobs: out of memory\n");
        exit(1);
    }
    sg_rng r = {4242};
    for (size_t i = 0; i < count; i++) {
        size_t fl = 0;
        fill_random(&r, plain, DGRAM + 8);
        utls_ucobs_frame(wire + wire_len, slot, &fl, plain, DGRAM);
        wire_len += fl;
    }
    double best_in = 1e30, best_loss = 1e30;
    for (int it = 0; it < iters; it++) {
        uint64_t ooo = 0;
        double a = ucobs_pass(wire, wire_len, count, 0, &ooo);
        double b = ucobs_pass(wire, wire_len, count, 1, &res.out_of_order);
        best_in = a < best_in ? a : best_in;
        best_loss = b < best_loss ? b : best_loss;
    }
    res.in_order_gbps = (double)wire_len / best_in / 1e9;
    res.loss_gbps = (double)wire_len / best_loss / 1e9;
    free(plain);
    free(wire);
    return res;
}

typedef struct {
    double gbps;
    uint64_t positions;
    uint64_t plausible;
    double predicted_rate;
} scan_result;

static scan_result bench_scan(size_t mib, int iters)
{
    scan_result res;
    memset(&res, 0, sizeof(res));
    size_t len = mib << 20;
    uint8_t *buf = malloc(len);
    sg_rng r = {12345};
    fill_random(&r, buf, len);
    utls_scan_profile pr;
    utls_scan_profile_tls13_app(&pr);
    res.predicted_rate = utls_scan_profile_fp_rate(&pr);
    double best = 1e30;
    for (int it = 0; it < iters; it++) {
        if (it > 0) {
            fill_random(&r, buf, len); /* fresh data: count false positives */
        }
        utls_scan *s = utls_scan_new(&pr, 0);
        utls_scan_hit hits[64];
        uint64_t found = 0;
        double t0 = now();
        utls_scan_result sr;
        do {
            size_t n = 0;
            sr = utls_scan_feed(s, hits, 64, &n, 0, buf, len);
            found += n;
        } while (sr == UTLS_SCAN_MORE);
        double t = now() - t0;
        best = t < best ? t : best;
        /* Plausible headers: reported ones plus those waiting for bytes. */
        res.plausible += found + utls_scan_num_pending(s);
        res.positions += len - 4;
        utls_scan_free(s);
    }
    res.gbps = (double)len / best / 1e9;
    free(buf);
    return res;
}

static double bench_reasm(size_t segments)
{
    utls_reasm *r = utls_reasm_new(NULL, 0);
    static uint8_t seg[1448];
    sg_rng rng = {777};
    fill_random(&rng, seg, sizeof(seg));
    uint64_t inserts = 0;
    double t0 = now();
    /* Windows of 64 segments: the first one of each window is late (a
     * hole), the rest arrive in order past it, some duplicated or swapped;
     * then the hole fills, the run merges and the in-order point moves. */
    for (size_t w = 0; w * 64 < segments; w++) {
        uint64_t base = (uint64_t)w * 64 * 1448;
        for (size_t i = 1; i < 64; i++) {
            size_t j = i;
            if ((sg_next(&rng) & 7) == 0 && i + 1 < 64) {
                j = i + 1; /* swap with the next one */
                utls_reasm_insert(r, base + j * 1448, seg, 1448);
                inserts++;
                j = i;
            }
            utls_reasm_insert(r, base + j * 1448, seg, 1448);
            inserts++;
        }
        utls_reasm_insert(r, base, seg, 1448);
        inserts++;
        utls_reasm_advance(r, base + 64 * 1448);
    }
    double t = now() - t0;
    utls_reasm_free(r);
    return (double)inserts / t;
}

static double bench_reasm_random(size_t inserts)
{
    utls_reasm *r = utls_reasm_new(NULL, 0);
    static uint8_t seg[256];
    sg_rng rng = {778};
    double t0 = now();
    for (size_t i = 0; i < inserts; i++) {
        uint64_t off = sg_next(&rng) % (8u << 20);
        utls_reasm_insert(r, off, seg, 1 + (size_t)(sg_next(&rng) % 256));
    }
    double t = now() - t0;
    utls_reasm_free(r);
    return (double)inserts / t;
}

typedef struct {
    uint64_t ooo_records;    /* delivered out of order */
    uint64_t probes;         /* candidates tried for them, up to the true one */
    uint64_t first_records;  /* of those, not following an anchor directly */
    uint64_t first_probes;
    uint64_t missed;         /* genuine, whole, but the true seq not in the list */
    uint64_t false_probes;   /* candidates spent on false headers */
} probe_result;

/* Stream through the whole pipeline with loss; lost segments are
 * retransmitted an RTT (32 segments) later and complete the in-order
 * stream, which delivers everything not delivered out of order. */
static probe_result bench_probes(sg_model model, double loss, size_t stream_len, uint64_t seed)
{
    probe_result pr_out;
    memset(&pr_out, 0, sizeof(pr_out));
    sg_stream st;
    sg_stream_make(&st, model, stream_len, seed, 0.0);
    size_t nseg = 0;
    sg_segment *segs = sg_segments_make(&nseg, st.len, seed, 1448, loss, 0.0, 0.0, 2.0);
    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    utls_reasm *ra = utls_reasm_new(&lim, 0);
    utls_scan_profile prof;
    utls_scan_profile_tls13_app(&prof);
    utls_scan *sc = utls_scan_new(&prof, 0);
    utls_seqpred *sp = utls_seqpred_new(NULL);
    uint8_t *have = calloc(st.len, 1);
    uint8_t *delivered = calloc(st.num_recs, 1);
    uint64_t tcp_inorder = 0;
    size_t next_rec = 0;

    for (size_t i = 0; i <= nseg + 64; i++) {
        uint64_t off = 0;
        size_t len = 0;
        if (i < nseg) {
            off = segs[i].offset;
            len = segs[i].len;
        }
        /* Retransmissions of holes older than an RTT. */
        if (i % 32 == 31 || i >= nseg) {
            uint64_t upto = i < nseg ? (off > 32 * 1448 ? off - 32 * 1448 : 0) : st.len;
            for (uint64_t b = tcp_inorder; b < upto; b++) {
                if (!have[b]) {
                    uint64_t e = b;
                    while (e < upto && !have[e]) {
                        e++;
                    }
                    memset(have + b, 1, (size_t)(e - b));
                    utls_reasm_insert(ra, b, st.bytes + b, (size_t)(e - b));
                    b = e;
                }
            }
        }
        if (i < nseg) {
            memset(have + off, 1, len);
            if (utls_reasm_insert(ra, off, st.bytes + off, len) == UTLS_REASM_STORED) {
                utls_reasm_run run;
                uint64_t at = off > tcp_inorder ? off : tcp_inorder;
                if (utls_reasm_find_run(ra, &run, at) && run.offset > tcp_inorder) {
                    utls_scan_hit hits[16];
                    utls_scan_result sr;
                    do {
                        size_t n = 0;
                        sr = utls_scan_feed(sc, hits, 16, &n, run.offset, run.data, run.len);
                        for (size_t h = 0; h < n; h++) {
                            uint64_t p = hits[h].offset;
                            size_t wire = (size_t)hits[h].len + 5;
                            size_t idx = sg_record_at(&st, p);
                            int genuine = idx != (size_t)-1 && st.recs[idx].wire_len == wire;
                            utls_seqpred_query q;
                            memset(&q, 0, sizeof(q));
                            q.offset = p;
                            q.wire_len = wire;
                            uint64_t cand[UTLS_SEQPRED_MAX_CANDIDATES];
                            size_t nc = utls_seqpred_candidates(sp, cand, UTLS_SEQPRED_MAX_CANDIDATES, &q);
                            size_t tries = 0;
                            int ok = 0;
                            for (size_t c = 0; c < nc; c++) {
                                tries++;
                                if (genuine && cand[c] == idx) {
                                    ok = 1;
                                    break;
                                }
                            }
                            if (!genuine) {
                                pr_out.false_probes += tries;
                                continue;
                            }
                            if (!ok) {
                                pr_out.missed++;
                                continue;
                            }
                            int first = idx == 0 || !delivered[idx - 1];
                            delivered[idx] = 2;
                            pr_out.ooo_records++;
                            pr_out.probes += tries;
                            if (first) {
                                pr_out.first_records++;
                                pr_out.first_probes += tries;
                            }
                            utls_seqpred_record a = {p, idx, wire, 0, 0};
                            utls_seqpred_add_anchor(sp, &a);
                            utls_scan_confirm(sc, p, wire);
                        }
                    } while (sr == UTLS_SCAN_MORE);
                }
            }
        }
        /* In-order delivery from the kernel's stream. */
        while (tcp_inorder < st.len && have[tcp_inorder]) {
            tcp_inorder++;
        }
        while (next_rec < st.num_recs &&
               st.recs[next_rec].offset + st.recs[next_rec].wire_len <= tcp_inorder) {
            const sg_record *rec = &st.recs[next_rec];
            if (!delivered[next_rec]) {
                delivered[next_rec] = 1;
            }
            utls_seqpred_record a = {rec->offset, next_rec, rec->wire_len, 0, 0};
            utls_seqpred_add_anchor(sp, &a);
            next_rec++;
            uint64_t point = rec->offset + rec->wire_len;
            utls_reasm_advance(ra, point);
            utls_scan_advance(sc, point);
            utls_seqpred_advance(sp, point);
        }
    }
    free(have);
    free(delivered);
    free(segs);
    utls_seqpred_free(sp);
    utls_scan_free(sc);
    utls_reasm_free(ra);
    sg_stream_free(&st);
    return pr_out;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--quick] [--out FILE]\n", argv[0]);
            return 2;
        }
    }
    scan_result sr = bench_scan(quick ? 4 : 256, quick ? 2 : 6);
    double reasm_ips = bench_reasm(quick ? 20000 : 2000000);
    double reasm_random_ips = bench_reasm_random(quick ? 20000 : 1000000);
    cobs_result cr = bench_cobs(quick ? 256 : 8192, quick ? 2 : 20);
    ucobs_result ur = bench_ucobs(quick ? 1000 : 50000, quick ? 2 : 5);

    static const double losses[] = {0.01, 0.02, 0.05};
    double mean[3];
    double by_loss[3][3];
    double first_by_loss[3][3];
    probe_result detail[3][3];
    for (int m = 0; m < 3; m++) {
        size_t len = quick ? (1u << 20) : (m == SG_MIXED ? 64u << 20 : 16u << 20);
        mean[m] = 0.0;
        for (int l = 0; l < 3; l++) {
            probe_result p = bench_probes((sg_model)m, losses[l], len, 1000 + m * 10 + l);
            detail[m][l] = p;
            by_loss[m][l] = p.ooo_records ? (double)p.probes / (double)p.ooo_records : 0.0;
            first_by_loss[m][l] =
                p.first_records ? (double)p.first_probes / (double)p.first_records : 0.0;
            mean[m] += by_loss[m][l] / 3.0;
        }
    }

    FILE *f = out_path != NULL ? fopen(out_path, "w") : stdout;
    if (f == NULL) {
        perror(out_path);
        return 1;
    }
    fprintf(f, "{\n");
    fprintf(f, "  \"scan_gbps\": %.3f,\n", sr.gbps);
    fprintf(f, "  \"scan_fp_measured_per_position\": %.4g,\n",
            (double)sr.plausible / (double)sr.positions);
    fprintf(f, "  \"scan_fp_predicted_per_position\": %.4g,\n", sr.predicted_rate);
    fprintf(f, "  \"scan_fp_plausible_headers\": %llu,\n", (unsigned long long)sr.plausible);
    fprintf(f, "  \"scan_fp_positions\": %llu,\n", (unsigned long long)sr.positions);
    fprintf(f, "  \"reasm_inserts_per_s\": %.0f,\n", reasm_ips);
    fprintf(f, "  \"reasm_random_inserts_per_s\": %.0f,\n", reasm_random_ips);
    fprintf(f, "  \"cobs_gbps\": {\"encode\": %.3f, \"decode\": %.3f},\n", cr.encode_gbps,
            cr.decode_gbps);
    fprintf(f,
            "  \"ucobs_rx_gbps\": {\"in_order\": %.3f, \"loss_2pct\": %.3f, "
            "\"loss_vs_in_order\": %.3f, \"out_of_order_datagrams\": %llu},\n",
            ur.in_order_gbps, ur.loss_gbps, ur.loss_gbps / ur.in_order_gbps,
            (unsigned long long)ur.out_of_order);
    fprintf(f, "  \"probes_per_record\": {\n");
    for (int m = 0; m < 3; m++) {
        fprintf(f, "    \"%s\": %.4f,\n", sg_model_names[m], mean[m]);
    }
    fprintf(f, "    \"by_loss\": {\n");
    for (int m = 0; m < 3; m++) {
        fprintf(f, "      \"%s\": {", sg_model_names[m]);
        for (int l = 0; l < 3; l++) {
            fprintf(f, "%s\"%.2f\": %.4f", l ? ", " : "", losses[l], by_loss[m][l]);
        }
        fprintf(f, "}%s\n", m < 2 ? "," : "");
    }
    fprintf(f, "    },\n");
    fprintf(f, "    \"first_after_hole_by_loss\": {\n");
    for (int m = 0; m < 3; m++) {
        fprintf(f, "      \"%s\": {", sg_model_names[m]);
        for (int l = 0; l < 3; l++) {
            fprintf(f, "%s\"%.2f\": %.4f", l ? ", " : "", losses[l], first_by_loss[m][l]);
        }
        fprintf(f, "}%s\n", m < 2 ? "," : "");
    }
    fprintf(f, "    },\n");
    fprintf(f, "    \"detail\": {\n");
    for (int m = 0; m < 3; m++) {
        fprintf(f, "      \"%s\": {", sg_model_names[m]);
        for (int l = 0; l < 3; l++) {
            const probe_result *p = &detail[m][l];
            fprintf(f,
                    "%s\"%.2f\": {\"ooo_records\": %llu, \"probes\": %llu, "
                    "\"first_after_hole\": %llu, \"missed\": %llu, \"false_header_probes\": %llu}",
                    l ? ", " : "", losses[l], (unsigned long long)p->ooo_records,
                    (unsigned long long)p->probes, (unsigned long long)p->first_records,
                    (unsigned long long)p->missed, (unsigned long long)p->false_probes);
        }
        fprintf(f, "}%s\n", m < 2 ? "," : "");
    }
    fprintf(f, "    }\n");
    fprintf(f, "  },\n");
    fprintf(f, "  \"quick\": %s\n", quick ? "true" : "false");
    fprintf(f, "}\n");
    if (f != stdout) {
        fclose(f);
    }
    return 0;
}
