/* fuzz_reasm.c: libFuzzer target for reasm (and scan over its runs). The
 * input is a script of segment operations:
 *   byte 0..2   limits: max_bytes = (b0+1)*32, max_fragments = b1 % 64 + 1,
 *               window = (b2+1)*32
 *   then ops, each an opcode byte followed by its operands:
 *   0 insert: u16 offset (from the in-order point), u8 len, len bytes
 *   1 insert pattern: u16 offset, u16 len (bytes from a fixed pattern)
 *   2 advance: u8 delta
 *   3 insert at a huge offset: u8 k, u8 len (offset 2^64 - 1 - k*64)
 *   4 feed the run holding an offset to the scanner: u16 offset
 *   5 confirm the last hit
 *   6 swap in another copy (only with b1 & 0x40, which keeps them): u16
 *     offset, u8 len; the scanner forgets the swapped range
 * After every op the store is checked against a byte-level model. With other
 * copies kept, a swapped byte must be one that some insert offered at that
 * offset: the store never invents bytes, and never moves them. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utls/reasm.h"
#include "utls/scan.h"

#define MODEL_SPACE (1 << 18)

static uint8_t model_have[MODEL_SPACE];
static uint8_t model_val[MODEL_SPACE];
static uint8_t reported[MODEL_SPACE];
/* Every value offered at each offset (a 256-bit set), valid for the current
 * input only when seen_gen matches. */
static uint8_t seen[MODEL_SPACE][32];
static uint32_t seen_gen[MODEL_SPACE];
static uint32_t gen;

static void seen_add(uint64_t b, uint8_t v)
{
    if (seen_gen[b] != gen) {
        memset(seen[b], 0, sizeof(seen[b]));
        seen_gen[b] = gen;
    }
    seen[b][v >> 3] |= (uint8_t)(1u << (v & 7));
}

static int seen_has(uint64_t b, uint8_t v)
{
    return seen_gen[b] == gen && (seen[b][v >> 3] >> (v & 7)) & 1;
}

#define FUZZ_NAME "fuzz_reasm"
#include "fuzz_check.h"

typedef struct {
    const uint8_t *p;
    size_t left;
} cursor;

static int get_u8(cursor *c, uint8_t *out)
{
    if (c->left < 1) {
        return 0;
    }
    *out = c->p[0];
    c->p++;
    c->left--;
    return 1;
}

static int get_u16(cursor *c, uint16_t *out)
{
    if (c->left < 2) {
        return 0;
    }
    *out = (uint16_t)((c->p[0] << 8) | c->p[1]);
    c->p += 2;
    c->left -= 2;
    return 1;
}

static uint8_t pattern_byte(uint64_t off)
{
    return (uint8_t)(off * 2654435761u >> 13);
}

/* check_store compares every run with the model, then forgets model bytes
 * that the store no longer holds (evicted by a limit). */
static void check_store(const utls_reasm *r, const utls_reasm_limits *lim)
{
    static uint8_t held[MODEL_SPACE];
    uint64_t inorder = utls_reasm_inorder(r);
    uint64_t window_end = inorder + lim->max_window;
    CHECK(window_end <= MODEL_SPACE);
    memset(held + inorder, 0, (size_t)lim->max_window);
    size_t total = 0;
    size_t runs = 0;
    uint64_t prev_end = 0;
    utls_reasm_run run;
    for (int ok = utls_reasm_first_run(r, &run); ok; ok = utls_reasm_next_run(r, &run, run.offset)) {
        CHECK(run.len > 0);
        CHECK(run.offset >= inorder);
        CHECK(runs == 0 || run.offset > prev_end); /* disjoint, not adjacent */
        CHECK(run.offset + run.len <= window_end);
        for (size_t i = 0; i < run.len; i++) {
            uint64_t b = run.offset + i;
            CHECK(model_have[b]);
            CHECK(model_val[b] == run.data[i]);
            held[b] = 1;
        }
        prev_end = run.offset + run.len;
        total += run.len;
        runs++;
    }
    CHECK(total == utls_reasm_bytes_held(r));
    CHECK(runs == utls_reasm_num_fragments(r));
    CHECK(total <= lim->max_bytes);
    CHECK(runs <= lim->max_fragments);
    for (uint64_t b = inorder; b < window_end; b++) {
        if (!held[b]) {
            model_have[b] = 0;
        }
    }
}

static void model_insert(uint64_t inorder, uint64_t window, uint64_t off, const uint8_t *d,
                         size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint64_t b = off + i;
        if (b < MODEL_SPACE) {
            seen_add(b, d[i]);
        }
        if (b >= inorder && b < inorder + window && b < MODEL_SPACE && !model_have[b]) {
            model_have[b] = 1;
            model_val[b] = d[i];
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cursor c = {data, size};
    uint8_t b0;
    uint8_t b1;
    uint8_t b2;
    if (!get_u8(&c, &b0) || !get_u8(&c, &b1) || !get_u8(&c, &b2)) {
        return 0;
    }
    utls_reasm_limits lim;
    lim.max_bytes = ((size_t)b0 + 1) * 32;
    lim.max_fragments = (size_t)(b1 % 64) + 1;
    lim.max_window = ((uint64_t)b2 + 1) * 32;
    utls_reasm *r = utls_reasm_new(&lim, 0);
    int alts = (b1 & 0x40) != 0;
    gen++;
    if (r != NULL && alts) {
        utls_reasm_keep_alternates(r, 1);
    }
    utls_scan_profile pr;
    memset(&pr, 0, sizeof(pr));
    pr.type_mask = UTLS_SCAN_TYPE(23) | UTLS_SCAN_TYPE(22);
    pr.version = 0x0303;
    pr.min_len = 1;
    pr.max_len = 300;
    pr.require_whole = b1 >> 7;
    pr.max_pending = 16;
    pr.max_intervals = 1 << 20; /* no re-reports: checked below */
    utls_scan *s = utls_scan_new(&pr, 0);
    CHECK(r != NULL && s != NULL);
    memset(model_have, 0, sizeof(model_have));
    memset(reported, 0, sizeof(reported));
    utls_scan_hit last_hit;
    memset(&last_hit, 0, sizeof(last_hit));
    int have_hit = 0;
    static uint8_t buf[65536];

    uint8_t op;
    while (get_u8(&c, &op)) {
        uint64_t inorder = utls_reasm_inorder(r);
        switch (op % 7) {
        case 0: {
            uint16_t off;
            uint8_t len;
            if (!get_u16(&c, &off) || !get_u8(&c, &len) || c.left < len) {
                goto done;
            }
            utls_reasm_result res = utls_reasm_insert(r, inorder + off, c.p, len);
            CHECK(res != UTLS_REASM_ERROR && res != UTLS_REASM_INVALID);
            model_insert(inorder, lim.max_window, inorder + off, c.p, len);
            c.p += len;
            c.left -= len;
            break;
        }
        case 1: {
            uint16_t off;
            uint16_t len;
            if (!get_u16(&c, &off) || !get_u16(&c, &len)) {
                goto done;
            }
            for (size_t i = 0; i < len; i++) {
                buf[i] = pattern_byte(inorder + off + i);
            }
            utls_reasm_result res = utls_reasm_insert(r, inorder + off, buf, len);
            CHECK(res != UTLS_REASM_ERROR && res != UTLS_REASM_INVALID);
            model_insert(inorder, lim.max_window, inorder + off, buf, len);
            break;
        }
        case 2: {
            uint8_t delta;
            if (!get_u8(&c, &delta)) {
                goto done;
            }
            if (inorder + delta + 65536 + 65536 > MODEL_SPACE) {
                break; /* keep everything inside the model */
            }
            CHECK(utls_reasm_advance(r, inorder + delta) == 1);
            CHECK(utls_scan_advance(s, inorder + delta) == 1);
            CHECK(utls_reasm_advance(r, inorder) == (delta == 0));
            break;
        }
        case 3: {
            uint8_t k;
            uint8_t len;
            if (!get_u8(&c, &k) || !get_u8(&c, &len)) {
                goto done;
            }
            uint64_t off = UINT64_MAX - (uint64_t)k * 64;
            utls_reasm_result res = utls_reasm_insert(r, off, buf, len);
            if (len == 0) {
                CHECK(res == UTLS_REASM_NO_NEW_DATA);
            } else if ((uint64_t)len > UINT64_MAX - off) {
                CHECK(res == UTLS_REASM_INVALID);
            } else {
                CHECK(res == UTLS_REASM_DROPPED);
            }
            break;
        }
        case 4: {
            uint16_t off;
            if (!get_u16(&c, &off)) {
                goto done;
            }
            utls_reasm_run run;
            if (!utls_reasm_find_run(r, &run, inorder + off)) {
                break;
            }
            utls_scan_hit hits[4];
            utls_scan_result sr;
            do {
                size_t n = 0;
                sr = utls_scan_feed(s, hits, 4, &n, run.offset, run.data, run.len);
                CHECK(sr != UTLS_SCAN_ERROR);
                for (size_t h = 0; h < n; h++) {
                    uint64_t p = hits[h].offset;
                    CHECK(p >= run.offset && p + 5 <= run.offset + run.len);
                    CHECK(p < MODEL_SPACE);
                    CHECK(!reported[p]);
                    reported[p] = 1;
                    const uint8_t *hd = run.data + (p - run.offset);
                    CHECK(hd[1] == 3 && hd[2] == 3 && (hd[0] == 22 || hd[0] == 23));
                    CHECK(hits[h].len >= 1 && hits[h].len <= 300);
                    if (pr.require_whole) {
                        CHECK(p + 5 + hits[h].len <= run.offset + run.len);
                    }
                    last_hit = hits[h];
                    have_hit = 1;
                }
            } while (sr == UTLS_SCAN_MORE);
            break;
        }
        case 5:
            if (have_hit) {
                CHECK(utls_scan_confirm(s, last_hit.offset, (size_t)last_hit.len + 5) == 1);
                have_hit = 0;
            }
            break;
        case 6: {
            uint16_t off;
            uint8_t len;
            uint64_t from = 0;
            uint64_t to = 0;
            if (!get_u16(&c, &off) || !get_u8(&c, &len)) {
                goto done;
            }
            int sw = utls_reasm_swap_alternate(r, inorder + off, len, &from, &to);
            CHECK(alts || sw == 0);
            CHECK(utls_reasm_num_alternates(r) <= UTLS_REASM_MAX_ALT_COPIES);
            if (!sw) {
                break;
            }
            CHECK(from < to && from >= inorder && to <= MODEL_SPACE);
            for (uint64_t b = from; b < to; b++) {
                utls_reasm_run run;
                if (!utls_reasm_find_run(r, &run, b)) {
                    continue; /* a gap between runs the copy spans */
                }
                uint8_t v = run.data[b - run.offset];
                CHECK(model_have[b]);
                CHECK(seen_has(b, v));
                model_val[b] = v;
                reported[b] = 0; /* the scanner forgets it: may report it again */
            }
            CHECK(utls_scan_forget(s, from, to) == 1);
            break;
        }
        default:
            break;
        }
        check_store(r, &lim);
        CHECK(utls_scan_num_pending(s) <= 16);
    }
done:
    utls_scan_free(s);
    utls_reasm_free(r);
    return 0;
}
