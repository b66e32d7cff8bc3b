/*
 * ern_peer: one endpoint of a fork <-> fork connection over a real loopback
 * socket, linked to the fork (tests/ern-interop). Negotiation is switched on
 * the way an unmodified program gets it: UTLS_MODE in the environment (read
 * by the fork in SSL_CTX_new). After the exchange it prints on stderr
 *   ERN role=<r> version=<v> status=0x<bits> sent=<n> received=<n>
 * with UTLS_ern_status() and the UTLS_get_stats() ERN counters.
 *
 *   ern_peer server --tls 1.3 --cert C --key K          (prints LISTENING port)
 *   ern_peer client --tls 1.3 --ca C --port P --msgs F  (answers on stdout)
 * TLS 1.2 options of both: --cipher LIST, --etm 0 (MAC-then-encrypt).
 * The server answers each line with the line reversed; the client sends a
 * line, waits for its answer, then sends the next one.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

static void die(const char *what)
{
    fprintf(stderr, "ern_peer: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* Reads one line (up to and including '\n') into buf; returns its length, 0 on EOF. */
static size_t read_line(SSL *s, char *buf, size_t cap, char *pend, size_t *npend)
{
    size_t n = 0;

    for (;;) {
        char *nl = memchr(pend, '\n', *npend);
        if (nl != NULL) {
            n = (size_t)(nl - pend) + 1;
            if (n > cap)
                die("line too long");
            memcpy(buf, pend, n);
            memmove(pend, pend + n, *npend - n);
            *npend -= n;
            return n;
        }
        if (*npend >= 65536)
            die("line too long");
        int r = SSL_read(s, pend + *npend, (int)(65536 - *npend));
        if (r <= 0) {
            int e = SSL_get_error(s, r);
            if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
                return 0;
            die("SSL_read");
        }
        *npend += (size_t)r;
    }
}

static void write_all(SSL *s, const char *p, size_t n)
{
    size_t w;

    if (!SSL_write_ex(s, p, n, &w) || w != n)
        die("SSL_write");
}

static void report(SSL *s, const char *role)
{
    UTLS_STATS st;

    memset(&st, 0, sizeof(st));
    if (!UTLS_get_stats(s, &st))
        die("UTLS_get_stats");
    fprintf(stderr, "ERN role=%s version=%s status=0x%x sent=%llu received=%llu\n", role,
           SSL_get_version(s), UTLS_ern_status(s),
           (unsigned long long)st.ern_records_sent, (unsigned long long)st.ern_records_received);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *tls = "1.3", *cert = NULL, *key = NULL, *ca = NULL, *msgs = NULL, *ciphers = NULL;
    int port = 0, server, etm = 1;
    static char line[65536], pend[65536];
    size_t npend = 0;

    if (argc < 2)
        die("usage: ern_peer server|client [options]");
    server = strcmp(argv[1], "server") == 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tls")) tls = argv[i + 1];
        else if (!strcmp(argv[i], "--cert")) cert = argv[i + 1];
        else if (!strcmp(argv[i], "--key")) key = argv[i + 1];
        else if (!strcmp(argv[i], "--ca")) ca = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--msgs")) msgs = argv[i + 1];
        else if (!strcmp(argv[i], "--cipher")) ciphers = argv[i + 1]; /* TLS 1.2 list */
        else if (!strcmp(argv[i], "--etm")) etm = atoi(argv[i + 1]); /* 0: MAC-then-encrypt */
        else die("unknown option");
    }
    int v = strcmp(tls, "1.2") == 0 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, v) || !SSL_CTX_set_max_proto_version(ctx, v))
        die("SSL_CTX_new");
    if (ciphers != NULL && SSL_CTX_set_cipher_list(ctx, ciphers) != 1)
        die("SSL_CTX_set_cipher_list");
    if (!etm)
        SSL_CTX_set_options(ctx, SSL_OP_NO_ENCRYPT_THEN_MAC);

    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd;
    SSL *s;

    if (server) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1
            || SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
            die("certificate");
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        socklen_t sl = sizeof(sa);
        if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 1) != 0
            || getsockname(ls, (struct sockaddr *)&sa, &sl) != 0)
            die("listen");
        printf("LISTENING %d\n", ntohs(sa.sin_port));
        fflush(stdout);
        fd = accept(ls, NULL, NULL);
        if (fd < 0)
            die("accept");
        close(ls);
        s = SSL_new(ctx);
        SSL_set_fd(s, fd);
        if (SSL_accept(s) != 1)
            die("SSL_accept");
        fprintf(stderr, "VERSION %s\n", SSL_get_version(s));
        size_t n;
        while ((n = read_line(s, line, sizeof(line), pend, &npend)) > 0) {
            size_t m = n - 1;
            while (m > 0 && line[m - 1] == '\r')
                m--;
            for (size_t i = 0; i < m / 2; i++) {
                char t = line[i];
                line[i] = line[m - 1 - i];
                line[m - 1 - i] = t;
            }
            line[m] = '\n';
            write_all(s, line, m + 1);
        }
        report(s, "server");
    } else {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
            die("CA file");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        sa.sin_port = htons((unsigned short)port);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
            die("connect");
        s = SSL_new(ctx);
        SSL_set_fd(s, fd);
        SSL_set_tlsext_host_name(s, "localhost");
        if (!SSL_set1_host(s, "localhost") || SSL_connect(s) != 1)
            die("SSL_connect");
        fprintf(stderr, "VERSION %s\n", SSL_get_version(s));
        FILE *f = fopen(msgs, "rb");
        if (f == NULL)
            die("msgs file");
        while (fgets(line, sizeof(line), f) != NULL) {
            write_all(s, line, strlen(line));
            size_t n = read_line(s, line, sizeof(line), pend, &npend);
            if (n == 0)
                die("EOF before the answer");
            fwrite(line, 1, n, stdout);
            fflush(stdout);
        }
        fclose(f);
        report(s, "client");
    }
    SSL_shutdown(s);
    SSL_free(s);
    close(fd);
    SSL_CTX_free(ctx);
    return 0;
}
