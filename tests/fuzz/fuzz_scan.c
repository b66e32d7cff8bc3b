/* fuzz_scan.c: libFuzzer target for the header scanner. Input:
 *   byte 0: type_mask selector and require_whole, byte 1..2: min_len high
 *   bits / max_len, byte 3: number of pieces; then the data. The data is fed
 *   as one run that grows in fuzz-chosen steps; the hits must equal a naive
 *   reference exactly, each reported once. A second scanner sees the same
 *   bytes as separate runs and may confirm hits; it must never report a
 *   position twice or report outside its run. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utls/scan.h"

#define FUZZ_NAME "fuzz_scan"
#include "fuzz_check.h"

#define MAX_DATA 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) {
        return 0;
    }
    utls_scan_profile pr;
    memset(&pr, 0, sizeof(pr));
    static const uint32_t masks[4] = {
        UTLS_SCAN_TYPE(23),
        UTLS_SCAN_TYPE(23) | UTLS_SCAN_TYPE(21),
        UTLS_SCAN_TYPE(20) | UTLS_SCAN_TYPE(21) | UTLS_SCAN_TYPE(22) | UTLS_SCAN_TYPE(23),
        0xffffffffu,
    };
    pr.type_mask = masks[data[0] & 3];
    pr.require_whole = (data[0] >> 2) & 1;
    pr.version = (data[0] & 8) ? 0x0301 : 0x0303;
    pr.min_len = (uint16_t)(data[1] & 0x3f);
    pr.max_len = (uint16_t)(pr.min_len + data[2] * 64);
    pr.max_pending = 1 << 20; /* first scanner: nothing forgotten */
    pr.max_intervals = 1 << 20;
    unsigned pieces = data[3] % 16 + 1;
    const uint8_t *d = data + 4;
    size_t len = size - 4;
    if (len > MAX_DATA) {
        len = MAX_DATA;
    }

    /* Reference: every plausible position, and whether its record fits. */
    static uint8_t expect[MAX_DATA];
    static uint8_t seen[MAX_DATA];
    memset(expect, 0, len);
    memset(seen, 0, len);
    for (size_t p = 0; p + 5 <= len; p++) {
        uint16_t l = (uint16_t)((d[p + 3] << 8) | d[p + 4]);
        int ok = d[p] < 32 && (pr.type_mask & (1u << d[p])) && d[p + 1] == (pr.version >> 8) &&
                 d[p + 2] == (pr.version & 0xff) && l >= pr.min_len && l <= pr.max_len;
        if (ok && pr.require_whole && p + 5 + l > len) {
            ok = 0;
        }
        expect[p] = (uint8_t)ok;
    }

    utls_scan *s = utls_scan_new(&pr, 0);
    CHECK(s != NULL);
    utls_scan_hit hits[3];
    size_t have = 0;
    for (unsigned i = 1; i <= pieces; i++) {
        size_t upto = i == pieces ? len : len * i / pieces;
        if (upto <= have) {
            continue;
        }
        have = upto;
        utls_scan_result sr;
        do {
            size_t n = 0;
            sr = utls_scan_feed(s, hits, 3, &n, 1000, d, have);
            CHECK(sr != UTLS_SCAN_ERROR);
            for (size_t h = 0; h < n; h++) {
                CHECK(hits[h].offset >= 1000);
                uint64_t p = hits[h].offset - 1000;
                CHECK(p + 5 <= have);
                CHECK(!seen[p]);
                CHECK(!hits[h].chained);
                seen[p] = 1;
            }
        } while (sr == UTLS_SCAN_MORE);
    }
    CHECK(len == 0 || memcmp(seen, expect, len) == 0);
    utls_scan_free(s);

    /* Separate runs with confirms and a tight pending limit: sanity only. */
    pr.max_pending = 8;
    s = utls_scan_new(&pr, 0);
    CHECK(s != NULL);
    memset(seen, 0, len);
    size_t step = len / pieces + 1;
    for (size_t start = 0; start < len; start += step) {
        size_t l = len - start < step ? len - start : step;
        utls_scan_result sr;
        do {
            size_t n = 0;
            sr = utls_scan_feed(s, hits, 3, &n, start, d + start, l);
            CHECK(sr != UTLS_SCAN_ERROR);
            for (size_t h = 0; h < n; h++) {
                uint64_t p = hits[h].offset;
                CHECK(p >= start && p + 5 <= start + l);
                CHECK(!seen[p]);
                seen[p] = 1;
                if ((d[p + 4] & 1) && p + 5 + hits[h].len <= len) {
                    CHECK(utls_scan_confirm(s, p, (size_t)hits[h].len + 5) == 1);
                }
            }
        } while (sr == UTLS_SCAN_MORE);
    }
    CHECK(utls_scan_advance(s, len / 2) == 1);
    utls_scan_free(s);
    return 0;
}
