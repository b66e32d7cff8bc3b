/*
 * Per-connection uTLS state, limits, statistics and error reporting.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/* --- Errors -------------------------------------------------------------- */

static CRYPTO_ONCE utls_err_once = CRYPTO_ONCE_STATIC_INIT;

static int utls_err_lib = 0;

/* The texts come from the one table of reasons, lib/reasons.txt (tools/mkerr.py). */
static ERR_STRING_DATA utls_reason_strings[] = {
    {0, "uTLS"}, /* the library name; its code is filled in at load time */
#include "utls_reasons.inc"
    {0, NULL}};

static void utls_err_load(void)
{
    size_t i;

    utls_err_lib = ERR_get_next_error_library();
    utls_reason_strings[0].error = ERR_PACK(utls_err_lib, 0, 0);
    for (i = 1; utls_reason_strings[i].string != NULL; i++)
        utls_reason_strings[i].error = ERR_PACK(utls_err_lib, 0, utls_reason_strings[i].error);
    ERR_load_strings_const(utls_reason_strings);
}

int UTLS_get_lib(void)
{
    if (!CRYPTO_THREAD_run_once(&utls_err_once, utls_err_load))
        return 0;
    return utls_err_lib;
}

/* utls_raise puts a uTLS error with an optional formatted detail on the queue. */
void utls_raise(int reason, const char *fmt, ...)
{
    int lib = UTLS_get_lib();

    ERR_new();
    ERR_set_debug(OPENSSL_FILE, OPENSSL_LINE, "uTLS");
    if (fmt != NULL) {
        va_list ap;

        va_start(ap, fmt);
        ERR_vset_error(lib, reason, fmt, ap);
        va_end(ap);
    } else {
        ERR_set_error(lib, reason, NULL);
    }
}

uint64_t utls_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- Limits -------------------------------------------------------------- */

void UTLS_limits_default(UTLS_LIMITS *out_limits)
{
    if (out_limits == NULL)
        return;
    out_limits->max_bytes_held = UTLS_REASM_MAX_BYTES;
    out_limits->max_fragments = UTLS_REASM_MAX_FRAGMENTS;
    out_limits->max_window = UTLS_REASM_MAX_WINDOW;
    out_limits->max_probes_per_record = UTLS_DEFAULT_MAX_PROBES_PER_RECORD;
    out_limits->max_probes_per_kib = UTLS_DEFAULT_MAX_PROBES_PER_KIB;
    out_limits->max_ready_records = UTLS_DEFAULT_MAX_READY_RECORDS;
}

int UTLS_set_limits(SSL *s, const UTLS_LIMITS *limits)
{
    utls_conn *c;

    if (s == NULL || limits == NULL
        || limits->max_probes_per_record > UTLS_SEQPRED_MAX_CANDIDATES
        || (limits->max_window == 0 && limits->max_bytes_held != 0)) {
        utls_raise(UTLS_R_INVALID_LIMITS, NULL);
        return 0;
    }
    if ((c = utls_conn_get(s)) == NULL)
        return 0;
    c->limits = *limits;
    /* The stores are rebuilt with the new limits; what they held would
     * still arrive in order. */
    utls_ooo_reset(c);
    return 1;
}

static void utls_ready_clear(utls_conn *c)
{
    size_t i;

    /* Rare: always wipe. */
    for (i = 0; i < c->rx.ready.num; i++) {
        OPENSSL_cleanse(c->rx.ready.rec[i].data, c->rx.ready.rec[i].len);
        OPENSSL_free(c->rx.ready.rec[i].buf);
    }
    c->rx.ready.num = 0;
    if (c->rx.ready.partial_active) {
        OPENSSL_cleanse(c->rx.ready.partial.data, c->rx.ready.partial.len);
        OPENSSL_free(c->rx.ready.partial.buf);
    }
    c->rx.ready.partial_active = 0;
    for (i = 0; i < c->rx.ready.num_spare; i++)
        OPENSSL_clear_free(c->rx.ready.spare[i], UTLS_SCRATCH_LEN);
    c->rx.ready.num_spare = 0;
}

/*
 * utls_ooo_reset drops the out-of-order stores (they are rebuilt for the
 * current key generation on next use). Verified records already waiting are
 * kept: they remain genuine and are still owed to the application.
 */
void utls_ooo_reset(utls_conn *c)
{
    utls_reasm_free(c->rx.reasm);
    utls_scan_free(c->rx.scan);
    utls_seqpred_free(c->rx.pred);
    c->rx.reasm = NULL;
    c->rx.store = NULL;
    c->rx.store_shared = 0;
    c->rx.scan = NULL;
    c->rx.pred = NULL;
    c->rx.gen_ready = 0;
    c->rx.num_idle_anchors = 0;
    c->rx.stores_stale = 0;
    c->hooks.read_idle = 0; /* the read hook looks again */
}

/* utls_rx_scratch: the probe buffer (UTLS_SCRATCH_LEN bytes), made on first
 * use. Most connections never probe (nothing of theirs is ever past a hole),
 * and a server with thousands of them would otherwise hold one each. NULL if
 * it cannot be made: the probe fails and the record comes in order. */
unsigned char *utls_rx_scratch(utls_conn *c)
{
    if (c->rx.scratch == NULL)
        c->rx.scratch = OPENSSL_malloc(UTLS_SCRATCH_LEN);
    return c->rx.scratch;
}

void utls_conn_free(utls_conn *c)
{
    utls_conn_clear(c);
    OPENSSL_free(c);
}

void utls_conn_clear(utls_conn *c)
{
    UTLS_LIMITS limits;

    if (c == NULL)
        return;
    limits = c->limits;
    utls_ooo_reset(c);
    utls_ready_clear(c);
    OPENSSL_free(c->rx.ready.rec);
    utls_seqset_free(&c->rx.ahead); /* the seqsets' arrays (core/src/seqset.c) */
    utls_seqset_free(&c->rx.next.ahead);
    utls_seqpred_free(c->rx.next.pred);
    EVP_CIPHER_CTX_free(c->probe.ctx);
    EVP_CIPHER_CTX_free(c->rx.next.ctx);
    OPENSSL_cleanse(c->rx.next.iv, sizeof(c->rx.next.iv));
    utls_ern_keys_clear(&c->ern.cur);
    utls_ern_keys_clear(&c->ern.next);
    OPENSSL_cleanse(c->ern.tls12_rx_key, sizeof(c->ern.tls12_rx_key));
    OPENSSL_cleanse(c->ern.tls12_rx_iv, sizeof(c->ern.tls12_rx_iv));
    utls_ern_state_free(c);
    utls_aead_search_free(c->probe.search);
    OPENSSL_free(c->probe.search_out);
    if (c->rx.scratch != NULL)
        OPENSSL_clear_free(c->rx.scratch, UTLS_SCRATCH_LEN);
    memset(c, 0, sizeof(*c));
    c->limits = limits;
    c->stats.fallback = UTLS_FALLBACK_HANDSHAKE;
}

const char *UTLS_fallback_string(UTLS_FALLBACK reason)
{
    switch (reason) {
    case UTLS_FALLBACK_NONE:
        return "none: out-of-order delivery is active";
    case UTLS_FALLBACK_NOT_ENABLED:
        return "SSL_MODE_UNORDERED is not set";
    case UTLS_FALLBACK_HANDSHAKE:
        return "no application traffic key yet";
    case UTLS_FALLBACK_CIPHER:
        return "the cipher chains state across records (TLS 1.0 CBC, stream or null cipher)";
    case UTLS_FALLBACK_DTLS:
        return "DTLS has no byte stream to reorder";
    case UTLS_FALLBACK_KTLS:
        return "the kernel decrypts records (KTLS)";
    case UTLS_FALLBACK_NO_FRAGMENTS:
        return "the read BIO reports no fragments (no holes to fill)";
    case UTLS_FALLBACK_RESOURCES:
        return "out of memory: in-order delivery only";
    case UTLS_FALLBACK_BYTE_STREAM:
        return "UTLS_MODE/UTLSMode set the mode and the ALPN protocol is a byte stream "
               "(http/1.1, h2, ...): its records are not messages, so they stay in order";
    case UTLS_FALLBACK_OUT_OF_SCOPE:
        return "UTLS_MODE/UTLSMode set the mode and the connection matches none of its "
               "scope words (port=, alpn=, sni=): it stays in order";
    default:
        return "unknown";
    }
}
