/*
 * bench_cpu.c: receiver CPU of the uTLS fork against stock libssl (issue 4,
 * DESIGN.md section 9), printed as JSON.
 *
 * One program, linked against libssl.so.3 like any OpenSSL 3 program and
 * without an rpath. The driver (the default mode) runs every measurement as a
 * child process of this same binary, with LD_LIBRARY_PATH pointing at the
 * fork or with the system library, so that the fork and stock libssl are
 * measured side by side in one run. A child finds the uTLS API with dlsym(),
 * so the binary runs on stock libssl too, and checks which library it got.
 *
 * One measurement (a child):
 *   1. A sender (client) and a receiver (server) in the same process and the
 *      same libssl complete a handshake in memory (TLS 1.3
 *      TLS_AES_128_GCM_SHA256 for the headline numbers).
 *   2. The sender writes the whole transfer as records of 1448 wire bytes
 *      (payload 1448 - 5 - 1 - 16 = 1426 for TLS 1.3 AEAD) into memory. The
 *      payload size is found by writing calibration records, which the
 *      receiver reads before the clock starts.
 *   3. A seeded segment schedule, the same for every variant: MSS 1448, each
 *      transmission lost with probability p (0 or 0.02, i.i.d.), a lost
 *      transmission sent again RTX_DELAY (40) segment slots later (about one
 *      round trip of a flow with 40 segments in flight) and lost again with
 *      the same p. Retransmissions go before new data, as TCP sends them.
 *      Segments are cut from the first data byte, so with 1448-byte records
 *      a segment is a record (a loss costs one record); the CBC suites'
 *      1445-byte records drift across segment boundaries.
 *   4. Timed, with CLOCK_PROCESS_CPUTIME_ID (user + sys): the receiver only.
 *        stock, fork_off: the bench plays TCP: out-of-order segments wait in
 *          a ring, bytes go into the receiver's memory BIO once in order, and
 *          the receiver reads records with SSL_read_ex() whenever new
 *          in-order bytes arrived (as an application woken by the socket).
 *        fork_on: the receiver's BIO is the segment BIO with
 *          SSL_MODE_UNORDERED; every segment (retransmissions included) is
 *          pushed with UTLS_BIO_segment_push() and followed by
 *          UTLS_read_record() until SSL_ERROR_WANT_READ.
 *        fork_on_nometa: the same, with out_info NULL (no per-record
 *          metadata: what the metadata costs, mostly the in-order arrival
 *          time's clock read, is fork_on minus this).
 *      Every record's plaintext is checked in the timed loop by its index
 *      (exactly once) and a 4-lane 64-bit digest, the same work in every
 *      variant; the digest's own cost is reported as checksum_cpu_s.
 *
 * The driver copies the fork's libssl.so.3 to a private directory first (a
 * relink of the build tree cannot change it mid-run), runs one warm-up round
 * whose results are dropped, then interleaves variants (stock, fork_off,
 * fork_on, the starting one rotated every repetition) and reports median and
 * minimum per variant and loss, ratios of medians, and for every cipher of
 * issue 4 the probes per out-of-order record of the fork with the mode on at
 * 2% loss (5 MB each; the library's counters include the calibration
 * records, reported as calibration_records).
 *
 * To profile the receiver alone see perf_control() (BENCH_CPU_PERF_CTL), or
 * valgrind --tool=callgrind --toggle-collect='receive_via_*' on one child:
 *   LD_LIBRARY_PATH=build/lib bench_cpu --child fork_on --loss 0.02 --bytes 5000000
 *
 * Usage: bench_cpu --fork-lib-dir DIR [--out FILE] [--quick] [--reps N]
 *                  [--bytes N] [--cipher-bytes N] [--seed N]
 *                  [--stock-lib-path PATH] [--crypto-lib-dir DIR]
 * The last two serve the 3.5 base (make BASE=3.5): stock runs with
 * LD_LIBRARY_PATH=PATH (stock 3.5 libssl and 3.5's libcrypto) instead of the
 * system library, the fork with DIR (3.5's libcrypto) after its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* Types and constants only: every UTLS_* function is found with dlsym(). */
#include <openssl/utls.h>

extern char **environ;

/* The record and segment size of the issue: one full Ethernet TCP segment. */
#define RECORD_WIRE_BYTES 1448
#define MSS 1448

/* Defaults of a full run. */
#define DEFAULT_TRANSFER_BYTES (30u * 1000u * 1000u)
#define DEFAULT_CIPHER_BYTES (5u * 1000u * 1000u)
#define DEFAULT_REPS 15
#define DEFAULT_SEED 0x75544c53u /* "uTLS" */
#define RTX_DELAY 40             /* segment slots until a loss is repaired */
#define LOSS_RATE 0.02

/* --quick (the ctest smoke run): a few MB, one repetition. */
#define QUICK_TRANSFER_BYTES (3u * 1000u * 1000u)
#define QUICK_CIPHER_BYTES (1u * 1000u * 1000u)

/* Out-of-order segments the bench's own TCP holds; a hole wider than this
 * (RTX_DELAY times 50 consecutive losses) fails the run rather than wrap. */
#define TCP_RING_SEGMENTS 2048

/* Calibration records written until one fits RECORD_WIRE_BYTES. */
#define MAX_CALIBRATION_RECORDS 64

#define READ_BUF_LEN SSL3_RT_MAX_PLAIN_LENGTH

/* fork_on_nometa: fork_on reading with UTLS_read_record(..., NULL): no
 * per-record metadata, so the cost of the metadata (the in-order arrival
 * time's clock read) shows as the difference to fork_on. */
enum variant {
    VARIANT_STOCK,
    VARIANT_FORK_OFF,
    VARIANT_FORK_ON,
    VARIANT_FORK_ON_NOMETA,
    NUM_VARIANTS
};
static const char *const variant_names[NUM_VARIANTS] = {"stock", "fork_off", "fork_on",
                                                        "fork_on_nometa"};

/* variant_unordered: the variant reads through the segment BIO with
 * SSL_MODE_UNORDERED. */
static int variant_unordered(enum variant v)
{
    return v == VARIANT_FORK_ON || v == VARIANT_FORK_ON_NOMETA;
}

struct cipher_case {
    const char *key;   /* JSON key */
    int version;       /* TLS1_2_VERSION or TLS1_3_VERSION */
    const char *suite; /* IANA name (1.3) or OpenSSL cipher string (1.2) */
    int no_etm;        /* SSL_OP_NO_ENCRYPT_THEN_MAC: MAC-then-encrypt CBC */
};

static const struct cipher_case cipher_cases[] = {
    {"tls13_aes128gcm", TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", 0},
    {"tls13_aes256gcm", TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", 0},
    {"tls13_chacha20poly1305", TLS1_3_VERSION, "TLS_CHACHA20_POLY1305_SHA256", 0},
    {"tls13_aes128ccm", TLS1_3_VERSION, "TLS_AES_128_CCM_SHA256", 0},
    {"tls12_ecdhe_ecdsa_aes128gcm", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256", 0},
    {"tls12_ecdhe_ecdsa_chacha20poly1305", TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305", 0},
    {"tls12_ecdhe_ecdsa_aes128sha256_etm", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-SHA256", 0},
    {"tls12_ecdhe_ecdsa_aes128sha256_mte", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-SHA256", 1},
};
#define NUM_CIPHER_CASES (sizeof(cipher_cases) / sizeof(cipher_cases[0]))
#define HEADLINE_CIPHER 0

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) * 0x1.0p-53;
}

/* record_digest hashes one record's plaintext: a Fletcher-style sum over
 * 64-bit words in four independent lanes (position-sensitive, and cheap next
 * to the decryption it checks), then mixed. Not a cryptographic hash; it only
 * has to catch a broken run. */
static uint64_t record_digest(const unsigned char *p, size_t len)
{
    uint64_t a0 = len, a1 = 1, a2 = 2, a3 = 3, b0 = 0, b1 = 0, b2 = 0, b3 = 0, w[4], h;
    size_t i = 0;

    for (; i + 32 <= len; i += 32) {
        memcpy(w, p + i, sizeof(w));
        a0 += w[0];
        a1 += w[1];
        a2 += w[2];
        a3 += w[3];
        b0 += a0;
        b1 += a1;
        b2 += a2;
        b3 += a3;
    }
    for (; i < len; i++) {
        a0 += p[i];
        b0 += a0;
    }
    h = (a0 ^ (b0 << 1)) * 0x9e3779b97f4a7c15ULL;
    h = (h ^ a1 ^ (b1 << 1)) * 0xff51afd7ed558ccdULL;
    h = (h ^ a2 ^ (b2 << 1)) * 0x9e3779b97f4a7c15ULL;
    h = (h ^ a3 ^ (b3 << 1)) * 0xff51afd7ed558ccdULL;
    return h ^ (h >> 29);
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(const char *what)
{
    fprintf(stderr, "bench_cpu: %s\n", what);
    ERR_print_errors_fp(stderr);
}

/*
 * perf_control enables (|on|) or disables perf sampling around the timed loop
 * when BENCH_CPU_PERF_CTL names perf's control and ack FIFOs, so that
 *   mkfifo ctl ack; BENCH_CPU_PERF_CTL=ctl,ack \
 *   perf record -D -1 --control fifo:ctl,ack -g bench_cpu --child fork_on ...
 * profiles the receiver alone. Without the variable it does nothing.
 */
static void perf_control(int on)
{
    static FILE *ctl, *ack;
    const char *spec = getenv("BENCH_CPU_PERF_CTL");
    char path[PATH_MAX], reply[16];
    const char *comma;

    if (spec == NULL || (comma = strchr(spec, ',')) == NULL
        || (size_t)(comma - spec) >= sizeof(path)) {
        return;
    }
    if (ctl == NULL) {
        memcpy(path, spec, (size_t)(comma - spec));
        path[comma - spec] = '\0';
        ctl = fopen(path, "w");
        ack = fopen(comma + 1, "r");
        if (ctl == NULL || ack == NULL) {
            return;
        }
    }
    fputs(on ? "enable\n" : "disable\n", ctl);
    fflush(ctl);
    if (fgets(reply, sizeof(reply), ack) == NULL) {
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* The uTLS API, found at run time                                          */

struct utls_api {
    const char *(*version)(int which);
    int (*read_record)(SSL *s, void *buf, size_t len, size_t *out_read, UTLS_RECORD_INFO *info);
    int (*get_stats)(const SSL *s, UTLS_STATS *out_stats);
    const BIO_METHOD *(*bio_s_segment)(void);
    int (*segment_push)(BIO *b, uint64_t offset, const void *data, size_t len);
    size_t (*segment_take_output)(BIO *b, void *buf, size_t len);
};

/* utls_api_load fills |api| from the libssl this process loaded. Returns 1 if
 * it is the fork (every function found), 0 for stock libssl (UTLS_version
 * absent), -1 for a library with only part of the API. */
static int utls_api_load(struct utls_api *api)
{
    memset(api, 0, sizeof(*api));
    *(void **)&api->version = dlsym(RTLD_DEFAULT, "UTLS_version");
    if (api->version == NULL) {
        return 0;
    }
    *(void **)&api->read_record = dlsym(RTLD_DEFAULT, "UTLS_read_record");
    *(void **)&api->get_stats = dlsym(RTLD_DEFAULT, "UTLS_get_stats");
    *(void **)&api->bio_s_segment = dlsym(RTLD_DEFAULT, "UTLS_BIO_s_segment");
    *(void **)&api->segment_push = dlsym(RTLD_DEFAULT, "UTLS_BIO_segment_push");
    *(void **)&api->segment_take_output = dlsym(RTLD_DEFAULT, "UTLS_BIO_segment_take_output");
    if (api->read_record == NULL || api->get_stats == NULL || api->bio_s_segment == NULL
        || api->segment_push == NULL || api->segment_take_output == NULL) {
        return -1;
    }
    return 1;
}

/* loaded_libssl_path returns the file SSL_read_ex() came from. */
static const char *loaded_libssl_path(void)
{
    static char path[PATH_MAX];
    Dl_info info;

    if (dladdr((void *)SSL_read_ex, &info) == 0 || info.dli_fname == NULL) {
        return "unknown";
    }
    if (realpath(info.dli_fname, path) == NULL) {
        return info.dli_fname;
    }
    return path;
}

/* ------------------------------------------------------------------------ */
/* The connection: sender and receiver in memory                            */

struct link {
    SSL_CTX *sender_ctx, *receiver_ctx;
    SSL *sender, *receiver;
    BIO *sender_in, *sender_out;     /* owned by |sender| */
    BIO *receiver_in, *receiver_out; /* memory BIOs, or both the segment BIO */
    int segmented;
    uint64_t stream_len; /* bytes of the sender's stream the receiver got */
    const struct utls_api *api;
};

/* make_ecdsa_identity gives |ctx| a fresh P-256 key and a self-signed
 * certificate (ECDSA, so that the TLS 1.2 ECDHE-ECDSA suites work). */
static int make_ecdsa_identity(SSL_CTX *ctx)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    X509_NAME *name;
    int ok = 0;

    if (key == NULL || cert == NULL) {
        goto cleanup;
    }
    name = X509_get_subject_name(cert);
    if (!X509_set_version(cert, 2) || !ASN1_INTEGER_set(X509_get_serialNumber(cert), 1)
        || X509_gmtime_adj(X509_getm_notBefore(cert), -3600) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(cert), 86400) == NULL
        || !X509_set_pubkey(cert, key)
        || !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                       (const unsigned char *)"bench.utls", -1, -1, 0)
        || !X509_set_issuer_name(cert, name) || !X509_sign(cert, key, EVP_sha256())
        || !SSL_CTX_use_certificate(ctx, cert) || !SSL_CTX_use_PrivateKey(ctx, key)) {
        goto cleanup;
    }
    ok = 1;
cleanup:
    X509_free(cert);
    EVP_PKEY_free(key);
    return ok;
}

static int configure_ctx(SSL_CTX *ctx, const struct cipher_case *cc)
{
    if (!SSL_CTX_set_min_proto_version(ctx, cc->version)
        || !SSL_CTX_set_max_proto_version(ctx, cc->version)) {
        return 0;
    }
    if (cc->version == TLS1_3_VERSION) {
        if (!SSL_CTX_set_ciphersuites(ctx, cc->suite)) {
            return 0;
        }
    } else if (!SSL_CTX_set_cipher_list(ctx, cc->suite)) {
        return 0;
    }
    if (cc->no_etm) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_ENCRYPT_THEN_MAC);
    }
    return 1;
}

/* link_give_receiver hands |len| bytes of the sender's stream to the
 * receiver, in order (handshake and calibration, before timing). */
static int link_give_receiver(struct link *l, const unsigned char *data, size_t len)
{
    if (l->segmented) {
        if (!l->api->segment_push(l->receiver_in, l->stream_len, data, len)) {
            return 0;
        }
    } else if (BIO_write(l->receiver_in, data, (int)len) != (int)len) {
        return 0;
    }
    l->stream_len += len;
    return 1;
}

/* link_pump moves everything written by either side to the other. */
static int link_pump(struct link *l)
{
    unsigned char buf[16384];
    int n;
    size_t k;

    while ((n = BIO_read(l->sender_out, buf, sizeof(buf))) > 0) {
        if (!link_give_receiver(l, buf, (size_t)n)) {
            return 0;
        }
    }
    if (l->segmented) {
        while ((k = l->api->segment_take_output(l->receiver_out, buf, sizeof(buf))) > 0) {
            if (BIO_write(l->sender_in, buf, (int)k) != (int)k) {
                return 0;
            }
        }
    } else {
        while ((n = BIO_read(l->receiver_out, buf, sizeof(buf))) > 0) {
            if (BIO_write(l->sender_in, buf, n) != n) {
                return 0;
            }
        }
    }
    return 1;
}

static void link_cleanup(struct link *l)
{
    SSL_free(l->sender);
    SSL_free(l->receiver);
    SSL_CTX_free(l->sender_ctx);
    SSL_CTX_free(l->receiver_ctx);
    memset(l, 0, sizeof(*l));
}

static int handshake_step_ok(SSL *s, int ret)
{
    int err = SSL_get_error(s, ret);
    return ret == 1 || err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
}

/* link_init builds and connects sender and receiver for |v|. */
static int link_init(struct link *l, enum variant v, const struct cipher_case *cc,
                     const struct utls_api *api)
{
    memset(l, 0, sizeof(*l));
    l->api = api;
    l->segmented = variant_unordered(v);
    l->sender_ctx = SSL_CTX_new(TLS_client_method());
    l->receiver_ctx = SSL_CTX_new(TLS_server_method());
    if (l->sender_ctx == NULL || l->receiver_ctx == NULL || !configure_ctx(l->sender_ctx, cc)
        || !configure_ctx(l->receiver_ctx, cc) || !make_ecdsa_identity(l->receiver_ctx)) {
        fail("cannot configure the contexts");
        return 0;
    }
    SSL_CTX_set_verify(l->sender_ctx, SSL_VERIFY_NONE, NULL);
    l->sender = SSL_new(l->sender_ctx);
    l->receiver = SSL_new(l->receiver_ctx);
    l->sender_in = BIO_new(BIO_s_mem());
    l->sender_out = BIO_new(BIO_s_mem());
    if (l->sender == NULL || l->receiver == NULL || l->sender_in == NULL
        || l->sender_out == NULL) {
        fail("out of memory");
        return 0;
    }
    SSL_set_bio(l->sender, l->sender_in, l->sender_out);
    if (l->segmented) {
        l->receiver_in = BIO_new(api->bio_s_segment());
        l->receiver_out = l->receiver_in;
        if (l->receiver_in == NULL) {
            fail("cannot create the segment BIO");
            return 0;
        }
        SSL_set_bio(l->receiver, l->receiver_in, l->receiver_in);
        SSL_set_mode(l->receiver, SSL_MODE_UNORDERED);
    } else {
        l->receiver_in = BIO_new(BIO_s_mem());
        l->receiver_out = BIO_new(BIO_s_mem());
        if (l->receiver_in == NULL || l->receiver_out == NULL) {
            fail("out of memory");
            return 0;
        }
        SSL_set_bio(l->receiver, l->receiver_in, l->receiver_out);
    }
    SSL_set_connect_state(l->sender);
    SSL_set_accept_state(l->receiver);
    for (int i = 0; i < 32; i++) {
        int rs = SSL_do_handshake(l->sender);
        int rr = SSL_do_handshake(l->receiver);

        if (!handshake_step_ok(l->sender, rs) || !handshake_step_ok(l->receiver, rr)) {
            fail("handshake failed");
            return 0;
        }
        if (!link_pump(l)) {
            fail("cannot move handshake bytes");
            return 0;
        }
        if (rs == 1 && rr == 1) {
            return 1;
        }
    }
    fail("handshake did not finish");
    return 0;
}

/* sender_write_record writes one record of |len| bytes and appends its wire
 * bytes to |wire| (capacity |cap|). Returns the record's wire length, 0 on
 * failure. */
static size_t sender_write_record(struct link *l, const unsigned char *data, size_t len,
                                  unsigned char *wire, size_t cap)
{
    size_t written, total = 0;
    int n;

    if (!SSL_write_ex(l->sender, data, len, &written) || written != len) {
        fail("sender write failed");
        return 0;
    }
    while ((n = BIO_read(l->sender_out, wire + total, (int)(cap - total))) > 0) {
        total += (size_t)n;
        if (total == cap) {
            break;
        }
    }
    if (BIO_ctrl_pending(l->sender_out) != 0) {
        fail("wire buffer too small");
        return 0;
    }
    return total;
}

/* read_one_in_order reads the single record just handed to the receiver. */
static int read_one_in_order(struct link *l, size_t expect_len)
{
    unsigned char buf[READ_BUF_LEN];
    size_t n;

    if (!SSL_read_ex(l->receiver, buf, sizeof(buf), &n) || n != expect_len) {
        fail("calibration record not read");
        return 0;
    }
    return 1;
}

/* calibrate finds the largest payload whose record fits RECORD_WIRE_BYTES
 * from the overhead of a first record, stepping down while a block cipher's
 * padding overshoots. The receiver reads every calibration record now, so
 * they cost nothing in the timed part. */
static int calibrate(struct link *l, size_t *out_payload, size_t *out_wire,
                     size_t *out_num_records)
{
    unsigned char data[RECORD_WIRE_BYTES], wire[2 * RECORD_WIRE_BYTES];
    size_t payload = 1000, wire_len;

    memset(data, 0x5a, sizeof(data));
    for (int i = 0; i < MAX_CALIBRATION_RECORDS; i++) {
        wire_len = sender_write_record(l, data, payload, wire, sizeof(wire));
        if (wire_len == 0 || !link_give_receiver(l, wire, wire_len)
            || !read_one_in_order(l, payload)) {
            return 0;
        }
        if (i == 0) {
            payload = RECORD_WIRE_BYTES - (wire_len - payload);
        } else if (wire_len <= RECORD_WIRE_BYTES) {
            *out_payload = payload;
            *out_wire = wire_len;
            *out_num_records = (size_t)i + 1;
            return 1;
        } else {
            payload--;
        }
    }
    fail("no payload size fits the record size");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The segment schedule                                                     */

struct schedule {
    uint32_t *order;             /* segment indices in delivery order */
    size_t num_segments;         /* = number of deliveries */
    size_t num_retransmissions;  /* lost transmissions */
    size_t max_hole_segments;    /* widest reordering seen by the receiver */
    size_t past_hole_segments;   /* deliveries that arrive past a hole: with
                                  * 1448-byte records, the records the fork
                                  * can deliver out of order */
};

/*
 * schedule_build lays out |num_segments| segments in time slots: each slot
 * carries a due retransmission if there is one, otherwise the next new
 * segment; a transmission is lost with |loss| and sent again |rtx_delay|
 * slots later. Due slots grow with insertion order, so a FIFO suffices.
 */
static int schedule_build(struct schedule *out, size_t num_segments, double loss,
                          uint64_t seed)
{
    struct pending {
        uint64_t due;
        uint32_t segment;
    } *queue = NULL;
    size_t head = 0, tail = 0, cap = 64, done = 0, next_new = 0;
    uint64_t slot = 0, rng = seed;

    memset(out, 0, sizeof(*out));
    out->order = malloc(num_segments * sizeof(*out->order));
    queue = malloc(cap * sizeof(*queue));
    if (out->order == NULL || queue == NULL || num_segments > UINT32_MAX) {
        free(queue);
        return 0;
    }
    out->num_segments = num_segments;
    while (done < num_segments) {
        uint32_t seg;

        if (head < tail && queue[head].due <= slot) {
            seg = queue[head++].segment;
        } else if (next_new < num_segments) {
            seg = (uint32_t)next_new++;
        } else {
            slot = queue[head].due;
            continue;
        }
        if (loss > 0 && uniform01(&rng) < loss) {
            if (tail == cap) {
                struct pending *grown;

                memmove(queue, queue + head, (tail - head) * sizeof(*queue));
                tail -= head;
                head = 0;
                if (tail == cap) {
                    grown = realloc(queue, 2 * cap * sizeof(*queue));
                    if (grown == NULL) {
                        free(queue);
                        return 0;
                    }
                    queue = grown;
                    cap *= 2;
                }
            }
            queue[tail].due = slot + RTX_DELAY;
            queue[tail++].segment = seg;
            out->num_retransmissions++;
        } else {
            out->order[done++] = seg;
        }
        slot++;
    }
    free(queue);

    /* The widest reordering, for the bench's own TCP ring. */
    size_t in_order = 0;
    unsigned char *seen = calloc(num_segments, 1);
    if (seen == NULL) {
        return 0;
    }
    for (size_t i = 0; i < num_segments; i++) {
        seen[out->order[i]] = 1;
        if (out->order[i] >= in_order && out->order[i] - in_order + 1 > out->max_hole_segments) {
            out->max_hole_segments = out->order[i] - in_order + 1;
        }
        out->past_hole_segments += out->order[i] > in_order;
        while (in_order < num_segments && seen[in_order]) {
            in_order++;
        }
    }
    free(seen);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The timed receiver                                                       */

struct receive_state {
    struct link *link;
    const unsigned char *wire; /* the data records, stream offset 0 = base */
    size_t wire_len;
    uint64_t base;             /* stream offset of wire[0] */
    size_t payload;
    size_t num_records;
    unsigned char *seen;       /* per record index */
    size_t records;
    size_t delivered_out_of_order;
    uint64_t digest_sum;
    unsigned char buf[READ_BUF_LEN];
};

/* account checks one delivered record: its index (first 8 bytes) must be new
 * and in range, its length the payload; its digest adds to the sum. */
static int account(struct receive_state *rs, size_t len)
{
    uint64_t index;

    if (len != rs->payload) {
        fail("record of unexpected length");
        return 0;
    }
    memcpy(&index, rs->buf, sizeof(index));
    if (index >= rs->num_records || rs->seen[index]) {
        fail("record out of range or delivered twice");
        return 0;
    }
    rs->seen[index] = 1;
    rs->records++;
    rs->digest_sum += record_digest(rs->buf, len);
    return 1;
}

/* read_ran_dry returns 1 if the receiver's last read stopped because it had
 * nothing more to deliver (SSL_ERROR_WANT_READ), else fails the run. */
static int read_ran_dry(SSL *s)
{
    if (SSL_get_error(s, 0) != SSL_ERROR_WANT_READ) {
        fail("receiver read failed");
        return 0;
    }
    return 1;
}

static int read_records_in_order(struct receive_state *rs)
{
    SSL *s = rs->link->receiver;
    size_t n;

    while (SSL_read_ex(s, rs->buf, sizeof(rs->buf), &n)) {
        if (!account(rs, n)) {
            return 0;
        }
    }
    return read_ran_dry(s);
}

/* The two receive loops are the timed part; they stay out of line so that a
 * profiler can isolate them (callgrind --toggle-collect='receive_via_*'). */

/* receive_via_memory_bio: stock and fork_off. The bench is TCP: a segment
 * past the in-order point waits in a ring; in-order bytes go to the memory
 * BIO and the application reads whenever that happened. */
static __attribute__((noinline)) int receive_via_memory_bio(struct receive_state *rs,
                                                            const struct schedule *sched,
                                                            unsigned char *ring,
                                                            unsigned char *held)
{
    BIO *in = rs->link->receiver_in;
    size_t next = 0;

    for (size_t i = 0; i < sched->num_segments; i++) {
        size_t seg = sched->order[i];
        size_t off = seg * MSS;
        size_t len = rs->wire_len - off < MSS ? rs->wire_len - off : MSS;

        if (seg != next) {
            if (seg < next || seg - next >= TCP_RING_SEGMENTS) {
                fail("segment outside the bench's receive ring");
                return 0;
            }
            memcpy(ring + (seg % TCP_RING_SEGMENTS) * MSS, rs->wire + off, len);
            held[seg % TCP_RING_SEGMENTS] = 1;
            continue;
        }
        if (BIO_write(in, rs->wire + off, (int)len) != (int)len) {
            return 0;
        }
        for (next++; held[next % TCP_RING_SEGMENTS]; next++) {
            size_t roff = next * MSS;
            size_t rlen = rs->wire_len - roff < MSS ? rs->wire_len - roff : MSS;

            held[next % TCP_RING_SEGMENTS] = 0;
            if (BIO_write(in, ring + (next % TCP_RING_SEGMENTS) * MSS, (int)rlen)
                != (int)rlen) {
                return 0;
            }
        }
        if (!read_records_in_order(rs)) {
            return 0;
        }
    }
    return 1;
}

/* receive_via_segment_bio: fork_on (and fork_on_nometa, |with_info| 0).
 * Every segment as it arrives, then every record that is complete. */
static __attribute__((noinline)) int receive_via_segment_bio(struct receive_state *rs,
                                                             const struct schedule *sched,
                                                             int with_info)
{
    const struct utls_api *api = rs->link->api;
    SSL *s = rs->link->receiver;
    BIO *in = rs->link->receiver_in;
    UTLS_RECORD_INFO info = {0};
    UTLS_RECORD_INFO *want = with_info ? &info : NULL;
    size_t n;

    for (size_t i = 0; i < sched->num_segments; i++) {
        size_t off = (size_t)sched->order[i] * MSS;
        size_t len = rs->wire_len - off < MSS ? rs->wire_len - off : MSS;

        if (!api->segment_push(in, rs->base + off, rs->wire + off, len)) {
            fail("segment push refused");
            return 0;
        }
        while (api->read_record(s, rs->buf, sizeof(rs->buf), &n, want)) {
            rs->delivered_out_of_order += info.out_of_order != 0;
            if (!account(rs, n)) {
                return 0;
            }
        }
        if (!read_ran_dry(s)) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* One measurement (child process)                                          */

struct child_opts {
    enum variant variant;
    const struct cipher_case *cipher;
    double loss;
    size_t bytes;
    uint64_t seed;
};

static int child_main(const struct child_opts *o)
{
    struct utls_api api;
    struct link link;
    struct schedule sched = {0};
    struct receive_state *rs = NULL;
    unsigned char *plain = NULL, *wire = NULL, *ring = NULL, *held = NULL;
    size_t payload, rec_wire, num_records, num_calibration, wire_len = 0;
    uint64_t expect_sum = 0, rng = o->seed ^ 0x706c61696eULL;
    UTLS_STATS stats;
    double t0, t1, digest_s;
    int is_fork, ok = 0;

    memset(&link, 0, sizeof(link));
    memset(&stats, 0, sizeof(stats));
    is_fork = utls_api_load(&api);
    if (is_fork < 0 || is_fork != (o->variant != VARIANT_STOCK)) {
        fprintf(stderr, "bench_cpu: %s run loaded the wrong libssl: %s\n",
                variant_names[o->variant], loaded_libssl_path());
        return 1;
    }
    if (!link_init(&link, o->variant, o->cipher, &api)
        || !calibrate(&link, &payload, &rec_wire, &num_calibration)) {
        goto cleanup;
    }
    if (((SSL_get_mode(link.receiver) & SSL_MODE_UNORDERED) != 0)
        != variant_unordered(o->variant)) {
        fail("SSL_MODE_UNORDERED is not as the variant asks (UTLS_MODE or openssl.cnf?)");
        goto cleanup;
    }

    /* The sender's work, before the clock starts. */
    num_records = (o->bytes + rec_wire - 1) / rec_wire;
    plain = malloc(num_records * payload);
    wire = malloc(num_records * rec_wire);
    if (plain == NULL || wire == NULL) {
        fail("out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < num_records * payload; i += 8) {
        uint64_t v = splitmix64(&rng);
        memcpy(plain + i, &v, num_records * payload - i < 8 ? num_records * payload - i : 8);
    }
    for (size_t i = 0; i < num_records; i++) {
        uint64_t index = i;
        unsigned char *p = plain + i * payload;
        size_t n;

        memcpy(p, &index, sizeof(index));
        expect_sum += record_digest(p, payload);
        n = sender_write_record(&link, p, payload, wire + wire_len,
                                num_records * rec_wire - wire_len);
        if (n != rec_wire) {
            fail("a data record has another wire size than the calibration record");
            goto cleanup;
        }
        wire_len += n;
    }
    /* What the digest alone costs in the receive loop, where it reads a
     * record just decrypted into a hot buffer (reported, not subtracted). */
    t0 = cpu_seconds();
    {
        volatile uint64_t sink = 0;

        for (size_t i = 0; i < num_records; i++) {
            sink += record_digest(plain, payload);
        }
    }
    digest_s = cpu_seconds() - t0;
    free(plain);
    plain = NULL;

    if (!schedule_build(&sched, (wire_len + MSS - 1) / MSS, o->loss, o->seed)) {
        fail("cannot build the schedule");
        goto cleanup;
    }
    rs = calloc(1, sizeof(*rs));
    ring = malloc((size_t)TCP_RING_SEGMENTS * MSS);
    held = calloc(TCP_RING_SEGMENTS, 1);
    if (rs == NULL || ring == NULL || held == NULL
        || (rs->seen = calloc(num_records, 1)) == NULL) {
        fail("out of memory");
        goto cleanup;
    }
    memset(ring, 0, (size_t)TCP_RING_SEGMENTS * MSS); /* fault it in now */
    rs->link = &link;
    rs->wire = wire;
    rs->wire_len = wire_len;
    rs->base = link.stream_len;
    rs->payload = payload;
    rs->num_records = num_records;

    perf_control(1);
    t0 = cpu_seconds();
    if (variant_unordered(o->variant)) {
        ok = receive_via_segment_bio(rs, &sched, o->variant == VARIANT_FORK_ON);
    } else {
        ok = receive_via_memory_bio(rs, &sched, ring, held);
    }
    t1 = cpu_seconds();
    perf_control(0);
    if (!ok) {
        goto cleanup;
    }
    ok = 0;
    if (rs->records != num_records || rs->digest_sum != expect_sum) {
        fprintf(stderr, "bench_cpu: %zu of %zu records, digest %s\n", rs->records, num_records,
                rs->digest_sum == expect_sum ? "ok" : "WRONG");
        goto cleanup;
    }
    if (is_fork && !api.get_stats(link.receiver, &stats)) {
        fail("UTLS_get_stats failed");
        goto cleanup;
    }
    if (o->variant == VARIANT_FORK_ON_NOMETA) {
        rs->delivered_out_of_order = (size_t)stats.records_out_of_order; /* no per-record flag */
    }
    printf("cpu_s=%.9f checksum_cpu_s=%.9f records=%zu payload=%zu record_wire=%zu "
           "segments=%zu retransmissions=%zu max_hole=%zu past_hole=%zu delivered_ooo=%zu "
           "in_order=%llu out_of_order=%llu skipped=%llu probes=%llu soft_failures=%llu "
           "decryptions_saved=%llu bodies_skipped=%llu fallback=%d calibration=%zu lib=%s\n",
           t1 - t0, digest_s, rs->records, payload, rec_wire, sched.num_segments,
           sched.num_retransmissions, sched.max_hole_segments, sched.past_hole_segments,
           rs->delivered_out_of_order,
           (unsigned long long)stats.records_in_order,
           (unsigned long long)stats.records_out_of_order,
           (unsigned long long)stats.records_skipped, (unsigned long long)stats.probes,
           (unsigned long long)stats.soft_failures, (unsigned long long)stats.decryptions_saved,
           (unsigned long long)stats.bodies_skipped, (int)stats.fallback, num_calibration, loaded_libssl_path());
    ok = 1;
cleanup:
    link_cleanup(&link);
    if (rs != NULL) {
        free(rs->seen);
    }
    free(rs);
    free(sched.order);
    free(ring);
    free(held);
    free(wire);
    free(plain);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* The driver                                                               */

struct sample {
    double cpu_s;
    double checksum_cpu_s;
    size_t records, payload, record_wire, segments, retransmissions, max_hole, past_hole;
    size_t delivered_ooo;
    unsigned long long in_order, out_of_order, skipped, probes, soft_failures,
        decryptions_saved, bodies_skipped;
    int fallback;
    size_t calibration;
    char lib[PATH_MAX];
};

static int field(const char *line, const char *key, const char *fmt, void *out)
{
    char pattern[64];
    const char *p;

    snprintf(pattern, sizeof(pattern), " %s=", key);
    p = strstr(line, pattern);
    if (p == NULL && strncmp(line, pattern + 1, strlen(pattern) - 1) == 0) {
        p = line - 1;
    }
    return p != NULL && sscanf(p + strlen(pattern), fmt, out) == 1;
}

static int parse_sample(const char *line, struct sample *s)
{
    memset(s, 0, sizeof(*s));
    return field(line, "cpu_s", "%lf", &s->cpu_s)
           && field(line, "checksum_cpu_s", "%lf", &s->checksum_cpu_s)
           && field(line, "records", "%zu", &s->records)
           && field(line, "payload", "%zu", &s->payload)
           && field(line, "record_wire", "%zu", &s->record_wire)
           && field(line, "segments", "%zu", &s->segments)
           && field(line, "retransmissions", "%zu", &s->retransmissions)
           && field(line, "max_hole", "%zu", &s->max_hole)
           && field(line, "past_hole", "%zu", &s->past_hole)
           && field(line, "delivered_ooo", "%zu", &s->delivered_ooo)
           && field(line, "in_order", "%llu", &s->in_order)
           && field(line, "out_of_order", "%llu", &s->out_of_order)
           && field(line, "skipped", "%llu", &s->skipped)
           && field(line, "probes", "%llu", &s->probes)
           && field(line, "soft_failures", "%llu", &s->soft_failures)
           && field(line, "decryptions_saved", "%llu", &s->decryptions_saved)
           && field(line, "bodies_skipped", "%llu", &s->bodies_skipped)
           && field(line, "fallback", "%d", &s->fallback)
           && field(line, "calibration", "%zu", &s->calibration)
           && field(line, "lib", "%4095s", s->lib);
}

struct driver {
    char self[PATH_MAX];
    const char *fork_lib_dir;
    /* The 3.5 base: stock libssl is not the system's, and both libraries
     * need 3.5's libcrypto (--stock-lib-path, --crypto-lib-dir). */
    const char *stock_lib_path, *crypto_lib_dir;
    char fork_path[2 * PATH_MAX];
    char fork_snapshot[PATH_MAX]; /* private copy of the fork, see snapshot_fork */
    char **env_stock, **env_fork;
    uint64_t seed;
};

/* child_env copies the environment without what would change the result:
 * the library search path, and uTLS's mode and key log switches. */
static char **child_env(const char *lib_dir)
{
    size_t n = 0, k = 0;
    char **env;

    while (environ[n] != NULL) {
        n++;
    }
    env = calloc(n + 2, sizeof(*env));
    if (env == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "LD_LIBRARY_PATH=", 16) == 0
            || strncmp(environ[i], "UTLS_MODE=", 10) == 0
            || strncmp(environ[i], "SSLKEYLOGFILE=", 14) == 0) {
            continue;
        }
        env[k++] = environ[i];
    }
    if (lib_dir != NULL) {
        size_t len = strlen("LD_LIBRARY_PATH=") + strlen(lib_dir) + 1;

        env[k] = malloc(len);
        if (env[k] == NULL) {
            free(env);
            return NULL;
        }
        snprintf(env[k++], len, "LD_LIBRARY_PATH=%s", lib_dir);
    }
    return env;
}

/*
 * snapshot_fork copies the fork's libssl.so.3 from |lib_dir| into a fresh
 * directory under TMPDIR, written to |out_dir|: every fork run then uses the
 * same file, even if the build tree relinks the library during the run.
 */
static int snapshot_fork(const char *lib_dir, char *out_dir, size_t out_len)
{
    char src[PATH_MAX], dst[PATH_MAX], buf[1 << 16];
    const char *tmp = getenv("TMPDIR");
    FILE *in = NULL, *out = NULL;
    size_t n;
    int ok = 0;

    snprintf(out_dir, out_len, "%s/utls-bench-cpu-XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(out_dir) == NULL) {
        perror(out_dir);
        return 0;
    }
    if (snprintf(src, sizeof(src), "%s/libssl.so.3", lib_dir) >= (int)sizeof(src)
        || snprintf(dst, sizeof(dst), "%s/libssl.so.3", out_dir) >= (int)sizeof(dst)) {
        goto cleanup;
    }
    if ((in = fopen(src, "rb")) == NULL || (out = fopen(dst, "wb")) == NULL) {
        perror(in == NULL ? src : dst);
        goto cleanup;
    }
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            goto cleanup;
        }
    }
    ok = !ferror(in);
cleanup:
    if (in != NULL) {
        fclose(in);
    }
    if (out != NULL && fclose(out) != 0) {
        ok = 0;
    }
    return ok;
}

static void remove_snapshot(const char *dir)
{
    char path[PATH_MAX];

    if (snprintf(path, sizeof(path), "%s/libssl.so.3", dir) < (int)sizeof(path)) {
        unlink(path);
    }
    rmdir(dir);
}

/* run_child runs one measurement and parses its result line. */
static int run_child(const struct driver *d, enum variant v, size_t cipher, double loss,
                     size_t bytes, struct sample *out)
{
    char bytes_arg[32], loss_arg[32], seed_arg[32], line[8192];
    char *argv[] = {(char *)d->self, "--child", (char *)variant_names[v],
                    "--cipher", (char *)cipher_cases[cipher].key, "--loss", loss_arg,
                    "--bytes", bytes_arg, "--seed", seed_arg, NULL};
    posix_spawn_file_actions_t fa;
    int pipefd[2], status, ok;
    pid_t pid;
    FILE *f;

    snprintf(bytes_arg, sizeof(bytes_arg), "%zu", bytes);
    snprintf(loss_arg, sizeof(loss_arg), "%.17g", loss);
    snprintf(seed_arg, sizeof(seed_arg), "%llu", (unsigned long long)d->seed);
    if (pipe(pipefd) != 0) {
        return 0;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_addclose(&fa, pipefd[1]);
    ok = posix_spawn(&pid, d->self, &fa, NULL, argv,
                     v == VARIANT_STOCK ? d->env_stock : d->env_fork) == 0;
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (!ok) {
        close(pipefd[0]);
        return 0;
    }
    f = fdopen(pipefd[0], "r");
    line[0] = '\0';
    if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
        line[0] = '\0';
    }
    if (f != NULL) {
        fclose(f);
    } else {
        close(pipefd[0]);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !parse_sample(line, out)) {
        fprintf(stderr, "bench_cpu: %s %s loss %.2f failed\n", variant_names[v],
                cipher_cases[cipher].key, loss);
        return 0;
    }
    return 1;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const struct sample *s, size_t n)
{
    double *v = malloc(n * sizeof(*v)), m;

    if (v == NULL || n == 0) {
        free(v);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = s[i].cpu_s;
    }
    qsort(v, n, sizeof(*v), compare_double);
    m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    free(v);
    return m;
}

static double min_of(const struct sample *s, size_t n)
{
    double m = n ? s[0].cpu_s : 0;

    for (size_t i = 1; i < n; i++) {
        m = s[i].cpu_s < m ? s[i].cpu_s : m;
    }
    return m;
}

static double max_of(const struct sample *s, size_t n)
{
    double m = n ? s[0].cpu_s : 0;

    for (size_t i = 1; i < n; i++) {
        m = s[i].cpu_s > m ? s[i].cpu_s : m;
    }
    return m;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

#define NUM_LOSSES 2
static const double loss_rates[NUM_LOSSES] = {0.0, LOSS_RATE};
static const char *const loss_keys[NUM_LOSSES] = {"loss0", "loss2"};

/* ratio_keys: the side-by-side ratios the JSON reports, each a variant's
 * median CPU time over stock's at the same loss rate (loss_rates index),
 * and the target it must meet (at most |max|; 0: no target). */
static const struct ratio_key {
    const char *name;
    int variant;
    int loss;
    double max;
} ratio_keys[] = {
    {"inorder_ratio", VARIANT_FORK_ON, 0, 1.03},
    {"offmode_ratio", VARIANT_FORK_OFF, 0, 0},
    {"loss2_ratio", VARIANT_FORK_ON, 1, 1.07},
    {"inorder_nometa_ratio", VARIANT_FORK_ON_NOMETA, 0, 0},
    {"loss2_nometa_ratio", VARIANT_FORK_ON_NOMETA, 1, 0},
    {"offmode_loss2_ratio", VARIANT_FORK_OFF, 1, 0},
};
#define NUM_RATIOS (sizeof(ratio_keys) / sizeof(ratio_keys[0]))

struct results {
    size_t reps, bytes, cipher_bytes;
    struct sample *runs[NUM_VARIANTS][NUM_LOSSES]; /* [reps] each */
    struct sample ciphers[NUM_CIPHER_CASES];
    double median[NUM_VARIANTS][NUM_LOSSES];
    double elapsed_s;
};

static void write_stats_json(FILE *f, const struct sample *s, const char *indent)
{
    fprintf(f,
            "%s\"records\": %zu,\n%s\"calibration_records\": %zu,\n"
            "%s\"record_wire_bytes\": %zu,\n"
            "%s\"records_in_order\": %llu,\n%s\"records_out_of_order\": %llu,\n"
            "%s\"records_skipped\": %llu,\n%s\"probes\": %llu,\n%s\"soft_failures\": %llu,\n"
            "%s\"decryptions_saved\": %llu,\n%s\"bodies_skipped\": %llu,\n"
            "%s\"retransmissions\": %zu,\n",
            indent, s->records, indent, s->calibration, indent, s->record_wire, indent,
            s->in_order, indent,
            s->out_of_order, indent, s->skipped, indent, s->probes, indent, s->soft_failures,
            indent, s->decryptions_saved, indent, s->bodies_skipped, indent, s->retransmissions);
    if (s->out_of_order > 0) {
        fprintf(f, "%s\"probes_per_ooo_record\": %.4f\n", indent,
                (double)s->probes / (double)s->out_of_order);
    } else {
        fprintf(f, "%s\"probes_per_ooo_record\": null\n", indent);
    }
}

static int write_json(const char *path, const struct results *r, const struct driver *d)
{
    const struct sample *head = &r->runs[VARIANT_FORK_ON][1][0];
    double ratios[NUM_RATIOS];
    const char *sep = "";
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        perror(path);
        return 0;
    }
    fprintf(f, "{\n  \"benchmark\": \"cpu\",\n");
    fprintf(f, "  \"transfer_bytes\": %zu,\n", r->bytes);
    fprintf(f, "  \"record_wire_bytes\": %zu,\n", head->record_wire);
    fprintf(f, "  \"record_payload_bytes\": %zu,\n", head->payload);
    fprintf(f, "  \"records\": %zu,\n", head->records);
    fprintf(f, "  \"cipher\": \"%s\",\n", cipher_cases[HEADLINE_CIPHER].suite);
    fprintf(f, "  \"protocol\": \"TLSv1.3\",\n");
    fprintf(f,
            "  \"loss_model\": {\n    \"kind\": \"iid\",\n    \"mss\": %d,\n"
            "    \"loss_rates\": [0, %.2f],\n    \"retransmit_delay_segments\": %d,\n"
            "    \"retransmissions_lost_with_same_rate\": true,\n"
            "    \"retransmissions_before_new_data\": true,\n    \"seed\": %llu,\n"
            "    \"segments\": %zu,\n    \"retransmissions\": {\"loss0\": %zu, \"loss2\": %zu},\n"
            "    \"max_hole_segments\": {\"loss0\": %zu, \"loss2\": %zu},\n"
            "    \"segments_past_a_hole\": {\"loss0\": %zu, \"loss2\": %zu}\n  },\n",
            MSS, LOSS_RATE, RTX_DELAY, (unsigned long long)d->seed, head->segments,
            r->runs[VARIANT_FORK_ON][0][0].retransmissions, head->retransmissions,
            r->runs[VARIANT_FORK_ON][0][0].max_hole, head->max_hole,
            r->runs[VARIANT_FORK_ON][0][0].past_hole, head->past_hole);
    fprintf(f,
            "  \"timing\": {\n    \"clock\": \"CLOCK_PROCESS_CPUTIME_ID (user+sys), receiver "
            "loop only\",\n    \"repetitions\": %zu,\n    \"order\": \"interleaved per "
            "repetition and loss rate, starting variant rotated\",\n    \"statistic\": "
            "\"median; ratios are ratios of medians\",\n    \"warmup_rounds\": 1,\n"
            "    \"checksum_cpu_s\": %.6f\n  },\n",
            r->reps, head->checksum_cpu_s);
    fprintf(f, "  \"libs\": {\"stock\": \"%s\", \"fork\": \"%s/libssl.so.3\"},\n",
            r->runs[VARIANT_STOCK][0][0].lib, d->fork_lib_dir);
    fprintf(f, "  \"runs\": {\n");
    for (int v = 0; v < NUM_VARIANTS; v++) {
        fprintf(f, "    \"%s\": {\n", variant_names[v]);
        for (int l = 0; l < NUM_LOSSES; l++) {
            fprintf(f,
                    "      \"%s\": {\"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
                    "\"samples\": [",
                    loss_keys[l], r->median[v][l], min_of(r->runs[v][l], r->reps),
                    max_of(r->runs[v][l], r->reps));
            for (size_t i = 0; i < r->reps; i++) {
                fprintf(f, "%s%.6f", i ? ", " : "", r->runs[v][l][i].cpu_s);
            }
            fprintf(f, "]}%s\n", l + 1 < NUM_LOSSES ? "," : "");
        }
        fprintf(f, "    }%s\n", v + 1 < NUM_VARIANTS ? "," : "");
    }
    fprintf(f, "  },\n");
    for (size_t i = 0; i < NUM_RATIOS; i++) {
        const struct ratio_key *k = &ratio_keys[i];

        ratios[i] = ratio(r->median[k->variant][k->loss], r->median[VARIANT_STOCK][k->loss]);
        fprintf(f, "  \"%s\": %.4f,\n", k->name, ratios[i]);
    }
    /* The targets: every maximum, then whether each is met. */
    fprintf(f, "  \"targets\": {");
    for (size_t i = 0; i < NUM_RATIOS; i++) {
        if (ratio_keys[i].max > 0) {
            fprintf(f, "%s\"%s_max\": %.2f", sep, ratio_keys[i].name, ratio_keys[i].max);
            sep = ", ";
        }
    }
    for (size_t i = 0; i < NUM_RATIOS; i++) {
        if (ratio_keys[i].max > 0) {
            fprintf(f, ", \"%s_met\": %s", ratio_keys[i].name,
                    ratios[i] <= ratio_keys[i].max ? "true" : "false");
        }
    }
    fprintf(f, "},\n");
    fprintf(f, "  \"fork_on_stats\": {\n");
    for (int l = 0; l < NUM_LOSSES; l++) {
        fprintf(f, "    \"%s\": {\n", loss_keys[l]);
        write_stats_json(f, &r->runs[VARIANT_FORK_ON][l][0], "      ");
        fprintf(f, "    }%s\n", l + 1 < NUM_LOSSES ? "," : "");
    }
    fprintf(f, "  },\n");
    fprintf(f, "  \"cipher_transfer_bytes\": %zu,\n", r->cipher_bytes);
    fprintf(f, "  \"probes_per_ooo_record\": {\n");
    for (size_t c = 0; c < NUM_CIPHER_CASES; c++) {
        const struct sample *s = &r->ciphers[c];

        if (s->out_of_order > 0) {
            fprintf(f, "    \"%s\": %.4f", cipher_cases[c].key,
                    (double)s->probes / (double)s->out_of_order);
        } else {
            fprintf(f, "    \"%s\": null", cipher_cases[c].key);
        }
        fprintf(f, "%s\n", c + 1 < NUM_CIPHER_CASES ? "," : "");
    }
    fprintf(f, "  },\n  \"ooo_records\": {\n");
    for (size_t c = 0; c < NUM_CIPHER_CASES; c++) {
        fprintf(f, "    \"%s\": {\n", cipher_cases[c].key);
        write_stats_json(f, &r->ciphers[c], "      ");
        fprintf(f, "    }%s\n", c + 1 < NUM_CIPHER_CASES ? "," : "");
    }
    fprintf(f, "  },\n  \"elapsed_s\": %.1f\n}\n", r->elapsed_s);
    return fclose(f) == 0;
}

static void print_table(const struct results *r)
{
    const struct sample *head = &r->runs[VARIANT_FORK_ON][1][0];

    printf("receiver CPU for %.1f MB of %zu-byte records (%s), %zu repetitions\n",
           (double)r->bytes / 1e6, head->record_wire, cipher_cases[HEADLINE_CIPHER].suite,
           r->reps);
    printf("  %-14s %22s %22s\n", "variant", "loss 0%: median/min ms", "loss 2%: median/min ms");
    for (int v = 0; v < NUM_VARIANTS; v++) {
        printf("  %-14s %13.2f / %6.2f %13.2f / %6.2f\n", variant_names[v],
               1e3 * r->median[v][0], 1e3 * min_of(r->runs[v][0], r->reps),
               1e3 * r->median[v][1], 1e3 * min_of(r->runs[v][1], r->reps));
    }
    printf("  inorder_ratio %.4f (target <= 1.03)   loss2_ratio %.4f (target <= 1.07)   "
           "offmode_ratio %.4f\n",
           ratio(r->median[VARIANT_FORK_ON][0], r->median[VARIANT_STOCK][0]),
           ratio(r->median[VARIANT_FORK_ON][1], r->median[VARIANT_STOCK][1]),
           ratio(r->median[VARIANT_FORK_OFF][0], r->median[VARIANT_STOCK][0]));
    printf("  without per-record metadata (UTLS_read_record, out_info NULL): "
           "inorder_nometa_ratio %.4f   loss2_nometa_ratio %.4f\n",
           ratio(r->median[VARIANT_FORK_ON_NOMETA][0], r->median[VARIANT_STOCK][0]),
           ratio(r->median[VARIANT_FORK_ON_NOMETA][1], r->median[VARIANT_STOCK][1]));
    printf("probes per out-of-order record, fork with the mode on, 2%% loss, %.1f MB:\n",
           (double)r->cipher_bytes / 1e6);
    for (size_t c = 0; c < NUM_CIPHER_CASES; c++) {
        const struct sample *s = &r->ciphers[c];

        printf("  %-36s %7.3f  (%llu out of order, %llu probes, %llu saved, %zu-byte records)\n",
               cipher_cases[c].key,
               s->out_of_order ? (double)s->probes / (double)s->out_of_order : 0.0,
               s->out_of_order, s->probes, s->decryptions_saved, s->record_wire);
    }
}

static int driver_main(struct driver *d, size_t reps, size_t bytes, size_t cipher_bytes,
                       const char *out_path)
{
    struct results r;
    double start = wall_seconds();
    int ok = 0;

    memset(&r, 0, sizeof(r));
    r.reps = reps;
    r.bytes = bytes;
    r.cipher_bytes = cipher_bytes;
    if (!snapshot_fork(d->fork_lib_dir, d->fork_snapshot, sizeof(d->fork_snapshot))) {
        fprintf(stderr, "bench_cpu: cannot copy %s/libssl.so.3\n", d->fork_lib_dir);
        goto cleanup;
    }
    d->env_stock = child_env(d->stock_lib_path);
    if (d->crypto_lib_dir != NULL) {
        snprintf(d->fork_path, sizeof(d->fork_path), "%s:%s", d->fork_snapshot, d->crypto_lib_dir);
    } else {
        snprintf(d->fork_path, sizeof(d->fork_path), "%s", d->fork_snapshot);
    }
    d->env_fork = child_env(d->fork_path);
    if (d->env_stock == NULL || d->env_fork == NULL) {
        goto cleanup;
    }
    for (int v = 0; v < NUM_VARIANTS; v++) {
        for (int l = 0; l < NUM_LOSSES; l++) {
            if ((r.runs[v][l] = calloc(reps, sizeof(struct sample))) == NULL) {
                goto cleanup;
            }
        }
    }
    /* One round whose results are dropped: caches, page cache and CPU
     * frequency settle before the first sample counts. */
    for (int l = 0; l < NUM_LOSSES; l++) {
        for (int v = 0; v < NUM_VARIANTS; v++) {
            struct sample warm;

            if (!run_child(d, (enum variant)v, HEADLINE_CIPHER, loss_rates[l], bytes, &warm)) {
                goto cleanup;
            }
        }
    }
    fprintf(stderr, "bench_cpu: warm-up round done\n");
    for (size_t rep = 0; rep < reps; rep++) {
        for (int l = 0; l < NUM_LOSSES; l++) {
            for (int k = 0; k < NUM_VARIANTS; k++) {
                enum variant v = (enum variant)((rep + (size_t)k) % NUM_VARIANTS);
                struct sample *s = &r.runs[v][l][rep];

                if (!run_child(d, v, HEADLINE_CIPHER, loss_rates[l], bytes, s)) {
                    goto cleanup;
                }
                fprintf(stderr, "bench_cpu: rep %zu/%zu %s %-8s %8.2f ms", rep + 1, reps,
                        loss_keys[l], variant_names[v], 1e3 * s->cpu_s);
                if (variant_unordered(v)) {
                    fprintf(stderr, "  (%llu out of order, %llu probes, %llu saved)",
                            s->out_of_order, s->probes, s->decryptions_saved);
                }
                fprintf(stderr, "\n");
            }
        }
    }
    for (int v = 0; v < NUM_VARIANTS; v++) {
        for (int l = 0; l < NUM_LOSSES; l++) {
            r.median[v][l] = median_of(r.runs[v][l], reps);
        }
    }
    for (size_t c = 0; c < NUM_CIPHER_CASES; c++) {
        struct sample *s = &r.ciphers[c];

        if (!run_child(d, VARIANT_FORK_ON, c, LOSS_RATE, cipher_bytes, s)) {
            goto cleanup;
        }
        fprintf(stderr, "bench_cpu: %-36s %llu out of order, %llu probes, %llu saved\n",
                cipher_cases[c].key, s->out_of_order, s->probes, s->decryptions_saved);
    }
    r.elapsed_s = wall_seconds() - start;
    if (!write_json(out_path, &r, d)) {
        goto cleanup;
    }
    print_table(&r);
    printf("wrote %s in %.1f s\n", out_path, r.elapsed_s);
    ok = 1;
cleanup:
    for (int v = 0; v < NUM_VARIANTS; v++) {
        for (int l = 0; l < NUM_LOSSES; l++) {
            free(r.runs[v][l]);
        }
    }
    if (d->env_fork != NULL) {
        for (size_t i = 0; d->env_fork[i] != NULL; i++) {
            if (strncmp(d->env_fork[i], "LD_LIBRARY_PATH=", 16) == 0) {
                free(d->env_fork[i]);
            }
        }
    }
    if (d->env_stock != NULL && d->stock_lib_path != NULL) {
        for (size_t i = 0; d->env_stock[i] != NULL; i++) {
            if (strncmp(d->env_stock[i], "LD_LIBRARY_PATH=", 16) == 0) {
                free(d->env_stock[i]);
            }
        }
    }
    free(d->env_stock);
    free(d->env_fork);
    if (d->fork_snapshot[0] != '\0') {
        remove_snapshot(d->fork_snapshot);
    }
    return ok ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_cpu --fork-lib-dir DIR [--out FILE] [--quick] [--reps N]\n"
                    "                 [--bytes N] [--cipher-bytes N] [--seed N]\n"
                    "                 [--stock-lib-path PATH] [--crypto-lib-dir DIR]\n");
}

static int find_cipher(const char *key)
{
    for (size_t c = 0; c < NUM_CIPHER_CASES; c++) {
        if (strcmp(cipher_cases[c].key, key) == 0) {
            return (int)c;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct driver d;
    struct child_opts child;
    const char *out_path = "cpu.json", *child_variant = NULL;
    size_t reps = DEFAULT_REPS, bytes = DEFAULT_TRANSFER_BYTES;
    size_t cipher_bytes = DEFAULT_CIPHER_BYTES;
    int cipher = HEADLINE_CIPHER, quick = 0, explicit_bytes = 0, explicit_reps = 0;
    double loss = 0;

    memset(&d, 0, sizeof(d));
    d.seed = DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--quick") == 0) {
            quick = 1;
            continue;
        }
        if (val == NULL) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--out") == 0) {
            out_path = val;
        } else if (strcmp(a, "--fork-lib-dir") == 0) {
            d.fork_lib_dir = val;
        } else if (strcmp(a, "--stock-lib-path") == 0) {
            d.stock_lib_path = val;
        } else if (strcmp(a, "--crypto-lib-dir") == 0) {
            d.crypto_lib_dir = val;
        } else if (strcmp(a, "--reps") == 0) {
            reps = strtoul(val, NULL, 10);
            explicit_reps = 1;
        } else if (strcmp(a, "--bytes") == 0) {
            bytes = strtoul(val, NULL, 10);
            explicit_bytes = 1;
        } else if (strcmp(a, "--cipher-bytes") == 0) {
            cipher_bytes = strtoul(val, NULL, 10);
        } else if (strcmp(a, "--seed") == 0) {
            d.seed = strtoull(val, NULL, 0);
        } else if (strcmp(a, "--child") == 0) {
            child_variant = val;
        } else if (strcmp(a, "--cipher") == 0) {
            cipher = find_cipher(val);
        } else if (strcmp(a, "--loss") == 0) {
            loss = strtod(val, NULL);
        } else {
            usage();
            return 2;
        }
    }

    if (child_variant != NULL) {
        memset(&child, 0, sizeof(child));
        child.variant = NUM_VARIANTS;
        for (int v = 0; v < NUM_VARIANTS; v++) {
            if (strcmp(child_variant, variant_names[v]) == 0) {
                child.variant = (enum variant)v;
            }
        }
        if (child.variant == NUM_VARIANTS || cipher < 0 || bytes == 0) {
            usage();
            return 2;
        }
        child.cipher = &cipher_cases[cipher];
        child.loss = loss;
        child.bytes = bytes;
        child.seed = d.seed;
        return child_main(&child);
    }

    if (quick) {
        bytes = explicit_bytes ? bytes : QUICK_TRANSFER_BYTES;
        cipher_bytes = QUICK_CIPHER_BYTES;
        reps = explicit_reps ? reps : 1;
    }
    if (d.fork_lib_dir == NULL || reps == 0 || bytes == 0 || cipher_bytes == 0) {
        usage();
        return 2;
    }
    if (realpath("/proc/self/exe", d.self) == NULL) {
        perror("/proc/self/exe");
        return 1;
    }
    return driver_main(&d, reps, bytes, cipher_bytes, out_path);
}
