/*
 * parity_dtls_client: the DTLS 1.2 peer of the parity suite
 * (tests/parity/README.md). Always linked against, and run with, the
 * system's libssl, so that between the two runs of a case only the server's
 * library differs. It talks to the server through the driver's UDP
 * man-in-the-middle, which injects hostile datagrams after the first echo.
 *
 *   parity_dtls_client --port P [--cipher LIST] [--wait-ms N]
 *
 * Handshake, send "ping-1" and read its echo, then send "ping-2" and read for
 * up to --wait-ms: prints one JSON line with the handshake result, every
 * application record received after the injection, alerts received and
 * SSL_get_error of the read that ended it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static char g_alerts[1024];

static void info_cb(const SSL *s, int where, int ret)
{
    char item[128];

    (void)s;
    if (!(where & SSL_CB_ALERT) || (where & SSL_CB_WRITE))
        return;
    snprintf(item, sizeof(item), "%s\"%s:%d:%s\"", g_alerts[0] ? "," : "", SSL_alert_type_string_long(ret),
             ret & 0xff, SSL_alert_desc_string_long(ret));
    strncat(g_alerts, item, sizeof(g_alerts) - strlen(g_alerts) - 1);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void wait_readable(int fd, int ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    poll(&p, 1, ms);
}

static const char *err_name(int e)
{
    switch (e) {
    case SSL_ERROR_NONE: return "SSL_ERROR_NONE";
    case SSL_ERROR_SSL: return "SSL_ERROR_SSL";
    case SSL_ERROR_WANT_READ: return "SSL_ERROR_WANT_READ";
    case SSL_ERROR_SYSCALL: return "SSL_ERROR_SYSCALL";
    case SSL_ERROR_ZERO_RETURN: return "SSL_ERROR_ZERO_RETURN";
    default: return "SSL_ERROR_OTHER";
    }
}

int main(int argc, char **argv)
{
    int port = 0, wait_ms = 800, i, fd, ret, err = SSL_ERROR_NONE;
    const char *cipher = NULL;
    struct sockaddr_in a;
    SSL_CTX *ctx;
    SSL *s;
    BIO *b;
    char buf[20000], got[2048] = "";
    long long deadline;
    int echo1 = 0, echo2 = 0;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--cipher") == 0)
            cipher = argv[i + 1];
        else if (strcmp(argv[i], "--wait-ms") == 0)
            wait_ms = atoi(argv[i + 1]);
    }
    ctx = SSL_CTX_new(DTLS_client_method());
    if (cipher != NULL)
        SSL_CTX_set_cipher_list(ctx, cipher);
    SSL_CTX_set_info_callback(ctx, info_cb);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);

    fd = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("parity_dtls_client: connect");
        return 2;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    b = BIO_new_dgram(fd, BIO_NOCLOSE);
    BIO_ctrl(b, BIO_CTRL_DGRAM_SET_CONNECTED, 0, &a);
    s = SSL_new(ctx);
    SSL_set_bio(s, b, b);

    deadline = now_ms() + 12000;
    while ((ret = SSL_connect(s)) != 1) {
        err = SSL_get_error(s, ret);
        if (err != SSL_ERROR_WANT_READ || now_ms() > deadline)
            break;
        wait_readable(fd, 20);
        DTLSv1_handle_timeout(s);
    }
    if (ret != 1) {
        printf("{\"handshake\":\"failed\",\"ssl_error\":\"%s\",\"alerts_recv\":[%s]}\n", err_name(err), g_alerts);
        return 0;
    }

    /* ping-1: the man in the middle injects when it forwards this echo. */
    SSL_write(s, "ping-1", 6);
    err = SSL_ERROR_NONE;
    deadline = now_ms() + 2000;
    while (now_ms() < deadline) {
        ret = SSL_read(s, buf, sizeof(buf) - 1);
        if (ret > 0) {
            echo1 = ret == 6 && memcmp(buf, "ping-1", 6) == 0;
            break;
        }
        err = SSL_get_error(s, ret);
        if (err != SSL_ERROR_WANT_READ)
            break;
        err = SSL_ERROR_NONE;
        wait_readable(fd, 20);
    }
    /* No wait needed: the man in the middle sent the injected datagrams to the
     * server before it forwarded the echo of ping-1, so they are queued at the
     * server ahead of ping-2. */
    if (SSL_write(s, "ping-2", 6) <= 0)
        err = SSL_get_error(s, -1);
    deadline = now_ms() + wait_ms;
    while (err == SSL_ERROR_NONE && now_ms() < deadline) {
        ret = SSL_read(s, buf, sizeof(buf) - 1);
        if (ret > 0) {
            int k;
            buf[ret] = 0;
            for (k = 0; k < ret; k++)
                if (buf[k] < 0x20 || buf[k] > 0x7e || buf[k] == '"' || buf[k] == '\\')
                    buf[k] = '?';
            {
                size_t used = strlen(got);
                if (used + (size_t)ret + 4 < sizeof(got))
                    snprintf(got + used, sizeof(got) - used, "%s\"%.*s\"", used ? "," : "",
                             (int)(sizeof(got) - used - 4), buf);
            }
            if (ret == 6 && memcmp(buf, "ping-2", 6) == 0) {
                echo2 = 1;
                break;
            }
            continue;
        }
        err = SSL_get_error(s, ret);
        if (err == SSL_ERROR_WANT_READ) {
            err = SSL_ERROR_NONE;
            wait_readable(fd, 20);
        }
    }
    printf("{\"handshake\":\"ok\",\"echo1\":%s,\"echo2\":%s,\"received\":[%s],\"ssl_error\":\"%s\","
           "\"alerts_recv\":[%s]}\n",
           echo1 ? "true" : "false", echo2 ? "true" : "false", got, err_name(err), g_alerts);
    fflush(stdout);
    if (err == SSL_ERROR_NONE)
        SSL_shutdown(s);
    SSL_free(s);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}
