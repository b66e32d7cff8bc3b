/*
 * utls-unordered: out-of-order record delivery in one page.
 *
 * A TLS 1.3 client sends 24 records of 1000 bytes. Its bytes cross a toy
 * network that cuts them into 1448-byte TCP segments and loses every fifth
 * one; each lost segment is retransmitted after the next four. The server
 * reads with SSL_MODE_UNORDERED through a segment BIO and prints every record
 * as it is delivered: the records behind a lost segment arrive at once, not a
 * "round trip" later. The program exits 1 unless every record arrived exactly
 * once and intact, and some out of order.
 *
 *   cc unordered.c $(pkg-config --cflags --libs utls) -o utls-unordered
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>
#include <openssl/x509.h>

#define NUM_RECORDS 24
#define RECORD_LEN 1000
#define MSS 1448
#define LOSE_EVERY 5   /* segment 1, 6, 11, ... are lost ... */
#define RETRANSMIT 4   /* ... and arrive again after 4 more segments */

static int die(const char *what)
{
    fprintf(stderr, "utls-unordered: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(2);
}

/* A throwaway self-signed P-256 certificate for the server. */
static void make_cert(SSL_CTX *ctx)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();

    if (key == NULL || x == NULL
        || !ASN1_INTEGER_set(X509_get_serialNumber(x), 1)
        || X509_gmtime_adj(X509_getm_notBefore(x), 0) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(x), 3600) == NULL
        || !X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                       (const unsigned char *)"localhost", -1, -1, 0)
        || !X509_set_issuer_name(x, X509_get_subject_name(x))
        || !X509_set_pubkey(x, key) || !X509_sign(x, key, EVP_sha256())
        || !SSL_CTX_use_certificate(ctx, x) || !SSL_CTX_use_PrivateKey(ctx, key))
        die("cannot make a certificate");
    X509_free(x);
    EVP_PKEY_free(key);
}

/* Moves what each side wrote to the other, in order, until both are done. */
static void handshake(SSL *client, BIO *client_in, BIO *client_out, SSL *server, BIO *seg,
                      uint64_t *server_off)
{
    unsigned char buf[16384];
    int i, n;
    size_t k;

    for (i = 0; i < 10 && !(SSL_is_init_finished(client) && SSL_is_init_finished(server)); i++) {
        SSL_do_handshake(client);
        SSL_do_handshake(server);
        while ((n = BIO_read(client_out, buf, sizeof(buf))) > 0) {
            UTLS_BIO_segment_push(seg, *server_off, buf, (size_t)n);
            *server_off += (uint64_t)n;
        }
        while ((k = UTLS_BIO_segment_take_output(seg, buf, sizeof(buf))) > 0)
            BIO_write(client_in, buf, (int)k);
    }
    if (!SSL_is_init_finished(client) || !SSL_is_init_finished(server))
        die("handshake failed");
}

static int seen[NUM_RECORDS];
static int num_seen, num_early, num_bad;

/* Reads every record the server can deliver now. */
static void read_all(SSL *server, int segment)
{
    unsigned char buf[SSL3_RT_MAX_PLAIN_LENGTH];
    UTLS_RECORD_INFO info;
    size_t len;
    int idx;

    while (UTLS_read_record(server, buf, sizeof(buf), &len, &info)) {
        if (len != RECORD_LEN || sscanf((const char *)buf, "record %d", &idx) != 1
            || idx < 0 || idx >= NUM_RECORDS || seen[idx]
            || buf[RECORD_LEN - 1] != (unsigned char)('a' + idx % 26)) {
            num_bad++;
            continue;
        }
        seen[idx] = 1;
        num_seen++;
        num_early += info.out_of_order;
        printf("after segment %2d: record %2d (seq %2llu, stream offset %6llu) %s\n", segment,
               idx, (unsigned long long)info.seq, (unsigned long long)info.stream_offset,
               info.out_of_order ? "OUT OF ORDER: a segment before it is still missing"
                                 : "in order");
    }
    if (SSL_get_error(server, 0) != SSL_ERROR_WANT_READ)
        die("read failed");
}

int main(void)
{
    static unsigned char wire[NUM_RECORDS * 2 * RECORD_LEN];
    unsigned char rec[RECORD_LEN];
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
    BIO *client_in = BIO_new(BIO_s_mem()), *client_out = BIO_new(BIO_s_mem());
    BIO *seg = BIO_new(UTLS_BIO_s_segment());
    SSL *client, *server;
    UTLS_STATS st;
    uint64_t base = 0;
    size_t wire_len = 0, off;
    int i, n, segment = 0;
    struct { size_t off, len; int due; } lost[NUM_RECORDS];
    int num_lost = 0, next_lost = 0;

    if (cctx == NULL || sctx == NULL || client_in == NULL || client_out == NULL || seg == NULL)
        die("out of memory");
    printf("%s\n", UTLS_version(UTLS_FULL_VERSION));
    make_cert(sctx);
    SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
    client = SSL_new(cctx);
    server = SSL_new(sctx);
    SSL_set_bio(client, client_in, client_out);
    SSL_set_bio(server, seg, seg);
    /* The one line that matters: deliver each record as soon as it is whole. */
    SSL_set_mode(server, SSL_MODE_UNORDERED);
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);
    handshake(client, client_in, client_out, server, seg, &base);

    for (i = 0; i < NUM_RECORDS; i++) {
        memset(rec, 'a' + i % 26, sizeof(rec));
        snprintf((char *)rec, 16, "record %d", i);
        if (SSL_write(client, rec, sizeof(rec)) != (int)sizeof(rec))
            die("write failed");
    }
    while ((n = BIO_read(client_out, wire + wire_len, (int)(sizeof(wire) - wire_len))) > 0)
        wire_len += (size_t)n;

    /* The network: segments in order, some lost and retransmitted later. */
    for (off = 0; off < wire_len || next_lost < num_lost; segment++) {
        if (next_lost < num_lost && lost[next_lost].due <= segment) {
            printf("-- retransmission of the segment at offset %zu arrives\n", lost[next_lost].off);
            UTLS_BIO_segment_push(seg, base + lost[next_lost].off, wire + lost[next_lost].off,
                                  lost[next_lost].len);
            next_lost++;
        } else if (off < wire_len) {
            size_t len = wire_len - off < MSS ? wire_len - off : MSS;

            if (segment % LOSE_EVERY == 1) {
                printf("-- segment at offset %zu is lost\n", off);
                lost[num_lost].off = off;
                lost[num_lost].len = len;
                lost[num_lost++].due = segment + RETRANSMIT;
            } else {
                UTLS_BIO_segment_push(seg, base + off, wire + off, len);
            }
            off += len;
        }
        read_all(server, segment);
    }

    UTLS_get_stats(server, &st);
    printf("\n%d of %d records delivered, %d out of order, %d bad; %llu trial decryptions\n",
           num_seen, NUM_RECORDS, num_early, num_bad, (unsigned long long)st.probes);
    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    return num_seen == NUM_RECORDS && num_bad == 0 && num_early > 0 ? 0 : 1;
}
