/*
 * test_struct_size.c: the UTLS_0.2 size-checked functions of the real fork
 * (docs/struct-size.md), with the sizes a caller can pass: its layout is the
 * library's, an older one (smaller than UTLS_0.1's: refused), a newer one
 * (fields past the library's zeroed when filled; refused when one is set
 * for reading), and a length where a sizeof belongs (refused). Every refusal
 * must queue UTLS_R_STRUCT_SIZE and write nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

static int failures;

static void check(const char *what, int ok)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

/* refused: the call failed with exactly UTLS_R_STRUCT_SIZE queued. */
static int refused(int ret)
{
    unsigned long e = ERR_get_error();
    int ok = ret == 0 && ERR_GET_LIB(e) == UTLS_get_lib() && ERR_GET_REASON(e) == UTLS_R_STRUCT_SIZE;

    ERR_clear_error();
    return ok;
}

static int all_bytes(const void *p, size_t n, unsigned char v)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

int main(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    SSL *s = ctx != NULL ? SSL_new(ctx) : NULL;
    UTLS_STATS st, ref;
    UTLS_LIMITS lim, got;
    struct {
        UTLS_STATS known;
        uint64_t future[3];
    } newer_stats;
    struct {
        UTLS_LIMITS known;
        uint64_t future[2];
    } newer_limits;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED *sch;

    if (s == NULL) {
        fprintf(stderr, "test_struct_size: no SSL\n");
        return 2;
    }
    SSL_set_mode(s, SSL_MODE_UTLS_UNORDERED);

    /* The caller's layout is the library's: the same as the 0.1 function. */
    check("UTLS_get_stats_ex, same size", UTLS_get_stats(s, &ref)
          && UTLS_get_stats_ex(s, &st, sizeof(st)) && memcmp(&st, &ref, sizeof(st)) == 0
          && ERR_peek_error() == 0);

    /* Smaller than UTLS_0.1's layout: refused, nothing written. */
    memset(&st, 0xaa, sizeof(st));
    check("UTLS_get_stats_ex, smaller size refused",
          refused(UTLS_get_stats_ex(s, &st, sizeof(st) - 8)) && all_bytes(&st, sizeof(st), 0xaa));
    check("UTLS_get_stats_ex, size 0 refused", refused(UTLS_get_stats_ex(s, &st, 0)));
    check("UTLS_get_stats_ex, a length for a sizeof refused",
          refused(UTLS_get_stats_ex(s, &st, 1u << 20)) && all_bytes(&st, sizeof(st), 0xaa));

    /* A newer caller: its fields this library does not fill read as 0. */
    memset(&newer_stats, 0xaa, sizeof(newer_stats));
    check("UTLS_get_stats_ex, larger size: known fields filled, the rest zeroed",
          UTLS_get_stats_ex(s, &newer_stats.known, sizeof(newer_stats))
          && memcmp(&newer_stats.known, &ref, sizeof(ref)) == 0
          && all_bytes(newer_stats.future, sizeof(newer_stats.future), 0));

    /* Reading: a newer layout with its unknown fields unset is accepted ... */
    memset(&newer_limits, 0, sizeof(newer_limits));
    check("UTLS_limits_default_ex, larger size",
          UTLS_limits_default_ex(&newer_limits.known, sizeof(newer_limits))
          && all_bytes(newer_limits.future, sizeof(newer_limits.future), 0));
    newer_limits.known.max_ready_records = 7;
    check("UTLS_set_limits_ex, larger size, unknown fields zero",
          UTLS_set_limits_ex(s, &newer_limits.known, sizeof(newer_limits))
          && UTLS_get_limits_ex(s, &got, sizeof(got)) && got.max_ready_records == 7);
    /* ... one that sets a field this library does not know is refused, and
     * the connection's limits stay as they were. */
    newer_limits.future[1] = 1;
    newer_limits.known.max_ready_records = 9;
    check("UTLS_set_limits_ex, larger size with an unknown field set refused",
          refused(UTLS_set_limits_ex(s, &newer_limits.known, sizeof(newer_limits)))
          && UTLS_get_limits(s, &got) && got.max_ready_records == 7);
    UTLS_limits_default(&lim);
    check("UTLS_set_limits_ex, smaller size refused",
          refused(UTLS_set_limits_ex(s, &lim, sizeof(lim) - 1)));

    /* The scheduler's configuration, read by its constructor. */
    check("UTLS_sched_config_default_ex, smaller size refused",
          refused(UTLS_sched_config_default_ex(&cfg, sizeof(cfg) - 8)));
    check("UTLS_sched_new_ex, smaller size refused",
          UTLS_sched_config_default_ex(&cfg, sizeof(cfg))
          && refused(UTLS_sched_new_ex(s, &cfg, sizeof(cfg) / 2) != NULL));
    /* The same size is accepted. (This SSL has no socket, which OpenSSL's
     * SSL_get_fd() notes on the queue; abi.error_queue makes the scheduler
     * over TCP and checks the queue there.) */
    sch = UTLS_sched_new_ex(s, &cfg, sizeof(cfg));
    check("UTLS_sched_new_ex, same size accepted",
          sch != NULL && ERR_GET_REASON(ERR_peek_error()) != UTLS_R_STRUCT_SIZE);
    ERR_clear_error();
    UTLS_sched_free(sch);

    SSL_free(s);
    SSL_CTX_free(ctx);
    printf("test_struct_size: %d failure(s)\n", failures);
    return failures == 0 ? 0 : 1;
}
