/*
 * utls_interop.c: legacy TLS senders that are not the fork, through the lossy
 * segment network, into the fork's receiver.
 *
 * For every cipher of a peer/version, this program (linked with the fork)
 * listens on 127.0.0.1, starts the peer as a separate process -- the system
 * `openssl s_client` (stock libssl.so.3), `gnutls-cli` (GnuTLS), NSS's
 * `tstclnt` (libssl3.so) or the Go program tests/interop-peers/go
 * (crypto/tls) -- and feeds the peer's stdin
 * with self-describing messages (index + length + checksum). The peer's bytes
 * are read from the TCP socket in order, cut into MSS segments by lossy.c
 * (2% loss, reordering, duplicates, re-segmented retransmissions) and pushed
 * into the segment BIO of a server SSL with SSL_MODE_UNORDERED, which reads
 * with UTLS_read_record() after every delivery; what the server writes goes
 * back to the socket. Record boundaries are the peer's choice.
 *
 * Checks per connection: the peer really runs the library it claims
 * (/proc/PID/maps); every delivered record is one the peer sent, at its stream
 * offset and wire length, delivered once; the delivered plaintexts, in record
 * order, are exactly the bytes written to the peer's stdin (nothing lost,
 * duplicated or forged); the out_of_order flag matches the ground truth; no
 * lock-out (a record that was complete past a hole when the hole was filled,
 * and was delivered later in order); and across the peer's ciphers some
 * records went out of order. One summary line per cipher; with
 * UTLS_INTEROP_DEBUG set in the environment, also the receiver's scan and
 * probe counters and the first 40 records (offset, length, when complete,
 * whether past a hole), for a lock-out's post-mortem.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "lossy.h"
#include "uharness.h"

enum { PEER_OPENSSL, PEER_GNUTLS, PEER_GO, PEER_NSS };

typedef struct icase {
    const char *label;
    int version;
    const char *ossl;     /* the fork server's cipher (list or TLS 1.3 suite) */
    int ec;
    int no_etm;
    int gnutls;           /* GnuTLS offers it */
    const char *go;       /* Go's suite name ("" any TLS 1.3 suite, NULL: not offered) */
    const char *nss;      /* tstclnt's -c (":" + the suite's code), NULL: NSS has no
                           * such suite (CCM) or no encrypt-then-MAC (.etm) */
} icase;

static const icase g_cases[] = {
    {"TLS_AES_128_GCM_SHA256", TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", 1, 0, 1, "", ":1301"},
    {"TLS_AES_256_GCM_SHA384", TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", 1, 0, 1, "", ":1302"},
    {"TLS_CHACHA20_POLY1305_SHA256", TLS1_3_VERSION, "TLS_CHACHA20_POLY1305_SHA256", 1, 0, 1, "", ":1303"},
    {"TLS_AES_128_CCM_SHA256", TLS1_3_VERSION, "TLS_AES_128_CCM_SHA256", 1, 0, 1, NULL, NULL},
    {"ECDHE-RSA-AES128-GCM-SHA256", TLS1_2_VERSION, "ECDHE-RSA-AES128-GCM-SHA256", 0, 0, 1,
     "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", ":C02F"},
    {"ECDHE-ECDSA-AES128-GCM-SHA256", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256", 1, 0, 1,
     "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", ":C02B"},
    {"ECDHE-RSA-AES256-GCM-SHA384", TLS1_2_VERSION, "ECDHE-RSA-AES256-GCM-SHA384", 0, 0, 1,
     "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", ":C030"},
    {"ECDHE-ECDSA-AES256-GCM-SHA384", TLS1_2_VERSION, "ECDHE-ECDSA-AES256-GCM-SHA384", 1, 0, 1,
     "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", ":C02C"},
    {"ECDHE-RSA-CHACHA20-POLY1305", TLS1_2_VERSION, "ECDHE-RSA-CHACHA20-POLY1305", 0, 0, 1,
     "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", ":CCA8"},
    {"ECDHE-ECDSA-CHACHA20-POLY1305", TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305", 1, 0, 1,
     "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", ":CCA9"},
    {"ECDHE-ECDSA-AES128-CCM", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-CCM", 1, 0, 1, NULL, NULL},
    {"ECDHE-RSA-AES128-SHA256.etm", TLS1_2_VERSION, "ECDHE-RSA-AES128-SHA256", 0, 0, 1, NULL, NULL},
    {"ECDHE-RSA-AES128-SHA256.mte", TLS1_2_VERSION, "ECDHE-RSA-AES128-SHA256", 0, 1, 1,
     "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", ":C027"},
    {"ECDHE-ECDSA-AES128-SHA256.etm", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-SHA256", 1, 0, 1, NULL, NULL},
    {"ECDHE-ECDSA-AES128-SHA256.mte", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-SHA256", 1, 1, 1,
     "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", ":C023"},
    {"ECDHE-RSA-AES128-SHA.mte", TLS1_2_VERSION, "ECDHE-RSA-AES128-SHA", 0, 1, 1,
     "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", ":C013"},
};

static EVP_PKEY *g_key[2];
static X509 *g_cert[2];
static int g_peer;
static const char *g_bin;
static const char *g_logdir = ".";
static uint64_t g_seed = 0x1f2e3d4c;
static double g_loss = 0.02;
static size_t g_messages = 1200;

/* ---- the relay ---- */

typedef struct delivered {
    uint32_t gen;
    uint64_t seq;
    uint64_t offset;
    uint8_t *data;
    size_t len;
} delivered;

typedef struct relay {
    SSL *ssl;
    BIO *seg;
    lossy_net *net;
    int sock;
    int handshake_done;
    int failed;
    int closed;
    delivered *d;
    size_t nd, capd;
    uint64_t ooo, inorder, forged, dups, flag_mismatch, lockout_candidates;
    size_t bytes; /* plaintext delivered from genuine records */
    uint64_t prehandshake_fills; /* holes filled before the handshake completed */
    uint8_t buf[UH_MSG_MAX + 2048];
} relay;

#define PENDING_AT_FILL 0x1000 /* lossy_record.tag: was complete past a hole at a fill */

static void relay_write_out(relay *r)
{
    uint8_t out[16384];
    size_t n;
    while ((n = UTLS_BIO_segment_take_output(r->seg, out, sizeof(out))) > 0) {
        size_t off = 0;
        while (off < n) {
            ssize_t w = send(r->sock, out + off, n - off, MSG_NOSIGNAL);
            if (w <= 0) {
                return; /* the peer is gone: it has sent everything it will */
            }
            off += (size_t)w;
        }
    }
}

static void relay_drain(relay *r)
{
    if (r->failed) {
        return;
    }
    if (!r->handshake_done) {
        ERR_clear_error();
        int rc = SSL_do_handshake(r->ssl);
        if (rc == 1) {
            r->handshake_done = 1;
        } else if (SSL_get_error(r->ssl, rc) != SSL_ERROR_WANT_READ) {
            fprintf(stderr, "  fork server: handshake failed\n");
            uh_errors_to_stderr("server");
            r->failed = 1;
        }
    }
    while (r->handshake_done && !r->failed) {
        size_t n = 0;
        UTLS_RECORD_INFO info;
        ERR_clear_error();
        if (!UTLS_read_record(r->ssl, r->buf, sizeof(r->buf), &n, &info)) {
            int err = SSL_get_error(r->ssl, 0);
            if (err == SSL_ERROR_WANT_READ) {
                break;
            }
            if (err == SSL_ERROR_ZERO_RETURN) {
                r->closed = 1; /* close_notify, in order: everything is in */
                break;
            }
            fprintf(stderr, "  fork server: read failed: SSL_get_error %d\n", err);
            uh_errors_to_stderr("server");
            r->failed = 1;
            break;
        }
        lossy_record *rec = lossy_find_record(r->net, info.stream_offset);
        if (rec == NULL || rec->wire_len != info.wire_len || rec->type != 23) {
            r->forged++;
            fprintf(stderr, "  FORGED: %zu bytes at stream_offset %llu (wire_len %zu)\n", n,
                    (unsigned long long)info.stream_offset, info.wire_len);
            continue;
        }
        if (rec->delivered) {
            r->dups++;
            fprintf(stderr, "  DUPLICATE: record at %llu\n", (unsigned long long)rec->offset);
        }
        rec->delivered++;
        int truth_ooo = lossy_inorder(r->net) < rec->offset;
        if (truth_ooo != (info.out_of_order != 0)) {
            r->flag_mismatch++;
        }
        if (info.out_of_order) {
            r->ooo++;
        } else {
            r->inorder++;
        }
        if (r->nd == r->capd) {
            r->capd = r->capd ? 2 * r->capd : 1024;
            r->d = realloc(r->d, r->capd * sizeof(delivered));
        }
        delivered *dv = &r->d[r->nd++];
        dv->gen = info.key_generation;
        dv->seq = info.seq;
        dv->offset = info.stream_offset;
        dv->len = n;
        r->bytes += n;
        dv->data = malloc(n ? n : 1);
        memcpy(dv->data, r->buf, n);
    }
    relay_write_out(r);
}

static int relay_on_delivery(void *arg, lossy_delivery *del)
{
    relay *r = arg;
    if (del->fills_hole && !r->handshake_done) {
        /* A hole before the receiver's handshake is complete (its client
         * Finished, or what precedes it, is missing): no application key
         * yet, so nothing past it can be delivered out of order (fallback
         * "handshake"; a server must not take application data before the
         * client's Finished). Not a lock-out; counted. */
        r->prehandshake_fills++;
    } else if (del->fills_hole) {
        /* Whatever application record is complete past the hole now should
         * have been delivered; if it is delivered later, it was locked out. */
        for (size_t i = lossy_record_index_after(r->net, del->inorder_before);
             i < lossy_num_records(r->net); i++) {
            lossy_record *rec = lossy_get_record(r->net, i);
            if (rec->complete_at != 0 && rec->complete_at < del->index && rec->after_hole
                && !rec->delivered) {
                rec->tag |= PENDING_AT_FILL;
            }
        }
    }
    ERR_clear_error();
    if (!UTLS_BIO_segment_push(r->seg, del->offset, del->data, del->len)) {
        if (ERR_GET_REASON(ERR_peek_error()) == UTLS_R_OUTSIDE_WINDOW) {
            ERR_clear_error();
            return LOSSY_CB_RETRY;
        }
        uh_errors_to_stderr("push");
        return LOSSY_CB_ABORT;
    }
    relay_drain(r);
    return LOSSY_CB_OK;
}

static int cmp_delivered(const void *a, const void *b)
{
    const delivered *x = a, *y = b;
    if (x->gen != y->gen) {
        return x->gen < y->gen ? -1 : 1;
    }
    if (x->seq != y->seq) {
        return x->seq < y->seq ? -1 : 1;
    }
    return 0;
}

/* ---- the peer ---- */

static pid_t spawn_peer(const icase *c, int port, int *out_stdin, const char *log)
{
    char portstr[16], connect[64], cipher_arg[512];
    snprintf(portstr, sizeof(portstr), "%d", port);
    snprintf(connect, sizeof(connect), "127.0.0.1:%d", port);
    const char *argv[32];
    int a = 0;
    switch (g_peer) {
    case PEER_OPENSSL:
        argv[a++] = g_bin;
        argv[a++] = "s_client";
        argv[a++] = "-connect";
        argv[a++] = connect;
        argv[a++] = "-servername";
        argv[a++] = "localhost";
        argv[a++] = "-quiet";
        argv[a++] = "-no_ign_eof";
        if (c->version == TLS1_3_VERSION) {
            argv[a++] = "-tls1_3";
            argv[a++] = "-ciphersuites";
        } else {
            argv[a++] = "-tls1_2";
            argv[a++] = "-cipher";
        }
        argv[a++] = c->ossl;
        if (c->no_etm) {
            argv[a++] = "-no_etm";
        }
        break;
    case PEER_GNUTLS:
        snprintf(cipher_arg, sizeof(cipher_arg), "--priority=NORMAL:-VERS-ALL:+VERS-TLS1.%d:"
                 "+SHA256:+SHA384:+AES-128-CCM:+AES-256-CCM%s",
                 c->version == TLS1_3_VERSION ? 3 : 2, c->no_etm ? ":%NO_ETM" : "");
        argv[a++] = g_bin;
        argv[a++] = "--insecure";
        argv[a++] = "--port";
        argv[a++] = portstr;
        argv[a++] = cipher_arg;
        argv[a++] = "127.0.0.1";
        break;
    case PEER_NSS:
        /* -D: no certificate database, -o: accept the server's self-signed
         * certificate; data from stdin; at its end a half-close (TCP FIN),
         * not a close_notify. */
        snprintf(cipher_arg, sizeof(cipher_arg), "tls1.%d:tls1.%d",
                 c->version == TLS1_3_VERSION ? 3 : 2, c->version == TLS1_3_VERSION ? 3 : 2);
        argv[a++] = g_bin;
        argv[a++] = "-D";
        argv[a++] = "-o";
        argv[a++] = "-h";
        argv[a++] = "127.0.0.1";
        argv[a++] = "-p";
        argv[a++] = portstr;
        argv[a++] = "-V";
        argv[a++] = cipher_arg;
        argv[a++] = "-c";
        argv[a++] = c->nss;
        break;
    case PEER_GO:
    default:
        argv[a++] = g_bin;
        argv[a++] = "-addr";
        argv[a++] = connect;
        argv[a++] = "-tls";
        argv[a++] = c->version == TLS1_3_VERSION ? "1.3" : "1.2";
        if (c->go != NULL && *c->go) {
            argv[a++] = "-cipher";
            argv[a++] = c->go;
        }
        break;
    }
    argv[a] = NULL;
    int p[2];
    if (pipe(p) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[0], 0);
        close(p[0]);
        close(p[1]);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        /* A legacy peer: nothing of the fork may reach it. */
        unsetenv("LD_PRELOAD");
        unsetenv("LD_LIBRARY_PATH");
        unsetenv("UTLS_MODE");
        unsetenv("OPENSSL_CONF");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[0]);
    fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
    *out_stdin = p[1];
    return pid;
}

/* The library the peer runs, from its maps; 1 if it is the expected one. */
static int check_peer_library(pid_t pid, char *what, size_t len)
{
    char path[128], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(what, len, "maps not readable");
        return 0;
    }
    int system_ssl = 0, fork_ssl = 0, gnutls = 0, any_ssl = 0, nss = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p = strchr(line, '/');
        if (p == NULL) {
            continue;
        }
        p[strcspn(p, "\n")] = '\0';
        if (strstr(p, "libssl.so")) {
            any_ssl = 1;
            if (strcmp(p, "/usr/lib/x86_64-linux-gnu/libssl.so.3") == 0
                || strcmp(p, "/lib/x86_64-linux-gnu/libssl.so.3") == 0) {
                system_ssl = 1;
            } else {
                fork_ssl = 1;
            }
        }
        if (strstr(p, "libgnutls.so.30")) {
            gnutls = 1;
        }
        if (strstr(p, "/libssl3.so")) {
            nss = 1; /* NSS's TLS library (with libnss3.so) */
        }
    }
    fclose(f);
    switch (g_peer) {
    case PEER_OPENSSL:
        snprintf(what, len, "%s", system_ssl && !fork_ssl ? "system libssl.so.3"
                                                         : "NOT the system libssl");
        return system_ssl && !fork_ssl;
    case PEER_GNUTLS:
        snprintf(what, len, "%s", gnutls && !any_ssl ? "libgnutls.so.30" : "NOT GnuTLS alone");
        return gnutls && !any_ssl;
    case PEER_NSS:
        snprintf(what, len, "%s", nss && !any_ssl && !gnutls ? "NSS libssl3.so" : "NOT NSS alone");
        return nss && !any_ssl && !gnutls;
    default:
        snprintf(what, len, "%s", !any_ssl && !gnutls && !nss ? "Go crypto/tls (no libssl, no GnuTLS)"
                                                             : "a C TLS library is mapped");
        return !any_ssl && !gnutls && !nss;
    }
}

static const char *peer_name(void)
{
    return g_peer == PEER_OPENSSL ? "openssl"
         : g_peer == PEER_GNUTLS  ? "gnutls"
         : g_peer == PEER_NSS     ? "nss"
                                  : "go";
}

static uint64_t now_ms(void)
{
    return uh_monotonic_ns() / 1000000ULL;
}

/* One connection; returns 1 if every check passed, adds its out-of-order
 * count to |*ooo_total|. */
static int run_case(const icase *c, uint64_t seed, uint64_t *ooo_total)
{
    int ok = 1;
    /* The input: variable sizes like voice and video frames. */
    lossy_rng rng;
    lossy_rng_seed(&rng, seed);
    size_t cap = g_messages * 1400 + 1;
    uint8_t *input = malloc(cap);
    size_t *ends = malloc(g_messages * sizeof(size_t));
    size_t ilen = 0;
    for (size_t i = 0; i < g_messages; i++) {
        double u = lossy_rng_unit(&rng);
        size_t len = u < 0.55 ? lossy_rng_range(&rng, 50, 200)
                   : u < 0.9  ? lossy_rng_range(&rng, 200, 1000)
                              : lossy_rng_range(&rng, 1000, 1400);
        uh_msg_build(input + ilen, (uint32_t)i, len);
        ilen += len;
        ends[i] = ilen;
    }

    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ctx, c->version);
    SSL_CTX_set_max_proto_version(ctx, c->version);
    if (c->version == TLS1_3_VERSION) {
        SSL_CTX_set_ciphersuites(ctx, c->ossl);
    } else {
        SSL_CTX_set_cipher_list(ctx, c->ossl);
    }
    if (c->no_etm) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_ENCRYPT_THEN_MAC);
    }
    SSL_CTX_use_certificate(ctx, g_cert[c->ec]);
    SSL_CTX_use_PrivateKey(ctx, g_key[c->ec]);

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 1) != 0
        || getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        perror("listen");
        exit(2);
    }
    int port = ntohs(sa.sin_port);
    char log[1024];
    snprintf(log, sizeof(log), "%s/interop-%s-%s.log", g_logdir, peer_name(), c->label);
    int in_fd = -1;
    pid_t pid = spawn_peer(c, port, &in_fd, log);
    struct pollfd pl = {ls, POLLIN, 0};
    if (pid < 0 || poll(&pl, 1, 10000) != 1) {
        fprintf(stderr, "  %s %s: the peer did not connect (log %s)\n", peer_name(), c->label, log);
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        close(ls);
        SSL_CTX_free(ctx);
        free(input);
        free(ends);
        return 0;
    }
    int sock = accept(ls, NULL, NULL);
    close(ls);
    char libwhat[128];
    int lib_ok = check_peer_library(pid, libwhat, sizeof(libwhat));
    if (!lib_ok) {
        fprintf(stderr, "  %s %s: peer pid %d runs %s\n", peer_name(), c->label, (int)pid, libwhat);
        ok = 0;
    }

    relay r;
    memset(&r, 0, sizeof(r));
    r.sock = sock;
    r.ssl = SSL_new(ctx);
    r.seg = BIO_new(UTLS_BIO_s_segment());
    SSL_set_bio(r.ssl, r.seg, r.seg);
    SSL_set_accept_state(r.ssl);
    SSL_set_mode(r.ssl, SSL_MODE_UNORDERED);
    lossy_params p;
    lossy_params_default(&p, g_loss);
    r.net = lossy_new(&p, seed, relay_on_delivery, &r);

    /* Feed the peer a few messages at a time so that its reads (and so its
     * records) come in many sizes; relay its bytes as they come. */
    size_t written = 0, next_msg = 0, target = 0;
    uint64_t deadline = now_ms() + 40000;
    int eof = 0;
    uint8_t buf[1 << 16];
    /* tstclnt neither sends close_notify nor half-closes when its stdin ends
     * (it waits for the server): with NSS the transfer is over once every
     * byte written to it has been delivered. The other peers close. */
    while (!eof && !r.closed && now_ms() < deadline
           && !(g_peer == PEER_NSS && in_fd < 0 && r.bytes >= ilen)) {
        if (in_fd >= 0) {
            if (written == target && next_msg < g_messages) {
                next_msg += (size_t)lossy_rng_range(&rng, 1, 3);
                if (next_msg > g_messages) {
                    next_msg = g_messages;
                }
                target = ends[next_msg - 1];
            }
            if (written < target) {
                ssize_t w = write(in_fd, input + written, target - written);
                if (w > 0) {
                    written += (size_t)w;
                }
            }
            if (written == ilen) {
                close(in_fd);
                in_fd = -1;
            }
        }
        struct pollfd pf = {sock, POLLIN, 0};
        int pr = poll(&pf, 1, 1);
        if (pr == 1) {
            ssize_t n = read(sock, buf, sizeof(buf));
            if (n > 0) {
                if (!lossy_send(r.net, buf, (size_t)n) || !lossy_flush(r.net)) {
                    ok = 0;
                    break;
                }
            } else {
                eof = 1;
            }
        } else {
            lossy_idle(r.net);
        }
        relay_write_out(&r);
    }
    if (!eof && !r.closed && !(g_peer == PEER_NSS && r.bytes >= ilen)) {
        fprintf(stderr, "  %s %s: timed out (written %zu of %zu bytes to the peer)\n",
                peer_name(), c->label, written, ilen);
        ok = 0;
    }
    lossy_finish(r.net);
    relay_drain(&r);
    if (in_fd >= 0) {
        close(in_fd);
    }
    shutdown(sock, SHUT_RDWR);
    close(sock);
    if (g_peer == PEER_NSS) {
        kill(pid, SIGTERM); /* tstclnt does not exit when the server closes */
    }
    int status = 0;
    for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++) {
        usleep(10000);
    }
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }

    /* The delivered plaintext, in record order, is exactly the input. */
    qsort(r.d, r.nd, sizeof(delivered), cmp_delivered);
    size_t pos = 0, mismatched_at = SIZE_MAX;
    uint64_t prev_off = 0;
    int offsets_monotonic = 1;
    for (size_t i = 0; i < r.nd; i++) {
        if (i > 0 && r.d[i].offset <= prev_off) {
            offsets_monotonic = 0;
        }
        prev_off = r.d[i].offset;
        if (mismatched_at == SIZE_MAX
            && (pos + r.d[i].len > ilen || memcmp(input + pos, r.d[i].data, r.d[i].len) != 0)) {
            mismatched_at = pos;
        }
        pos += r.d[i].len;
    }
    uint64_t lockouts = 0, app_records = 0;
    for (size_t i = 0; i < lossy_num_records(r.net); i++) {
        lossy_record *rec = lossy_get_record(r.net, i);
        if ((rec->tag & PENDING_AT_FILL) && rec->delivered) {
            lockouts++;
            fprintf(stderr, "  LOCK-OUT: record at %llu (%zu bytes) complete past a hole at "
                            "delivery %llu, not delivered when the hole was filled\n",
                    (unsigned long long)rec->offset, rec->wire_len,
                    (unsigned long long)rec->complete_at);
        }
        app_records += rec->delivered ? 1 : 0;
    }
    UTLS_STATS st;
    UTLS_get_stats(r.ssl, &st);
    if (getenv("UTLS_INTEROP_DEBUG") != NULL) {
        fprintf(stderr, "  DEBUG headers_found=%llu probe_limit_hits=%llu bytes_dropped=%llu "
                        "fragments=%llu skipped=%llu\n",
                (unsigned long long)st.headers_found, (unsigned long long)st.probe_limit_hits,
                (unsigned long long)st.bytes_dropped, (unsigned long long)st.fragments,
                (unsigned long long)st.records_skipped);
        for (size_t i = 0; i < lossy_num_records(r.net) && i < 40; i++) {
            lossy_record *rec = lossy_get_record(r.net, i);
            fprintf(stderr, "  DEBUG rec %zu off %llu len %zu type %d after_hole %d complete_at %llu delivered %d\n",
                    i, (unsigned long long)rec->offset, rec->wire_len, rec->type, rec->after_hole,
                    (unsigned long long)rec->complete_at, rec->delivered);
        }
    }
    const lossy_counters *lc = lossy_get_counters(r.net);
    uint64_t lost = pos < ilen ? ilen - pos : 0;
    printf("[interop] %-7s %-30s %s seed=0x%llx peer=%s records=%llu in_order=%llu "
           "out_of_order=%llu bytes=%zu/%zu lost=%llu dup=%llu forged=%llu lockouts=%llu "
           "| segs=%llu drops=%llu holes=%llu (%llu before the handshake completed) "
           "| probes=%llu soft=%llu fallback=%s\n",
           peer_name(), c->label, c->version == TLS1_3_VERSION ? "TLS1.3" : "TLS1.2",
           (unsigned long long)seed, lib_ok ? libwhat : "WRONG", (unsigned long long)app_records,
           (unsigned long long)r.inorder, (unsigned long long)r.ooo, pos, ilen,
           (unsigned long long)lost, (unsigned long long)r.dups, (unsigned long long)r.forged,
           (unsigned long long)lockouts, (unsigned long long)lc->segments,
           (unsigned long long)lc->drops, (unsigned long long)lc->holes_filled,
           (unsigned long long)r.prehandshake_fills,
           (unsigned long long)st.probes, (unsigned long long)st.soft_failures,
           UTLS_fallback_string(st.fallback));
    fflush(stdout);
    const char *negotiated = SSL_get_cipher_name(r.ssl);
    if (negotiated == NULL || strcmp(negotiated, c->ossl) != 0) {
        fprintf(stderr, "  %s %s: negotiated %s\n", peer_name(), c->label,
                negotiated ? negotiated : "nothing");
        ok = 0;
    }
    if (r.failed || pos != ilen || mismatched_at != SIZE_MAX || r.dups || r.forged
        || r.flag_mismatch || lockouts || !offsets_monotonic || st.fallback != UTLS_FALLBACK_NONE
        || st.records_out_of_order != r.ooo || st.records_in_order != r.inorder) {
        fprintf(stderr,
                "  FAIL %s %s: failed=%d delivered %zu of %zu bytes, first mismatch at %zd, "
                "dups %llu forged %llu flag mismatches %llu lockouts %llu offsets monotonic %d "
                "stats in/ooo %llu/%llu negotiated %s (peer log %s)\n",
                peer_name(), c->label, r.failed, pos, ilen,
                mismatched_at == SIZE_MAX ? (ssize_t)-1 : (ssize_t)mismatched_at,
                (unsigned long long)r.dups, (unsigned long long)r.forged,
                (unsigned long long)r.flag_mismatch, (unsigned long long)lockouts,
                offsets_monotonic, (unsigned long long)st.records_in_order,
                (unsigned long long)st.records_out_of_order, negotiated ? negotiated : "?", log);
        ok = 0;
    }
    *ooo_total += r.ooo;
    for (size_t i = 0; i < r.nd; i++) {
        free(r.d[i].data);
    }
    free(r.d);
    lossy_free(r.net);
    SSL_free(r.ssl);
    SSL_CTX_free(ctx);
    free(input);
    free(ends);
    return ok;
}

int main(int argc, char **argv)
{
    int version = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--peer") == 0 && i + 1 < argc) {
            const char *p = argv[++i];
            g_peer = strcmp(p, "openssl") == 0 ? PEER_OPENSSL
                   : strcmp(p, "gnutls") == 0  ? PEER_GNUTLS
                   : strcmp(p, "go") == 0      ? PEER_GO
                   : strcmp(p, "nss") == 0     ? PEER_NSS
                                               : -1;
        } else if (strcmp(argv[i], "--bin") == 0 && i + 1 < argc) {
            g_bin = argv[++i];
        } else if (strcmp(argv[i], "--tls") == 0 && i + 1 < argc) {
            version = strcmp(argv[++i], "1.3") == 0 ? TLS1_3_VERSION : TLS1_2_VERSION;
        } else if (strcmp(argv[i], "--logdir") == 0 && i + 1 < argc) {
            g_logdir = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--loss") == 0 && i + 1 < argc) {
            g_loss = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--messages") == 0 && i + 1 < argc) {
            g_messages = strtoul(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: %s --peer openssl|gnutls|go|nss --bin PATH --tls 1.2|1.3 "
                            "[--logdir DIR] [--seed N] [--loss P] [--messages N] [--only CIPHER]\n",
                    argv[0]);
            return 2;
        }
    }
    if (g_peer < 0 || g_bin == NULL || version == 0) {
        fprintf(stderr, "%s: --peer, --bin and --tls are required\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    printf("[interop] receiver libssl: %s\n", uh_libssl_path());
    if (strstr(uh_libssl_path(), "/build") == NULL) {
        printf("[interop] FAIL: the receiver does not run on the fork's libssl.so.3\n");
        return 1;
    }
    if (!uh_make_identity(0, &g_key[0], &g_cert[0]) || !uh_make_identity(1, &g_key[1], &g_cert[1])) {
        return 2;
    }
    int all_ok = 1, n = 0;
    uint64_t ooo = 0;
    for (size_t i = 0; i < sizeof(g_cases) / sizeof(g_cases[0]); i++) {
        const icase *c = &g_cases[i];
        if (c->version != version || (only != NULL && strcmp(only, c->label) != 0)) {
            continue;
        }
        if ((g_peer == PEER_GNUTLS && !c->gnutls) || (g_peer == PEER_GO && c->go == NULL)
            || (g_peer == PEER_NSS && c->nss == NULL)) {
            continue;
        }
        uint64_t seed = g_seed ^ ((uint64_t)(i + 1) << 32) ^ ((uint64_t)g_peer << 48);
        all_ok &= run_case(c, seed, &ooo);
        n++;
    }
    printf("[interop] %s TLS1.%d: %d ciphers, %llu records out of order in total: %s\n",
           peer_name(), version == TLS1_3_VERSION ? 3 : 2, n, (unsigned long long)ooo,
           all_ok && ooo > 0 && n > 0 ? "PASS" : "FAIL");
    EVP_PKEY_free(g_key[0]);
    EVP_PKEY_free(g_key[1]);
    X509_free(g_cert[0]);
    X509_free(g_cert[1]);
    return all_ok && ooo > 0 && n > 0 ? 0 : 1;
}
