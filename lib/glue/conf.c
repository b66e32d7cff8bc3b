/*
 * Turning uTLS on without code changes: the UTLSMode command of OpenSSL's
 * configuration (openssl.cnf, system_default section, or SSL_CONF_cmd), the
 * UTLS_MODE environment variable, and SSLKEYLOGFILE. The words: "unordered"
 * (SSL_MODE_UNORDERED), "tap" (watch SYNs from now on, so that connections a
 * program sets up itself and hands over with SSL_set_fd get a tap), "off".
 *
 * SSLKEYLOGFILE handles secrets: every line written lets anyone who reads the
 * file decrypt the connection. It is honoured only when set, never for
 * setuid/setgid programs (secure_getenv), and the file is created 0600.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/err.h>

#include "glue_local.h"

/*
 * utls_parse_mode turns "unordered" (or "off") into mode bits to set and clear,
 * and "tap" into |*out_tap| = 1 (watch SYNs so that SSL_set_fd connections can
 * be tapped). Words are separated by commas or spaces. Returns 1, or 0 for an
 * unknown word.
 */
static int utls_parse_mode(const char *value, uint32_t *out_set, uint32_t *out_clear,
                           int *out_tap)
{
    char word[32];
    size_t n;

    *out_set = *out_clear = 0;
    *out_tap = 0;
    while (*value != '\0') {
        while (*value == ',' || *value == ' ')
            value++;
        for (n = 0; value[n] != '\0' && value[n] != ',' && value[n] != ' '; n++)
            continue;
        if (n == 0)
            break;
        if (n >= sizeof(word))
            return 0;
        memcpy(word, value, n);
        word[n] = '\0';
        value += n;
        if (strcasecmp(word, "unordered") == 0) {
            /* Programs that do not know about uTLS read in chunks of any
             * size: records larger than their buffer come in parts. */
            *out_set |= SSL_MODE_UNORDERED | SSL_MODE_UNORDERED_PARTIAL;
        } else if (strcasecmp(word, "negotiate") == 0) {
            *out_set |= SSL_MODE_UTLS_NEGOTIATE;
        } else if (strcasecmp(word, "tap") == 0) {
            *out_tap = 1;
        } else if (strcasecmp(word, "off") == 0 || strcasecmp(word, "none") == 0) {
            *out_clear |= SSL_MODE_UNORDERED | SSL_MODE_UNORDERED_PARTIAL
                | SSL_MODE_UTLS_NEGOTIATE;
        } else {
            return 0;
        }
    }
    return 1;
}

/*
 * tap_unavailable_notice: a program that was asked (UTLS_MODE, UTLSMode) for
 * the tap and cannot have it runs in order; it says so once per process on
 * stderr, with the reason, unless UTLS_QUIET is set to a non-empty value other
 * than "0". The reason is the error the failed attempt left on the queue.
 */
static void tap_unavailable_notice(void)
{
    static int said = 0; /* a second line from a racing thread is harmless */
    const char *quiet = secure_getenv("UTLS_QUIET");
    const char *detail = NULL, *reason;
    unsigned long e;
    int flags = 0;

    if (said || (quiet != NULL && *quiet != '\0' && strcmp(quiet, "0") != 0))
        return;
    said = 1;
    e = ERR_peek_last_error_data(&detail, &flags);
    reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    fprintf(stderr, "uTLS: UTLS_MODE/UTLSMode asks for the tap, but it cannot be opened (%s%s%s): "
                    "connections run in order. UTLS_QUIET=1 silences this.\n",
            reason != NULL ? reason : "unknown reason",
            detail != NULL && (flags & ERR_TXT_STRING) != 0 && *detail != '\0' ? ": " : "",
            detail != NULL && (flags & ERR_TXT_STRING) != 0 ? detail : "");
}

/*
 * A connection whose SSL_MODE_UNORDERED came from UTLS_MODE or UTLSMode (the
 * program did not ask for it) is reordered only if its records are messages.
 * Unmodified programs mostly speak byte-stream protocols, whose messages may
 * span records: delivering those records out of order corrupts the stream
 * (an HTTPS download under UTLS_MODE=unordered got a wrong SHA-256 with exit
 * status 0). The mark is kept as ex_data of the SSL_CTX or SSL that the
 * setting was applied to; utls_mode_from_config() reads it.
 */
static int conf_ctx_idx = -1, conf_ssl_idx = -1;
static CRYPTO_ONCE conf_idx_once = CRYPTO_ONCE_STATIC_INIT;

static void conf_idx_init(void)
{
    conf_ctx_idx = SSL_CTX_get_ex_new_index(0, "uTLS: unordered from UTLS_MODE", NULL, NULL, NULL);
    conf_ssl_idx = SSL_get_ex_new_index(0, "uTLS: unordered from UTLSMode", NULL, NULL, NULL);
}

int utls_mode_from_config(const SSL *s)
{
    if (!CRYPTO_THREAD_run_once(&conf_idx_once, conf_idx_init) || conf_ctx_idx < 0
        || conf_ssl_idx < 0)
        return 0;
    return SSL_get_ex_data(s, conf_ssl_idx) != NULL
           || SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), conf_ctx_idx) != NULL;
}

int utls_conf_mode(SSL_CTX *ctx, SSL *s, const char *value)
{
    uint32_t set, clear;
    int tap;

    if (value == NULL || !utls_parse_mode(value, &set, &clear, &tap))
        return 0;
    if (tap) {
        /*
         * Without CAP_NET_RAW this fails and connections stay in order: not
         * an error of SSL_CTX_new()'s, so nothing stays on the queue.
         */
        ERR_set_mark();
        if (!utls_tap_start_syn_watch())
            tap_unavailable_notice();
        ERR_pop_to_mark();
    }
    if (ctx != NULL) {
        SSL_CTX_clear_mode(ctx, clear);
        SSL_CTX_set_mode(ctx, set);
    }
    if (s != NULL) {
        SSL_clear_mode(s, clear);
        SSL_set_mode(s, set);
    }
    if ((set & SSL_MODE_UNORDERED) != 0 && CRYPTO_THREAD_run_once(&conf_idx_once, conf_idx_init)) {
        ERR_set_mark();
        if (ctx != NULL && conf_ctx_idx >= 0)
            (void)SSL_CTX_set_ex_data(ctx, conf_ctx_idx, (void *)1);
        if (s != NULL && conf_ssl_idx >= 0)
            (void)SSL_set_ex_data(s, conf_ssl_idx, (void *)1);
        ERR_pop_to_mark();
    }
    return 1;
}

static void utls_keylog_line(const SSL *s, const char *line)
{
    const char *path = secure_getenv("SSLKEYLOGFILE");
    size_t len;
    int fd;

    (void)s;
    if (path == NULL || *path == '\0')
        return;
    /* One append per line: lines from several processes do not interleave. */
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    len = strlen(line);
    {
        char buf[1024];

        if (len + 1 <= sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\n';
            (void)!write(fd, buf, len + 1);
            OPENSSL_cleanse(buf, len + 1);
        }
    }
    close(fd);
}

void utls_hook_ctx_new(SSL_CTX *ctx)
{
    const char *mode = secure_getenv("UTLS_MODE");
    const char *keylog = secure_getenv("SSLKEYLOGFILE");

    /* The environment overrides the configuration file: it is more specific. */
    if (mode != NULL && *mode != '\0')
        (void)utls_conf_mode(ctx, NULL, mode);
    if (keylog != NULL && *keylog != '\0')
        SSL_CTX_set_keylog_callback(ctx, utls_keylog_line);
    /* Dormant until SSL_MODE_UTLS_NEGOTIATE is set on a connection. */
    utls_ern_register(ctx);
}

/*
 * utls_tap_at_load: with UTLS_MODE asking for the tap, the process-wide tap
 * is opened when the library is loaded, before the program runs: a server
 * started as root that drops privileges before its first SSL_CTX_new() keeps
 * the capture it could no longer open (docs/tap.md, DEPLOYMENT). Without the
 * privilege nothing happens here; SSL_CTX_new() says so once, as before.
 */
__attribute__((constructor)) static void utls_tap_at_load(void)
{
    const char *mode = secure_getenv("UTLS_MODE");
    uint32_t set, clear;
    int tap = 0;

    if (mode == NULL || *mode == '\0' || !utls_parse_mode(mode, &set, &clear, &tap) || !tap)
        return;
    ERR_set_mark();
    (void)utls_tap_start_syn_watch();
    ERR_pop_to_mark();
}
