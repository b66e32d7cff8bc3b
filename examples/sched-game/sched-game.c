/*
 * sched-game: a game server sending state over TLS with the uTLS send
 * scheduler.
 *
 * Every tick (60 Hz) the sender makes a position update for each of 8
 * entities, plus now and then a chat line and a hit event. Position updates
 * carry a squash tag per entity: on a slow link only the newest update of an
 * entity is ever encrypted, older ones are dropped unsent. Hit events have a
 * higher priority and a 150 ms deadline: they overtake queued state and chat,
 * and are dropped rather than delivered late. Chat has the lowest priority
 * and no deadline: it always arrives, in order, when there is room.
 *
 * The program forks a receiver that is a plain TLS server (nothing in it is
 * uTLS-specific: any TLS stack would do) over loopback, with the link slowed
 * to 40 KB/s by a pacing cap (UTLS_tcp_set_max_pacing_rate, a control that can
 * only make TCP slower). It checks that the receiver ends with the newest
 * position of every entity and every chat line, and prints what the
 * scheduler did.
 *
 * Build: cc sched-game.c $(pkg-config --cflags --libs utls)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>
#include <openssl/x509.h>

#define ENTITIES 8
#define TICK_NS 16666667ull /* 60 Hz */
#define TICKS 120           /* two seconds */
#define CHAT_EVERY 10
#define HIT_EVERY 7

enum { MSG_POS = 'P', MSG_CHAT = 'C', MSG_HIT = 'H' };

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "sched-game: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* ---- the receiver: an ordinary TLS server -------------------------------- */

static void make_cert(SSL_CTX *ctx)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();

    if (key == NULL || x == NULL)
        die("key");
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"game", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    if (!X509_sign(x, key, EVP_sha256()) || SSL_CTX_use_certificate(ctx, x) != 1
        || SSL_CTX_use_PrivateKey(ctx, key) != 1)
        die("certificate");
    X509_free(x);
    EVP_PKEY_free(key);
}

/* Messages are text, one per record: "P <entity> <tick>", "C <n>", "H <n>".
 * The receiver reports the newest tick per entity and the chat count on
 * stdout of the child, which the parent reads through a pipe. */
static int receiver(int lfd, int report_fd)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL *ssl;
    int fd = accept(lfd, NULL, NULL), newest[ENTITIES], chats = 0, hits = 0, positions = 0;
    int last_chat = -1, ordered = 1;
    char buf[1024], line[256];
    size_t n;

    memset(newest, -1, sizeof(newest));
    if (ctx == NULL || fd < 0)
        die("receiver setup");
    make_cert(ctx);
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1)
        die("receiver handshake");
    while (SSL_read_ex(ssl, buf, sizeof(buf) - 1, &n)) {
        int a = 0, b = 0;

        buf[n] = '\0';
        switch (buf[0]) {
        case MSG_POS:
            if (sscanf(buf + 1, "%d %d", &a, &b) == 2 && a >= 0 && a < ENTITIES) {
                if (b < newest[a])
                    ordered = 0; /* never happens: squash keeps the newest */
                newest[a] = b;
                positions++;
            }
            break;
        case MSG_CHAT:
            if (sscanf(buf + 1, "%d", &a) == 1) {
                if (a != last_chat + 1)
                    ordered = 0;
                last_chat = a;
                chats++;
            }
            break;
        case MSG_HIT:
            hits++;
            break;
        default:
            ordered = 0;
            break;
        }
    }
    if (SSL_get_error(ssl, 0) != SSL_ERROR_ZERO_RETURN)
        die("receiver: the stream did not end with close_notify");
    snprintf(line, sizeof(line), "%d %d %d %d", positions, chats, hits, ordered);
    {
        int i;
        size_t len = strlen(line);

        for (i = 0; i < ENTITIES; i++)
            len += (size_t)snprintf(line + len, sizeof(line) - len, " %d", newest[i]);
    }
    if (write(report_fd, line, strlen(line)) < 0)
        die("report");
    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}

/* ---- the sender: the scheduler ------------------------------------------- */

static void submit(UTLS_SCHED *sch, const char *text, uint8_t priority, uint64_t squash_tag,
                   uint64_t deadline_ns)
{
    UTLS_SCHED_MSG m;

    memset(&m, 0, sizeof(m));
    m.priority = priority;
    m.squash_tag = squash_tag;
    if (deadline_ns != 0) {
        m.flags = UTLS_SCHED_DEADLINE;
        m.deadline_ns = deadline_ns;
    }
    if (!UTLS_sched_submit(sch, text, strlen(text), &m, NULL))
        die("UTLS_sched_submit");
}

int main(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), fd, one = 1, report[2], i, tick;
    pid_t child;
    SSL_CTX *ctx;
    SSL *ssl;
    UTLS_SCHED *sch;
    UTLS_SCHED_CONFIG cfg;
    UTLS_SCHED_STATS st;
    UTLS_SCHED_DROP d;
    UTLS_TCP_INFO ti;
    uint64_t start, dropped_by_reason[5] = {0};
    char text[64], got[256];
    int positions, chats, hits, ordered, newest[ENTITIES], chat_sent = 0, hit_sent = 0;
    ssize_t r;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1) != 0
        || getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0 || pipe(report) != 0)
        die("listen");
    if ((child = fork()) == 0) {
        close(report[0]);
        exit(receiver(lfd, report[1]));
    }
    close(report[1]);
    close(lfd);

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* A slow link: 40 KB/s. A pacing cap only ever slows TCP down. */
    if (!UTLS_tcp_set_max_pacing_rate(fd, 40000))
        die("pacing cap");
    ctx = SSL_CTX_new(TLS_client_method());
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1)
        die("handshake");
    /* The scheduler sets TCP_NOTSENT_LOWAT: POLLOUT now means "the scheduler
     * will write". What the kernel holds can no longer be reordered, so on a
     * slow link keep it small: 1500 bytes is 38 ms at 40 KB/s. */
    UTLS_sched_config_default(&cfg);
    cfg.notsent_lowat = 1500;
    if ((sch = UTLS_sched_new(ssl, &cfg)) == NULL)
        die("UTLS_sched_new");

    start = now_ns();
    for (tick = 0; tick < TICKS; tick++) {
        uint64_t next = start + (uint64_t)(tick + 1) * TICK_NS;

        for (i = 0; i < ENTITIES; i++) {
            /* 8 x 60 updates/s of ~500 bytes is ~240 KB/s: six times what
             * the link carries. Squash keeps only the newest per entity. */
            snprintf(text, sizeof(text), "P %d %d ", i, tick);
            {
                char update[512];

                memset(update, ' ', sizeof(update));
                memcpy(update, text, strlen(text));
                update[sizeof(update) - 1] = '\0';
                submit(sch, update, 1, (uint64_t)i + 1, 0);
            }
        }
        if (tick % CHAT_EVERY == 0) {
            snprintf(text, sizeof(text), "C %d", chat_sent++);
            submit(sch, text, 0, 0, 0);
        }
        if (tick % HIT_EVERY == 0) {
            snprintf(text, sizeof(text), "H %d", hit_sent++);
            submit(sch, text, 2, 0, now_ns() + 150000000ull);
        }
        /* The event loop: write what the socket takes, wait for the next
         * tick or for room, whichever comes first. */
        for (;;) {
            UTLS_SCHED_RESULT res = UTLS_sched_flush(sch, NULL);
            struct pollfd p = {fd, POLLOUT, 0};
            uint64_t now = now_ns();

            if (res == UTLS_SCHED_ERROR)
                die("UTLS_sched_flush");
            if (now >= next)
                break;
            if (poll(&p, res == UTLS_SCHED_WANT_WRITE ? 1 : 0,
                     (int)((next - now) / 1000000) + 1) < 0)
                die("poll");
        }
    }
    if (UTLS_sched_get_tcp_info(sch, &ti))
        printf("tcp: %s, srtt %u us, cwnd %u, in flight %llu B, unsent %llu B, "
               "pacing cap %llu B/s\n",
               ti.congestion_control[0] != '\0' ? ti.congestion_control : "?", ti.srtt_us,
               ti.cwnd_segs, (unsigned long long)ti.bytes_in_flight,
               (unsigned long long)ti.notsent_bytes, (unsigned long long)ti.max_pacing_rate);
    /* Blocking-style end: write everything left. */
    if (UTLS_sched_drain(sch, 30000) != UTLS_SCHED_IDLE)
        die("UTLS_sched_drain");
    while (UTLS_sched_next_drop(sch, &d))
        dropped_by_reason[d.reason < 5 ? d.reason : 0]++;
    UTLS_sched_get_stats(sch, &st);
    printf("scheduler: %llu submitted, %llu written (%llu ahead of older messages), "
           "%llu squashed, %llu past their deadline\n",
           (unsigned long long)st.submitted, (unsigned long long)st.written,
           (unsigned long long)st.overtaken, (unsigned long long)st.dropped_squashed,
           (unsigned long long)st.dropped_deadline);
    UTLS_sched_free(sch);
    while (SSL_shutdown(ssl) == 0) {
        char b[256];

        if (SSL_read(ssl, b, sizeof(b)) <= 0)
            break;
    }

    r = read(report[0], got, sizeof(got) - 1);
    waitpid(child, NULL, 0);
    if (r <= 0)
        die("no report from the receiver");
    got[r] = '\0';
    if (sscanf(got, "%d %d %d %d %d %d %d %d %d %d %d %d", &positions, &chats, &hits, &ordered,
               &newest[0], &newest[1], &newest[2], &newest[3], &newest[4], &newest[5],
               &newest[6], &newest[7]) != 12)
        die("bad report");
    printf("receiver: %d position updates, %d/%d chat lines, %d/%d hits\n", positions, chats,
           chat_sent, hits, hit_sent);
    for (i = 0; i < ENTITIES; i++) {
        if (newest[i] != TICKS - 1) {
            fprintf(stderr, "sched-game: entity %d ended at tick %d, not %d\n", i, newest[i],
                    TICKS - 1);
            return 1;
        }
    }
    if (!ordered || chats != chat_sent
        || (uint64_t)hits + dropped_by_reason[UTLS_SCHED_DROP_DEADLINE] != (uint64_t)hit_sent
        || st.dropped_squashed == 0) {
        fprintf(stderr, "sched-game: unexpected result\n");
        return 1;
    }
    printf("ok: every entity's newest state arrived, older ones were squashed unsent\n");
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}
