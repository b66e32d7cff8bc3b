/*
 * Turning uTLS on without code changes: the UTLSMode command of OpenSSL's
 * configuration (openssl.cnf, system_default section, or SSL_CONF_cmd), the
 * UTLS_MODE environment variable, and SSLKEYLOGFILE. The words: "unordered"
 * (SSL_MODE_UNORDERED), "tap" (watch SYNs from now on, so that connections a
 * program sets up itself and hands over with SSL_set_fd get a tap),
 * "negotiate", "iptunnel" (SSL_MODE_UTLS_IP_TUNNEL), "off", and the scope of
 * "unordered": "port=N[-M]", "alpn=NAME", "sni=NAME", "all". "unordered"
 * without a scope is refused: every connection runs in order.
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/err.h>

#include "glue_local.h"

/*
 * The scope of an "unordered" setting: which connections of the process carry
 * messages (docs/unordered.md, "Scope"). A connection matches if any word
 * matches: its local or peer port is in a port= range, its negotiated ALPN
 * protocol is an alpn= name, its server name (SNI, sent or received) is an
 * sni= name, or the word "all" was given.
 */
/* Ports, ALPN and SNI names one setting may list: a configuration string is
 * written by the administrator, the bound keeps the parse and the per-
 * connection match constant-bounded whatever it says. */
#define UTLS_SCOPE_MAX_PORTS 16
#define UTLS_SCOPE_MAX_NAMES 8
#define UTLS_SCOPE_MAX_NAME 255 /* RFC 7301: ALPN names; RFC 6066: host names */
/* Distinct scopes a process keeps (each UTLS_MODE or UTLSMode string parsed
 * once and kept for the process's life, since SSL_CTXs point at it). A
 * program that sets more distinct strings gets the extra ones refused. */
#define UTLS_SCOPE_MAX_KEPT 16

typedef struct {
    int all;
    size_t num_ports, num_alpn, num_sni;
    uint16_t port_lo[UTLS_SCOPE_MAX_PORTS], port_hi[UTLS_SCOPE_MAX_PORTS];
    char alpn[UTLS_SCOPE_MAX_NAMES][UTLS_SCOPE_MAX_NAME + 1];
    char sni[UTLS_SCOPE_MAX_NAMES][UTLS_SCOPE_MAX_NAME + 1];
} utls_scope;

static int scope_named(const utls_scope *sc)
{
    return sc->all || sc->num_ports > 0 || sc->num_alpn > 0 || sc->num_sni > 0;
}

/* parse_port reads "N" or "N-M" (1..65535, N <= M). Returns 1 or 0. */
static int parse_port(const char *v, uint16_t *out_lo, uint16_t *out_hi)
{
    unsigned long lo, hi;
    char *end;

    if (*v < '0' || *v > '9')
        return 0;
    lo = strtoul(v, &end, 10);
    hi = lo;
    if (*end == '-') {
        if (end[1] < '0' || end[1] > '9')
            return 0;
        hi = strtoul(end + 1, &end, 10);
    }
    if (*end != '\0' || lo == 0 || hi > 65535 || lo > hi)
        return 0;
    *out_lo = (uint16_t)lo;
    *out_hi = (uint16_t)hi;
    return 1;
}

static int add_name(char (*names)[UTLS_SCOPE_MAX_NAME + 1], size_t *num, const char *v)
{
    size_t n = strlen(v);

    if (n == 0 || n > UTLS_SCOPE_MAX_NAME || *num >= UTLS_SCOPE_MAX_NAMES)
        return 0;
    memcpy(names[*num], v, n + 1);
    (*num)++;
    return 1;
}

/*
 * utls_parse_mode turns "unordered" (or "off"), "negotiate" and "iptunnel"
 * into mode bits to set and clear, "tap" into |*out_tap| = 1 (watch SYNs so
 * that SSL_set_fd connections can be tapped), and the scope words into
 * |*out_scope|. Words are separated by commas or spaces. Returns 1, or 0 for
 * an unknown or malformed word.
 */
static int utls_parse_mode(const char *value, uint32_t *out_set, uint32_t *out_clear,
                           int *out_tap, utls_scope *out_scope)
{
    char word[UTLS_SCOPE_MAX_NAME + 8];
    size_t n;
    int ok;

    *out_set = *out_clear = 0;
    *out_tap = 0;
    memset(out_scope, 0, sizeof(*out_scope));
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
        } else if (strcasecmp(word, "iptunnel") == 0) {
            *out_set |= SSL_MODE_UTLS_IP_TUNNEL;
        } else if (strcasecmp(word, "tap") == 0) {
            *out_tap = 1;
        } else if (strcasecmp(word, "all") == 0) {
            out_scope->all = 1;
        } else if (strncasecmp(word, "port=", 5) == 0) {
            if (out_scope->num_ports >= UTLS_SCOPE_MAX_PORTS)
                return 0;
            ok = parse_port(word + 5, &out_scope->port_lo[out_scope->num_ports],
                            &out_scope->port_hi[out_scope->num_ports]);
            if (!ok)
                return 0;
            out_scope->num_ports++;
        } else if (strncasecmp(word, "alpn=", 5) == 0) {
            if (!add_name(out_scope->alpn, &out_scope->num_alpn, word + 5))
                return 0;
        } else if (strncasecmp(word, "sni=", 4) == 0) {
            if (!add_name(out_scope->sni, &out_scope->num_sni, word + 4))
                return 0;
        } else if (strcasecmp(word, "off") == 0 || strcasecmp(word, "none") == 0) {
            *out_clear |= SSL_MODE_UNORDERED | SSL_MODE_UNORDERED_PARTIAL
                | SSL_MODE_UTLS_NEGOTIATE | SSL_MODE_UTLS_IP_TUNNEL;
        } else {
            return 0;
        }
    }
    return 1;
}

/* quiet: UTLS_QUIET is set to a non-empty value other than "0". */
static int quiet(void)
{
    const char *q = secure_getenv("UTLS_QUIET");

    return q != NULL && *q != '\0' && strcmp(q, "0") != 0;
}

/*
 * unscoped_notice: "unordered" with no scope word is refused, once per
 * process on stderr. A process-wide reordering would reorder the byte streams
 * the same program also runs (an HTTPS download, a database connection), and
 * their records are not messages.
 */
static void unscoped_notice(int named)
{
    static int said = 0; /* a second line from a racing thread is harmless */

    if (said || quiet())
        return;
    said = 1;
    if (named)
        fprintf(stderr, "uTLS: UTLS_MODE/UTLSMode: more than %d distinct \"unordered\" settings "
                        "in one process: the later ones run in order. UTLS_QUIET=1 silences this.\n",
                UTLS_SCOPE_MAX_KEPT);
    else
        fprintf(stderr, "uTLS: UTLS_MODE/UTLSMode \"unordered\" names no connections "
                        "(add port=N, alpn=NAME, sni=NAME or all): every connection runs in order. "
                        "UTLS_QUIET=1 silences this.\n");
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
    const char *detail = NULL, *reason;
    unsigned long e;
    int flags = 0;

    if (said || quiet())
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
static CRYPTO_RWLOCK *scope_lock;
static utls_scope *scopes_kept[UTLS_SCOPE_MAX_KEPT];
static size_t num_scopes_kept;

static void conf_idx_init(void)
{
    conf_ctx_idx = SSL_CTX_get_ex_new_index(0, "uTLS: unordered from UTLS_MODE", NULL, NULL, NULL);
    conf_ssl_idx = SSL_get_ex_new_index(0, "uTLS: unordered from UTLSMode", NULL, NULL, NULL);
    scope_lock = CRYPTO_THREAD_lock_new();
}

/*
 * keep_scope returns the process's copy of |sc| (the same pointer for the
 * same scope), made on first use and never freed: SSL_CTXs and SSLs point at
 * it from their ex_data. Returns NULL when UTLS_SCOPE_MAX_KEPT are kept.
 */
static const utls_scope *keep_scope(const utls_scope *sc)
{
    const utls_scope *out = NULL;
    size_t i;

    if (scope_lock == NULL || !CRYPTO_THREAD_write_lock(scope_lock))
        return NULL;
    for (i = 0; i < num_scopes_kept && out == NULL; i++)
        if (memcmp(scopes_kept[i], sc, sizeof(*sc)) == 0)
            out = scopes_kept[i];
    if (out == NULL && num_scopes_kept < UTLS_SCOPE_MAX_KEPT
        && (scopes_kept[num_scopes_kept] = OPENSSL_memdup(sc, sizeof(*sc))) != NULL)
        out = scopes_kept[num_scopes_kept++];
    CRYPTO_THREAD_unlock(scope_lock);
    return out;
}

static const utls_scope *conf_scope(const SSL *s)
{
    const utls_scope *sc;

    if (!CRYPTO_THREAD_run_once(&conf_idx_once, conf_idx_init) || conf_ctx_idx < 0
        || conf_ssl_idx < 0)
        return NULL;
    if ((sc = SSL_get_ex_data(s, conf_ssl_idx)) != NULL)
        return sc;
    return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), conf_ctx_idx);
}

int utls_mode_from_config(const SSL *s)
{
    return conf_scope(s) != NULL;
}

static int port_in_scope(const utls_scope *sc, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int side, port;
    size_t i;

    for (side = 0; side < 2 && fd >= 0; side++) {
        sl = sizeof(ss);
        memset(&ss, 0, sizeof(ss));
        if ((side == 0 ? getsockname(fd, (struct sockaddr *)&ss, &sl)
                       : getpeername(fd, (struct sockaddr *)&ss, &sl)) != 0)
            continue;
        if (ss.ss_family == AF_INET)
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        else
            continue;
        for (i = 0; i < sc->num_ports; i++)
            if (port >= sc->port_lo[i] && port <= sc->port_hi[i])
                return 1;
    }
    return 0;
}

int utls_conf_in_scope(const SSL *s)
{
    const utls_scope *sc = conf_scope(s);
    const unsigned char *alpn = NULL;
    unsigned int alpn_len = 0;
    const char *sni;
    size_t i;

    if (sc == NULL || sc->all)
        return 1;
    if (sc->num_ports > 0 && port_in_scope(sc, SSL_get_rfd(s)))
        return 1;
    SSL_get0_alpn_selected(s, &alpn, &alpn_len);
    for (i = 0; alpn != NULL && i < sc->num_alpn; i++)
        if (strlen(sc->alpn[i]) == alpn_len && memcmp(sc->alpn[i], alpn, alpn_len) == 0)
            return 1;
    sni = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    for (i = 0; sni != NULL && i < sc->num_sni; i++)
        if (strcasecmp(sc->sni[i], sni) == 0)
            return 1;
    return 0;
}

int utls_conf_mode(SSL_CTX *ctx, SSL *s, const char *value)
{
    const utls_scope *kept = NULL;
    utls_scope scope;
    uint32_t set, clear;
    int tap;

    if (value == NULL || !utls_parse_mode(value, &set, &clear, &tap, &scope))
        return 0;
    if ((set & SSL_MODE_UNORDERED) != 0) {
        if (CRYPTO_THREAD_run_once(&conf_idx_once, conf_idx_init) && scope_named(&scope))
            kept = keep_scope(&scope);
        if (kept == NULL) {
            /* Refused, not failed: the program runs as with the system libssl. */
            unscoped_notice(scope_named(&scope));
            set &= ~(uint32_t)(SSL_MODE_UNORDERED | SSL_MODE_UNORDERED_PARTIAL
                               | SSL_MODE_UTLS_IP_TUNNEL);
            clear |= SSL_MODE_UNORDERED | SSL_MODE_UNORDERED_PARTIAL | SSL_MODE_UTLS_IP_TUNNEL;
            tap = 0;
        }
    }
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
    if (kept != NULL) {
        ERR_set_mark();
        if (ctx != NULL && conf_ctx_idx >= 0)
            (void)SSL_CTX_set_ex_data(ctx, conf_ctx_idx, (void *)kept);
        if (s != NULL && conf_ssl_idx >= 0)
            (void)SSL_set_ex_data(s, conf_ssl_idx, (void *)kept);
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
    utls_scope scope;

    if (mode == NULL || *mode == '\0' || !utls_parse_mode(mode, &set, &clear, &tap, &scope) || !tap)
        return;
    ERR_set_mark();
    (void)utls_tap_start_syn_watch();
    ERR_pop_to_mark();
}
