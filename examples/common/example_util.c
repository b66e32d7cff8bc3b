/* example_util.c: see example_util.h. */
#define _GNU_SOURCE
#include "example_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

/* How long drain_until_closed waits for the peer's next bytes or close. */
#define DRAIN_WAIT_MS 30000

/* How long connect_retry keeps retrying a refused connect. */
#define CONNECT_RETRY_NS 15000000000ull

const char *example_name = "example";
int example_quiet;

static void vmessage(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", example_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
}

void die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    ERR_print_errors_fp(stderr);
    exit(2);
}

void note(const char *fmt, ...)
{
    va_list ap;

    if (example_quiet)
        return;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t real_minus_mono_ns(void)
{
    struct timespec r, m;

    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &m);
    return ((int64_t)r.tv_sec - m.tv_sec) * 1000000000 + (r.tv_nsec - m.tv_nsec);
}

void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        continue;
}

void put32(unsigned char *p, uint32_t v)
{
    p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

uint32_t get32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

uint64_t get64(const unsigned char *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

const char *loaded_libssl(void)
{
    static char path[4096];
    Dl_info di;

    if (dladdr((void *)&SSL_read, &di) == 0 || di.dli_fname == NULL)
        return "?";
    if (realpath(di.dli_fname, path) == NULL)
        snprintf(path, sizeof(path), "%s", di.dli_fname);
    return path;
}

int symbol_loaded(const char *name)
{
    return dlsym(RTLD_DEFAULT, name) != NULL;
}

void parse_addr(const char *s, int socktype, struct sockaddr_storage *ss, socklen_t *sl)
{
    char host[256];
    const char *colon = strrchr(s, ':');
    struct addrinfo hints = {0}, *res;
    int rc;

    if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
        die("address %s: want HOST:PORT", s);
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    hints.ai_socktype = socktype;
    hints.ai_flags = AI_NUMERICSERV;
    if ((rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res)) != 0)
        die("address %s: %s", s, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sl = res->ai_addrlen;
    freeaddrinfo(res);
}

int listen_socket(int type, const struct sockaddr_storage *ss, socklen_t sl, const char *addr)
{
    int fd = socket(ss->ss_family, type, 0), one = 1;

    if (fd < 0)
        die("socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)ss, sl) != 0)
        die("bind %s: %s", addr, strerror(errno));
    if (type == SOCK_STREAM && listen(fd, 4) != 0)
        die("listen: %s", strerror(errno));
    return fd;
}

int listen_tcp(const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t sl;

    parse_addr(addr, SOCK_STREAM, &ss, &sl);
    return listen_socket(SOCK_STREAM, &ss, sl, addr);
}

int connect_retry(int type, const struct sockaddr_storage *ss, socklen_t sl, const char *addr,
                  const char *cc)
{
    uint64_t deadline = now_ns() + CONNECT_RETRY_NS;
    int fd, one = 1;

    for (;;) {
        if ((fd = socket(ss->ss_family, type, 0)) < 0)
            die("socket: %s", strerror(errno));
        if (type == SOCK_STREAM) {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* no Nagle */
            /* The sender's congestion control decides whether records queue
             * in the sender at 2% loss (cubic) or not (bbr); see bench/latency. */
            if (cc != NULL && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) != 0)
                die("congestion control %s: %s", cc, strerror(errno));
        }
        if (connect(fd, (const struct sockaddr *)ss, sl) == 0)
            return fd;
        if (type != SOCK_STREAM || (errno != ECONNREFUSED && errno != ENETUNREACH)
            || now_ns() > deadline)
            die("connect %s: %s", addr, strerror(errno));
        close(fd);
        usleep(50000);
    }
}

int wait_readable(int fd, long ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;

    while ((r = poll(&p, 1, (int)ms)) < 0 && errno == EINTR)
        continue;
    return r > 0;
}

void make_cert(SSL_CTX *ctx, const char *cn)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();

    if (key == NULL || x == NULL || !ASN1_INTEGER_set(X509_get_serialNumber(x), 1)
        || X509_gmtime_adj(X509_getm_notBefore(x), -60) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(x), 86400) == NULL
        || !X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                       (const unsigned char *)cn, -1, -1, 0)
        || !X509_set_issuer_name(x, X509_get_subject_name(x)) || !X509_set_pubkey(x, key)
        || !X509_sign(x, key, EVP_sha256()) || !SSL_CTX_use_certificate(ctx, x)
        || !SSL_CTX_use_PrivateKey(ctx, key))
        die("cannot make a certificate");
    X509_free(x);
    EVP_PKEY_free(key);
}

void touch_ready(const char *path, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char tmp[4096];
    FILE *f;
    int port = 0;

    if (path == NULL)
        return;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                             : ((struct sockaddr_in6 *)&ss)->sin6_port);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if ((f = fopen(tmp, "w")) == NULL)
        die("cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "%d\n", port);
    fclose(f);
    if (rename(tmp, path) != 0)
        die("cannot rename %s: %s", tmp, strerror(errno));
}

int parse_role(const char *arg, void (*usage)(void))
{
    if (arg != NULL && strcmp(arg, "send") == 0)
        return 1;
    if (arg != NULL && strcmp(arg, "recv") == 0)
        return 0;
    usage();
    abort(); /* usage does not return */
}

int parse_choice(const char *arg, const char *const *names, size_t num_names, void (*usage)(void))
{
    for (size_t k = 0; k < num_names; k++) {
        if (strcmp(arg, names[k]) == 0)
            return (int)k;
    }
    usage();
    abort(); /* usage does not return */
}

static const example_option *find_option(const example_option *opts, size_t num_opts,
                                         const char *name)
{
    for (size_t k = 0; k < num_opts; k++) {
        if (strcmp(opts[k].name, name) == 0)
            return &opts[k];
    }
    return NULL;
}

void parse_options(int argc, char **argv, int first, const example_option *opts, size_t num_opts,
                   void (*usage)(void))
{
    for (int i = first; i < argc; i++) {
        const example_option *o = find_option(opts, num_opts, argv[i]);
        const char *v;
        char *end;

        if (o == NULL)
            usage();
        if (o->type == EXAMPLE_OPT_FLAG) {
            *(int *)o->dest = 1;
            continue;
        }
        if (++i >= argc)
            usage();
        v = argv[i];
        errno = 0;
        switch (o->type) {
        case EXAMPLE_OPT_STR:
            *(const char **)o->dest = v;
            continue;
        case EXAMPLE_OPT_LONG:
            *(long *)o->dest = strtol(v, &end, 10);
            break;
        case EXAMPLE_OPT_DOUBLE:
            *(double *)o->dest = strtod(v, &end);
            break;
        case EXAMPLE_OPT_FLAG:
        default:
            usage();
        }
        if (end == v || *end != '\0' || errno != 0)
            usage();
    }
}

void parse_receiver_options(int argc, char **argv, int first, const char **out_addr,
                            const char **out_ready, long *out_count, long *out_size,
                            void (*usage)(void))
{
    const example_option opts[] = {
        {"--listen", EXAMPLE_OPT_STR, out_addr},
        {"--ready", EXAMPLE_OPT_STR, out_ready},
        {"--count", EXAMPLE_OPT_LONG, out_count},
        {"--size", EXAMPLE_OPT_LONG, out_size},
    };

    parse_options(argc, argv, first, opts, sizeof(opts) / sizeof(opts[0]), usage);
}

void check_require(const char *require, int is_fork, int stock_build)
{
    if (stock_build && is_fork)
        die("this is the stock build, but the uTLS fork %s is loaded", loaded_libssl());
    if (require == NULL)
        return;
    if (strcmp(require, "fork") == 0) {
        if (!is_fork)
            die("--require fork: %s is not the uTLS fork", loaded_libssl());
    } else if (strcmp(require, "stock") == 0) {
        if (is_fork)
            die("--require stock: %s is the uTLS fork", loaded_libssl());
    } else {
        die("--require %s: expected fork or stock", require);
    }
}

FILE *start_log(const char *path, long timeout_s)
{
    FILE *f = stdout;

    signal(SIGPIPE, SIG_IGN);
    if (timeout_s > 0)
        alarm((unsigned)timeout_s);
    if (path != NULL && (f = fopen(path, "w")) == NULL)
        die("cannot write %s: %s", path, strerror(errno));
    return f;
}

void end_log(FILE *logf)
{
    if (logf != stdout)
        fclose(logf);
}

void drain_until_closed(int fd, void *buf, size_t buf_len)
{
    shutdown(fd, SHUT_WR);
    while (wait_readable(fd, DRAIN_WAIT_MS) && read(fd, buf, buf_len) > 0)
        continue;
}

int frame_take(unsigned char *msg, size_t *have, size_t size, const unsigned char *buf,
               size_t len, size_t *pos)
{
    size_t take = size - *have;

    if (take > len - *pos)
        take = len - *pos;
    memcpy(msg + *have, buf + *pos, take);
    *have += take;
    *pos += take;
    if (*have < size)
        return 0;
    *have = 0;
    return 1;
}

int accept_tcp(int lfd)
{
    int fd, one = 1;

    if ((fd = accept(lfd, NULL, NULL)) < 0)
        die("accept: %s", strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

void accept_tls(SSL *ssl, BIO *bio, int fd, const char *what)
{
    if (bio == NULL && (bio = BIO_new_socket(fd, BIO_CLOSE)) == NULL)
        die("BIO_new_socket");
    SSL_set_bio(ssl, bio, bio);
    if (SSL_accept(ssl) != 1)
        die("TLS handshake failed");
    note("recv %s: handshake done (%s, %s)", what, SSL_get_version(ssl), SSL_get_cipher_name(ssl));
}

SSL *new_tls13_server(const char *cn, SSL_CTX **out_ctx)
{
    SSL_CTX *ctx;
    SSL *ssl;

    if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
        die("SSL_CTX_new");
    make_cert(ctx, cn);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if ((ssl = SSL_new(ctx)) == NULL)
        die("SSL_new");
    *out_ctx = ctx;
    return ssl;
}

long count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

int record_log_add(record_log *rl, FILE *logf, int payload_ok, uint32_t idx, size_t len,
                   uint64_t send_ns, uint64_t recv_ns, const char *extra)
{
    if (!payload_ok) {
        rl->num_bad++;
        fprintf(logf, "{\"i\":-1,\"len\":%zu,\"recv_ns\":%llu,\"ok\":0}\n", len,
                (unsigned long long)recv_ns);
        return 0;
    }
    if (rl->seen[idx]) {
        rl->num_dup++;
        fprintf(logf, "{\"i\":%u,\"send_ns\":%llu,\"recv_ns\":%llu,\"dup\":1,\"ok\":0}\n", idx,
                (unsigned long long)send_ns, (unsigned long long)recv_ns);
        return 0;
    }
    rl->seen[idx] = 1;
    rl->num_ok++;
    fprintf(logf, "{\"i\":%u,\"send_ns\":%llu,\"recv_ns\":%llu%s,\"ok\":1}\n", idx,
            (unsigned long long)send_ns, (unsigned long long)recv_ns, extra);
    return 1;
}
