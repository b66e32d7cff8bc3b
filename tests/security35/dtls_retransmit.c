/*
 * dtls_retransmit: CVE-2026-84782's attack situation against whichever
 * libssl.so.3 the dynamic linker gives this program (run by security35.sh,
 * under valgrind).
 *
 * A DTLS 1.2 server with a 256-byte MTU writes its first flight (ServerHello,
 * a Certificate in several fragments, ServerKeyExchange, ServerHelloDone)
 * into a datagram BIO that refuses one write in the middle of the
 * Certificate (BIO_should_retry: the socket buffer was full). The
 * application then lets the retransmission timer expire and calls
 * DTLSv1_handle_timeout() before it resumes the handshake, as an event loop
 * that serves timers and writability separately does. A libssl that
 * retransmits here from a stale init_off sends bytes from the wrong place
 * (and rewrites init_buf under the interrupted write).
 *
 * Safe behaviour, checked here for every datagram the server sends: each
 * handshake fragment it sends, first transmission or retransmission, is a
 * slice of one consistent message per message sequence number (same type,
 * same length, same bytes at the same offset), and afterwards the handshake
 * completes and application data flows both ways. Prints one JSON line
 * (libssl mapped, fragments seen, retransmitted during the interrupted
 * write or not, verdict); exit 0 when safe, 1 when not, 2 when the
 * situation did not arise (the refused write did not happen mid-message).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "test_identity.h"

#define MAX_DGRAMS 256
#define MAX_DGRAM 2048
#define MAX_MSGS 16
#define MAX_MSG 16384

/* --- A datagram queue BIO: each write is one datagram -------------------- */

struct dgram_queue {
    unsigned char data[MAX_DGRAMS][MAX_DGRAM];
    size_t len[MAX_DGRAMS];
    size_t head, tail; /* tail - head datagrams queued */
};

struct qbio {
    struct dgram_queue *in, *out;
    int refuse_write_at; /* refuse the write with this index once (-1: none) */
    int writes;          /* writes accepted or refused so far */
    int refused;
};

static int qbio_write(BIO *b, const char *buf, int len)
{
    struct qbio *q = BIO_get_data(b);
    struct dgram_queue *o = q->out;

    BIO_clear_retry_flags(b);
    if (q->writes++ == q->refuse_write_at) {
        q->refused = 1;
        BIO_set_retry_write(b);
        return -1;
    }
    if (len <= 0 || len > MAX_DGRAM || o->tail - o->head >= MAX_DGRAMS || o->tail >= MAX_DGRAMS)
        return -1; /* a bounded test queue: larger means a broken run */
    memcpy(o->data[o->tail], buf, (size_t)len);
    o->len[o->tail++] = (size_t)len;
    return len;
}

static int qbio_read(BIO *b, char *buf, int len)
{
    struct qbio *q = BIO_get_data(b);
    struct dgram_queue *in = q->in;
    size_t n;

    BIO_clear_retry_flags(b);
    if (in->head == in->tail) {
        BIO_set_retry_read(b);
        return -1;
    }
    n = in->len[in->head];
    if (n > (size_t)len)
        n = (size_t)len; /* a datagram read truncates */
    memcpy(buf, in->data[in->head++], n);
    return (int)n;
}

static long qbio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_DGRAM_QUERY_MTU:
    case BIO_CTRL_DGRAM_GET_FALLBACK_MTU:
        return 256;
    default:
        return 0;
    }
}

static BIO_METHOD *qbio_method(void)
{
    static BIO_METHOD *m;

    if (m == NULL) {
        m = BIO_meth_new(BIO_TYPE_SOURCE_SINK | BIO_get_new_index(), "security35 datagram queue");
        if (m == NULL || !BIO_meth_set_write(m, qbio_write) || !BIO_meth_set_read(m, qbio_read)
            || !BIO_meth_set_ctrl(m, qbio_ctrl))
            return NULL;
    }
    return m;
}

static BIO *qbio_new(struct qbio *q)
{
    BIO *b = BIO_new(qbio_method());

    if (b != NULL) {
        BIO_set_data(b, q);
        BIO_set_init(b, 1);
    }
    return b;
}

/* --- What the server sent must be consistent ----------------------------- */

struct msg {
    int seen;
    unsigned char type;
    size_t len;
    unsigned char body[MAX_MSG];
    unsigned char have[MAX_MSG];
};

static struct msg msgs[MAX_MSGS];
static int fragments, inconsistent;

static size_t get24(const unsigned char *p)
{
    return (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
}

/* Every epoch-0 handshake record in the server's datagrams from index
 * from on: its fragment must agree with everything sent before for that
 * message sequence number. (Epoch 1 records are encrypted: not looked at.) */
static void check_datagrams(const struct dgram_queue *q, size_t from)
{
    size_t i;

    for (i = from; i < q->tail; i++) {
        const unsigned char *p = q->data[i];
        size_t left = q->len[i];

        while (left >= 13) {
            size_t rlen = (size_t)p[11] << 8 | p[12];
            unsigned int epoch = (unsigned int)p[3] << 8 | p[4];

            if (rlen > left - 13) {
                inconsistent++; /* a record longer than its datagram */
                break;
            }
            if (p[0] == SSL3_RT_HANDSHAKE && epoch == 0 && rlen >= 12) {
                const unsigned char *h = p + 13;
                size_t mlen = get24(h + 1), seq = (size_t)h[4] << 8 | h[5];
                size_t off = get24(h + 6), flen = get24(h + 9), k;
                struct msg *m;

                fragments++;
                if (seq >= MAX_MSGS || mlen > MAX_MSG || off + flen > mlen || flen != rlen - 12) {
                    inconsistent++;
                } else {
                    m = &msgs[seq];
                    if (!m->seen) {
                        m->seen = 1;
                        m->type = h[0];
                        m->len = mlen;
                    }
                    if (m->type != h[0] || m->len != mlen)
                        inconsistent++;
                    for (k = 0; k < flen; k++) {
                        if (m->have[off + k] && m->body[off + k] != h[12 + k]) {
                            inconsistent++;
                            break;
                        }
                        m->have[off + k] = 1;
                        m->body[off + k] = h[12 + k];
                    }
                }
            }
            p += 13 + rlen;
            left -= 13 + rlen;
        }
    }
}

/* --- Set-up -------------------------------------------------------------- */

static int make_cert(EVP_PKEY **out_key, X509 **out_cert)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    X509_NAME *name;
    /* A long subject makes a Certificate message of several fragments. */
    /* (X.520 bounds each of these at 64 characters.) */
    const char *cn = "security35-dtls-retransmit.test.example.invalid.padding.abcdef";

    if (key == NULL || cert == NULL)
        goto err;
    name = X509_get_subject_name(cert);
    if (!X509_set_version(cert, 2) || !ASN1_INTEGER_set(X509_get_serialNumber(cert), 1)
        || !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0)
        || !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0)
        || !X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0)
        || !X509_set_issuer_name(cert, name) || X509_gmtime_adj(X509_getm_notBefore(cert), 0) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(cert), 3600) == NULL || !X509_set_pubkey(cert, key)
        || !X509_sign(cert, key, EVP_sha256()))
        goto err;
    *out_key = key;
    *out_cert = cert;
    return 1;
err:
    EVP_PKEY_free(key);
    X509_free(cert);
    return 0;
}

/* The retransmission timer: 1 ms at first, so that it has expired by the
 * time the test looks (DTLS_set_timer_cb: called with the current duration,
 * 0 for the first). */
static unsigned int short_timer(SSL *s, unsigned int us)
{
    (void)s;
    return us == 0 ? 1000 : 2 * us;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

static int step(SSL *s, int *done)
{
    int r, e;

    if (*done)
        return 1;
    r = SSL_do_handshake(s);
    if (r == 1) {
        *done = 1;
        return 1;
    }
    e = SSL_get_error(s, r);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

int main(void)
{
    static struct dgram_queue c2s, s2c;
    struct qbio sq = { &c2s, &s2c, -1, 0, 0 }, cq = { &s2c, &c2s, -1, 0, 0 };
    EVP_PKEY *key = NULL;
    X509 *cert = NULL;
    SSL_CTX *sctx, *cctx;
    SSL *server, *client;
    BIO *sb, *cb;
    char lib[1024], buf[64];
    int sdone = 0, cdone = 0, r, i, mid_message, retransmitted, data_ok = 0;
    size_t before_timeout;

    if (!make_cert(&key, &cert))
        return 1;
    sctx = SSL_CTX_new(DTLS_server_method());
    cctx = SSL_CTX_new(DTLS_client_method());
    if (sctx == NULL || cctx == NULL || !SSL_CTX_use_certificate(sctx, cert) || !SSL_CTX_use_PrivateKey(sctx, key)
        || !SSL_CTX_set_max_proto_version(sctx, DTLS1_2_VERSION)
        || !SSL_CTX_set_cipher_list(sctx, "ECDHE-ECDSA-AES128-GCM-SHA256")) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    server = SSL_new(sctx);
    client = SSL_new(cctx);
    sb = qbio_new(&sq);
    cb = qbio_new(&cq);
    if (server == NULL || client == NULL || sb == NULL || cb == NULL)
        return 1;
    SSL_set_bio(server, sb, sb);
    SSL_set_bio(client, cb, cb);
    SSL_set_options(server, SSL_OP_NO_QUERY_MTU);
    SSL_set_options(client, SSL_OP_NO_QUERY_MTU);
    SSL_set_mtu(server, 256);
    SSL_set_mtu(client, 1400);
    DTLS_set_timer_cb(server, short_timer);
    SSL_set_accept_state(server);
    SSL_set_connect_state(client);

    /* ClientHello, then the server's flight with its third datagram (inside
     * the Certificate: ServerHello is one) refused once. */
    if (!step(client, &cdone))
        goto fail;
    sq.refuse_write_at = sq.writes + 2;
    if (!step(server, &sdone))
        goto fail;
    check_datagrams(&s2c, 0);
    /* The refused write came in the middle of a handshake message when the
     * server's last datagram so far did not end its message. */
    mid_message = sq.refused;
    if (!mid_message) {
        fprintf(stderr, "dtls_retransmit: the server never hit the refused write\n");
        return 2;
    }

    /* The timer expires while the Certificate is half written. */
    sleep_ms(20);
    before_timeout = s2c.tail;
    r = DTLSv1_handle_timeout(server);
    retransmitted = s2c.tail > before_timeout;
    check_datagrams(&s2c, before_timeout);
    (void)r;

    /* Resume: the rest of the handshake, datagrams delivered as written. */
    for (i = 0; i < 200 && !(sdone && cdone); i++) {
        size_t mark = s2c.tail;

        if (!step(server, &sdone) || !step(client, &cdone))
            break;
        check_datagrams(&s2c, mark);
        if (!(sdone && cdone) && i % 20 == 19) {
            /* A lost-looking flight: let the timers run. */
            sleep_ms(5);
            DTLSv1_handle_timeout(client);
            mark = s2c.tail;
            DTLSv1_handle_timeout(server);
            check_datagrams(&s2c, mark);
        }
    }
    if (sdone && cdone && SSL_write(client, "ping", 4) == 4) {
        for (i = 0; i < 10 && !data_ok; i++) {
            r = SSL_read(server, buf, sizeof(buf));
            data_ok = r == 4 && memcmp(buf, "ping", 4) == 0;
        }
    }

    ti_maps_libssl("/proc/self/maps", lib, sizeof(lib), "?");
    printf("{\"libssl\": \"%s\", \"fragments\": %d, \"retransmitted_mid_write\": %s, \"inconsistent\": %d, "
           "\"handshake\": \"%s\", \"data\": %s}\n",
           lib, fragments, retransmitted ? "true" : "false", inconsistent,
           sdone && cdone ? "ok" : "failed", data_ok ? "true" : "false");
    if (inconsistent == 0 && sdone && cdone && data_ok)
        return 0;
    ERR_print_errors_fp(stderr);
    return 1;
fail:
    ERR_print_errors_fp(stderr);
    ti_maps_libssl("/proc/self/maps", lib, sizeof(lib), "?");
    printf("{\"libssl\": \"%s\", \"fragments\": %d, \"handshake\": \"failed early\"}\n", lib, fragments);
    return 1;
}
