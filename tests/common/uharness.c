/* uharness.c: see uharness.h. */
#define _GNU_SOURCE
#include "uharness.h"
#include "test_identity.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/rsa.h>
#include <openssl/utls.h>
#include <openssl/x509v3.h>

static const uint8_t magic[4] = {'u', 'T', 'L', 'S'};

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t fnv1a(const uint8_t *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}

static uint8_t body_byte(uint32_t index, size_t pos)
{
    uint64_t x = ((uint64_t)index << 32) ^ pos ^ 0x5bd1e995ULL;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint8_t)x;
}

int uh_msg_build(uint8_t *out, uint32_t index, size_t len)
{
    if (len < UH_MSG_MIN || len > UH_MSG_MAX) {
        return 0;
    }
    memcpy(out, magic, 4);
    put_u32(out + 4, index);
    put_u32(out + 8, (uint32_t)len);
    for (size_t i = 12; i < len - 8; i++) {
        out[i] = body_byte(index, i);
    }
    uint64_t h = fnv1a(out, len - 8);
    put_u32(out + len - 8, (uint32_t)(h >> 32));
    put_u32(out + len - 4, (uint32_t)h);
    return 1;
}

size_t uh_msg_peek_len(const uint8_t *msg, size_t len)
{
    if (len < 12 || memcmp(msg, magic, 4) != 0) {
        return 0;
    }
    return get_u32(msg + 8);
}

int uh_msg_check(const uint8_t *msg, size_t len, uint32_t *out_index)
{
    if (len < UH_MSG_MIN || len > UH_MSG_MAX || memcmp(msg, magic, 4) != 0
        || get_u32(msg + 8) != len) {
        return 0;
    }
    uint32_t index = get_u32(msg + 4);
    for (size_t i = 12; i < len - 8; i++) {
        if (msg[i] != body_byte(index, i)) {
            return 0;
        }
    }
    uint64_t h = fnv1a(msg, len - 8);
    if (get_u32(msg + len - 8) != (uint32_t)(h >> 32) || get_u32(msg + len - 4) != (uint32_t)h) {
        return 0;
    }
    *out_index = index;
    return 1;
}

int uh_seg_pair_new(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, uint64_t server_mode)
{
    return uh_seg_pair_new_tls12(p, key, cert, server_mode, NULL);
}

int uh_seg_pair_new_tls12(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, uint64_t server_mode,
                          const char *tls12_cipher)
{
    uh_pair_opts o;

    memset(&o, 0, sizeof(o));
    o.server_mode = server_mode;
    o.tls12_cipher = tls12_cipher;
    return uh_seg_pair_new_opts(p, key, cert, &o);
}

int uh_pair_contexts(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, const uh_pair_opts *o)
{
    memset(p, 0, sizeof(*p));
    p->sctx = SSL_CTX_new(TLS_server_method());
    p->cctx = SSL_CTX_new(TLS_client_method());
    if (p->sctx == NULL || p->cctx == NULL || !SSL_CTX_use_certificate(p->sctx, cert)
        || !SSL_CTX_use_PrivateKey(p->sctx, key)) {
        return 0;
    }
    if (o->tls12_cipher == NULL) {
        SSL_CTX_set_min_proto_version(p->cctx, TLS1_3_VERSION);
        SSL_CTX_set_num_tickets(p->sctx, (size_t)o->tls13_tickets);
    } else if (!SSL_CTX_set_max_proto_version(p->cctx, TLS1_2_VERSION)
               || !SSL_CTX_set_cipher_list(p->cctx, o->tls12_cipher)
               || !SSL_CTX_set_cipher_list(p->sctx, o->tls12_cipher)) {
        /* The server too: its default list leaves out some suites (CCM). */
        return 0;
    }
    if (o->tls13_suites != NULL && (!SSL_CTX_set_ciphersuites(p->cctx, o->tls13_suites)
                                    || !SSL_CTX_set_ciphersuites(p->sctx, o->tls13_suites))) {
        return 0;
    }
    if (o->no_etm) {
        SSL_CTX_set_options(p->cctx, SSL_OP_NO_ENCRYPT_THEN_MAC);
    }
    p->c = SSL_new(p->cctx);
    p->s = SSL_new(p->sctx);
    p->c_in = BIO_new(BIO_s_mem());
    p->c_out = BIO_new(BIO_s_mem());
    return 1;
}

int uh_seg_pair_new_opts(uh_seg_pair *p, EVP_PKEY *key, X509 *cert, const uh_pair_opts *o)
{
    uint8_t buf[65536];
    int n;
    BIO *sbio;

    if (!uh_pair_contexts(p, key, cert, o)) {
        return 0;
    }
    if (o->utcp) {
        p->utcp = BIO_new(UTLS_BIO_f_utcp());
        p->units = BIO_new(uh_BIO_s_units());
        if (p->utcp != NULL && p->units != NULL) {
            BIO_push(p->utcp, p->units);
        }
        sbio = p->utcp;
    } else {
        p->seg = BIO_new(UTLS_BIO_s_segment());
        sbio = p->seg;
    }
    if (p->c == NULL || p->s == NULL || p->c_in == NULL || p->c_out == NULL || sbio == NULL
        || (o->utcp && p->units == NULL)) {
        BIO_free(p->c_in);
        BIO_free(p->c_out);
        BIO_free_all(sbio);
        if (o->utcp && p->utcp == NULL) {
            BIO_free(p->units);
        }
        p->c_in = p->c_out = p->seg = p->utcp = p->units = NULL;
        return 0;
    }
    SSL_set_bio(p->c, p->c_in, p->c_out);
    SSL_set_bio(p->s, sbio, sbio);
    if (o->server_mode != 0) {
        SSL_set_mode(p->s, (long)o->server_mode);
    }
    if (o->client_mode != 0) {
        SSL_set_mode(p->c, (long)o->client_mode);
    }
    SSL_set_connect_state(p->c);
    SSL_set_accept_state(p->s);
    /* Ten rounds are more than a TLS 1.3 or 1.2 handshake needs (two
     * flights each way); a handshake still unfinished after them has failed. */
    for (int i = 0; i < 10; i++) {
        size_t k;

        SSL_do_handshake(p->c);
        SSL_do_handshake(p->s);
        while ((n = BIO_read(p->c_out, buf, sizeof(buf))) > 0) {
            if (!uh_pair_push(p, p->base, buf, (size_t)n)) {
                return 0;
            }
            p->base += (uint64_t)n;
        }
        while ((k = uh_pair_take_output(p, buf, sizeof(buf))) > 0) {
            BIO_write(p->c_in, buf, (int)k);
        }
        if (SSL_is_init_finished(p->s) && SSL_is_init_finished(p->c)) {
            break;
        }
    }
    return SSL_is_init_finished(p->s);
}

/* A uTCP unit's data: at most 64 KiB, as UTLS_BIO_f_utcp() reads them. */
#define UH_UTCP_UNIT_DATA 65536

static int utcp_unit(uh_seg_pair *p, uint8_t flags, uint64_t offset, const void *data,
                     size_t len)
{
    static uint8_t unit[5 + UH_UTCP_UNIT_DATA];

    unit[0] = flags;
    put_u32(unit + 1, (uint32_t)offset);
    if (len > 0) {
        memcpy(unit + 5, data, len);
    }
    return uh_units_push(p->units, unit, 5 + len);
}

int uh_pair_push(uh_seg_pair *p, uint64_t offset, const void *data, size_t len)
{
    if (p->seg != NULL) {
        return UTLS_BIO_segment_push(p->seg, offset, data, len);
    }
    if (p->units == NULL) {
        return 0;
    }
    for (size_t off = 0; off < len || (len == 0 && off == 0);) {
        size_t n = len - off < UH_UTCP_UNIT_DATA ? len - off : UH_UTCP_UNIT_DATA;
        if (!utcp_unit(p, 0, offset + off, (const uint8_t *)data + off, n)) {
            return 0;
        }
        off += n;
        if (len == 0) {
            break;
        }
    }
    return 1;
}

int uh_pair_push_eof(uh_seg_pair *p, uint64_t offset)
{
    if (p->seg != NULL) {
        return UTLS_BIO_segment_push_eof(p->seg, offset);
    }
    return p->units != NULL && utcp_unit(p, UTLS_UTCP_FLAG_EOF, offset, NULL, 0);
}

int uh_pair_write_record(uh_seg_pair *p, const void *plain, size_t len, uint8_t **out_wire,
                         size_t *out_wire_len, uint64_t *out_off)
{
    int n;

    *out_wire = NULL;
    if (len > INT_MAX || SSL_write(p->c, plain, (int)len) != (int)len) {
        return 0;
    }
    n = (int)BIO_pending(p->c_out);
    if (n <= 0 || (*out_wire = malloc((size_t)n)) == NULL) {
        return 0;
    }
    if (BIO_read(p->c_out, *out_wire, n) != n) {
        free(*out_wire);
        *out_wire = NULL;
        return 0;
    }
    *out_wire_len = (size_t)n;
    *out_off = p->base;
    p->base += (uint64_t)n;
    return 1;
}

int uh_read_wants_read(SSL *s)
{
    uint8_t buf[64];
    size_t n;

    return !SSL_read_ex(s, buf, sizeof(buf), &n) && SSL_get_error(s, 0) == SSL_ERROR_WANT_READ;
}

int uh_read_record(SSL *s, const char *what, long r, void *buf, size_t len, size_t *out_len,
                   UTLS_RECORD_INFO *out_info)
{
    int err;

    ERR_clear_error();
    if (UTLS_read_record(s, buf, len, out_len, out_info)) {
        return 1;
    }
    /* Before the queue is printed and emptied: SSL_get_error reads it. */
    err = SSL_get_error(s, 0);
    uh_errors_to_stderr(what);
    fprintf(stderr, "%s: record %ld: read failed (SSL_get_error %d)\n", what, r, err);
    return 0;
}

size_t uh_pair_take_output(uh_seg_pair *p, uint8_t *buf, size_t len)
{
    if (p->seg != NULL) {
        return UTLS_BIO_segment_take_output(p->seg, buf, len);
    }
    return p->units != NULL ? uh_units_take_output(p->units, buf, len) : 0;
}

/* --- The unit queue BIO -------------------------------------------------- */

typedef struct uh_unit_st {
    struct uh_unit_st *next;
    size_t len;
    uint8_t data[];
} uh_unit;

typedef struct {
    uh_unit *head, *tail;
    BIO *out; /* what the SSL wrote */
} uh_units;

static int units_new(BIO *b)
{
    uh_units *u = calloc(1, sizeof(*u));
    if (u == NULL || (u->out = BIO_new(BIO_s_mem())) == NULL) {
        free(u);
        return 0;
    }
    BIO_set_data(b, u);
    BIO_set_init(b, 1);
    return 1;
}

static int units_free(BIO *b)
{
    uh_units *u = BIO_get_data(b);
    if (u == NULL) {
        return 1;
    }
    while (u->head != NULL) {
        uh_unit *n = u->head->next;
        free(u->head);
        u->head = n;
    }
    BIO_free(u->out);
    free(u);
    BIO_set_data(b, NULL);
    return 1;
}

static int units_read(BIO *b, char *out, int outl)
{
    uh_units *u = BIO_get_data(b);
    uh_unit *h = u->head;

    BIO_clear_retry_flags(b);
    if (h == NULL) {
        BIO_set_retry_read(b);
        return -1;
    }
    size_t n = h->len < (size_t)outl ? h->len : (size_t)outl;
    memcpy(out, h->data, n);
    u->head = h->next;
    if (u->head == NULL) {
        u->tail = NULL;
    }
    free(h);
    return (int)n;
}

static int units_write(BIO *b, const char *in, int inl)
{
    uh_units *u = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    return BIO_write(u->out, in, inl);
}

static long units_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    uh_units *u = BIO_get_data(b);
    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_PENDING:
        return u->head != NULL ? (long)u->head->len : 0;
    default:
        return 0;
    }
}

const BIO_METHOD *uh_BIO_s_units(void)
{
    static BIO_METHOD *m;
    if (m == NULL) {
        m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "uharness units");
        if (m == NULL || !BIO_meth_set_create(m, units_new) || !BIO_meth_set_destroy(m, units_free)
            || !BIO_meth_set_read(m, units_read) || !BIO_meth_set_write(m, units_write)
            || !BIO_meth_set_ctrl(m, units_ctrl)) {
            BIO_meth_free(m);
            m = NULL;
        }
    }
    return m;
}

int uh_units_push(BIO *b, const void *data, size_t len)
{
    uh_units *u = BIO_get_data(b);
    uh_unit *h = malloc(sizeof(*h) + len);
    if (u == NULL || h == NULL) {
        free(h);
        return 0;
    }
    h->next = NULL;
    h->len = len;
    memcpy(h->data, data, len);
    if (u->tail != NULL) {
        u->tail->next = h;
    } else {
        u->head = h;
    }
    u->tail = h;
    return 1;
}

size_t uh_units_take_output(BIO *b, void *buf, size_t len)
{
    uh_units *u = BIO_get_data(b);
    int n = len > INT_MAX ? INT_MAX : (int)len;
    n = BIO_read(u->out, buf, n);
    return n > 0 ? (size_t)n : 0;
}

void uh_seg_pair_free(uh_seg_pair *p)
{
    SSL_free(p->c);
    SSL_free(p->s);
    SSL_CTX_free(p->cctx);
    SSL_CTX_free(p->sctx);
    memset(p, 0, sizeof(*p));
}

int uh_make_identity(int ec, EVP_PKEY **out_key, X509 **out_cert)
{
    return ti_make_identity(ec, "localhost", out_key, out_cert);
}

EVP_PKEY *uh_key;
X509 *uh_cert;

int uh_identity_setup(void **state)
{
    (void)state;
    return uh_make_identity(1, &uh_key, &uh_cert) ? 0 : -1;
}

int uh_identity_teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(uh_key);
    X509_free(uh_cert);
    uh_key = NULL;
    uh_cert = NULL;
    return 0;
}

void uh_errors_to_stderr(const char *what)
{
    unsigned long e;
    const char *file, *data;
    int line, flags;
    while ((e = ERR_get_error_all(&file, &line, NULL, &data, &flags)) != 0) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof(buf));
        fprintf(stderr, "  [%s] %s (%s:%d)%s%s\n", what, buf, file, line,
                (flags & ERR_TXT_STRING) ? " " : "", (flags & ERR_TXT_STRING) ? data : "");
    }
}

uint64_t uh_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}


const char *uh_libssl_path(void)
{
    static char buf[4096];
    return ti_maps_libssl("/proc/self/maps", buf, sizeof(buf), "");
}

const char *uh_pid_maps_libssl(int pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    return ti_maps_libssl(path, buf, len, "");
}

int uh_utls_error_queued(int reason)
{
    unsigned long e;
    int found = 0;

    while ((e = ERR_get_error()) != 0)
        if (ERR_GET_LIB(e) == UTLS_get_lib() && ERR_GET_REASON(e) == reason)
            found = 1;
    return found;
}
