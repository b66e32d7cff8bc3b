/*
 * nfq-delay: a small netem substitute on NFQUEUE, for kernels without
 * sch_netem. It binds one NFQUEUE queue (one direction of the testbed's
 * router), holds every packet for a configured one-way delay (+ jitter)
 * and then issues NF_ACCEPT; packets chosen for loss get NF_DROP at once.
 *
 *   - delay/jitter: packets sit in a min-heap keyed on their due time; the
 *     main loop sleeps in ppoll() until the next due time or the next packet.
 *     Without --reorder a packet is never released before an earlier packet
 *     of the same flow (5-tuple hash): FIFO per flow, as on a real path.
 *   - loss: our own seeded PRNG (splitmix64/xoshiro256**), so a run is
 *     reproducible (nftables' numgen random cannot be seeded), or a
 *     deterministic pattern: every:N drops counted packets N, 2N, 3N...;
 *     list:i,j,a-b drops exactly those counted packet indices (1-based).
 *     "Counted" packets are all packets (match=all) or only packets that
 *     carry payload (match=data: TCP with payload, UDP, ICMP, anything that
 *     is not a bare TCP SYN/ACK/FIN/RST).
 *   - the queue is created with a large maxlen and NFQA_CFG_F_FAIL_OPEN; the
 *     firewall rule uses --queue-bypass: a dead daemon never black-holes.
 *   - SIGHUP re-reads the config file (and resets pattern counters and the
 *     PRNG); SIGUSR1 appends a stats line to the log; SIGTERM/SIGINT release
 *     every held packet (NF_ACCEPT), append final stats and exit 0.
 *
 * Config file: lines "key value" or "key=value"; '#' starts a comment.
 *   delay_ms F   jitter_ms F   loss_pct F   seed N   pattern random|every:N|list:..
 *   match all|data   reorder 0|1
 * Command-line options set the same keys (--delay, --jitter, --loss, --seed,
 * --pattern, --match, --reorder); the config file, when given, wins.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>

#include "test_rng.h" /* tests/common: the generator the tests use too */

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* ------------------------------------------------------------------ */
/* configuration                                                        */

enum pattern_kind { PAT_RANDOM, PAT_EVERY, PAT_LIST };

struct config {
    double delay_ms;
    double jitter_ms;
    double loss_pct;
    uint64_t seed;
    int seed_given;
    enum pattern_kind pattern;
    uint64_t every;
    uint64_t *list;       /* sorted, 1-based indices */
    size_t list_len;
    int match_data;       /* 1: count only packets with payload */
    int match_given;
    int reorder;
};

static void config_free(struct config *c)
{
    free(c->list);
    c->list = NULL;
    c->list_len = 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int parse_pattern(struct config *c, const char *s, char *err, size_t errlen)
{
    free(c->list);
    c->list = NULL;
    c->list_len = 0;
    if (strcmp(s, "random") == 0) {
        c->pattern = PAT_RANDOM;
        return 0;
    }
    if (strncmp(s, "every:", 6) == 0) {
        char *end;
        unsigned long long n = strtoull(s + 6, &end, 10);
        if (*end || n == 0) {
            snprintf(err, errlen, "bad pattern '%s' (every:N with N >= 1)", s);
            return -1;
        }
        c->pattern = PAT_EVERY;
        c->every = n;
        return 0;
    }
    if (strncmp(s, "list:", 5) == 0) {
        size_t cap = 16, n = 0;
        uint64_t *v = malloc(cap * sizeof *v);
        const char *p = s + 5;
        if (!v)
            return -1;
        while (*p) {
            char *end;
            unsigned long long a = strtoull(p, &end, 10), b;
            if (end == p || a == 0)
                goto bad;
            b = a;
            if (*end == '-') {
                p = end + 1;
                b = strtoull(p, &end, 10);
                if (end == p || b < a || b - a > 10000000ULL)
                    goto bad;
            }
            for (unsigned long long i = a; i <= b; i++) {
                if (n == cap) {
                    uint64_t *nv;
                    cap *= 2;
                    nv = realloc(v, cap * sizeof *v);
                    if (!nv)
                        goto bad;
                    v = nv;
                }
                v[n++] = i;
            }
            if (*end == ',')
                end++;
            else if (*end)
                goto bad;
            p = end;
        }
        qsort(v, n, sizeof *v, cmp_u64);
        c->pattern = PAT_LIST;
        c->list = v;
        c->list_len = n;
        return 0;
bad:
        free(v);
        snprintf(err, errlen, "bad pattern '%s' (list:i,j,a-b with 1-based indices)", s);
        return -1;
    }
    snprintf(err, errlen, "bad pattern '%s' (random, every:N or list:i,j,k)", s);
    return -1;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int set_key(struct config *c, const char *key, const char *val, char *err, size_t errlen)
{
    if (strcmp(key, "delay_ms") == 0 || strcmp(key, "delay") == 0) {
        if (parse_double(val, 0, 600000, &c->delay_ms) == 0)
            return 0;
    } else if (strcmp(key, "jitter_ms") == 0 || strcmp(key, "jitter") == 0) {
        if (parse_double(val, 0, 600000, &c->jitter_ms) == 0)
            return 0;
    } else if (strcmp(key, "loss_pct") == 0 || strcmp(key, "loss") == 0) {
        if (parse_double(val, 0, 100, &c->loss_pct) == 0)
            return 0;
    } else if (strcmp(key, "seed") == 0) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 0);
        if (!errno && end != val && !*end) {
            c->seed = v;
            c->seed_given = 1;
            return 0;
        }
    } else if (strcmp(key, "pattern") == 0) {
        return parse_pattern(c, val, err, errlen);
    } else if (strcmp(key, "match") == 0) {
        if (strcmp(val, "all") == 0 || strcmp(val, "data") == 0) {
            c->match_data = strcmp(val, "data") == 0;
            c->match_given = 1;
            return 0;
        }
    } else if (strcmp(key, "reorder") == 0) {
        if (strcmp(val, "0") == 0 || strcmp(val, "1") == 0) {
            c->reorder = val[0] == '1';
            return 0;
        }
    } else {
        snprintf(err, errlen, "unknown key '%s'", key);
        return -1;
    }
    snprintf(err, errlen, "bad value '%s' for %s", val, key);
    return -1;
}

static int load_config_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    int lineno = 0;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char *p = line, *key, *val, *e;
        lineno++;
        if ((e = strchr(p, '#')))
            *e = 0;
        while (*p == ' ' || *p == '\t')
            p++;
        e = p + strlen(p);
        while (e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = 0;
        if (!*p)
            continue;
        key = p;
        p += strcspn(p, " \t=");
        if (!*p) {
            snprintf(err, errlen, "%s:%d: missing value", path, lineno);
            fclose(f);
            return -1;
        }
        *p++ = 0;
        while (*p == ' ' || *p == '\t' || *p == '=')
            p++;
        val = p;
        if (set_key(c, key, val, err, errlen) < 0) {
            size_t l = strlen(err);
            snprintf(err + l, errlen - l, " (%s:%d)", path, lineno);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

/* ------------------------------------------------------------------ */
/* PRNG: xoshiro256** seeded through splitmix64                         */

struct rng {
    uint64_t s[4];
};

static void rng_seed(struct rng *r, uint64_t seed)
{
    test_xoshiro256ss_seed(r->s, seed);
}

static uint64_t rng_next(struct rng *r)
{
    return test_xoshiro256ss_next(r->s);
}

/* uniform in [0,1) */
static double rng_double(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------------ */
/* held packets: min-heap on (due, seq)                                 */

struct held {
    uint64_t due;
    uint64_t seq;
    uint32_t id;
};

struct heap {
    struct held *v;
    size_t n, cap;
};

static inline int held_less(const struct held *a, const struct held *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static int heap_push(struct heap *h, struct held x)
{
    size_t i;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 4096;
        struct held *nv = realloc(h->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        h->v = nv;
        h->cap = nc;
    }
    i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!held_less(&x, &h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
    return 0;
}

static struct held heap_pop(struct heap *h)
{
    struct held top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct held *best = &x;
        if (l < h->n && held_less(&h->v[l], best)) {
            m = l;
            best = &h->v[l];
        }
        if (r < h->n && held_less(&h->v[r], best))
            m = r;
        if (m == i)
            break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n)
        h->v[i] = x;
    return top;
}

/* ------------------------------------------------------------------ */
/* state                                                                */

#define FLOW_BUCKETS 4096
#define LATE_BUCKETS 1001 /* 10 us buckets, last one = >= 10 ms */

struct stats {
    uint64_t packets, counted, accepted, dropped, verdict_errors, recv_errors;
    uint64_t max_queue;
    uint64_t late_sum_ns, late_max_ns, late_n;
    uint64_t late_hist[LATE_BUCKETS];
};

static struct {
    struct config cfg;
    const char *config_path;
    const char *log_path;
    uint16_t qnum;
    struct nfq_handle *h;
    struct nfq_q_handle *qh;
    struct heap heap;
    uint64_t flow_last_due[FLOW_BUCKETS];
    uint64_t seq;
    uint64_t pattern_index;  /* counted packets since (re)configuration */
    size_t list_pos;
    struct rng loss_rng, jitter_rng;
    struct stats st;
    uint64_t start_ns;
} G;

static volatile sig_atomic_t sig_hup, sig_usr1, sig_term;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        sig_hup = 1;
    else if (sig == SIGUSR1)
        sig_usr1 = 1;
    else
        sig_term = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    FILE *f = G.log_path ? fopen(G.log_path, "a") : NULL;
    FILE *out = f ? f : stderr;
    struct timespec ts;
    va_list ap;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(out, "%lld.%03ld nfq-delay[%d] q%u: ", (long long)ts.tv_sec, ts.tv_nsec / 1000000,
            (int)getpid(), G.qnum);
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    if (f)
        fclose(f);
    else
        fflush(stderr);
}

static uint64_t late_pct(double q)
{
    uint64_t want = (uint64_t)ceil(q * (double)G.st.late_n), acc = 0;
    if (!G.st.late_n)
        return 0;
    for (int i = 0; i < LATE_BUCKETS; i++) {
        acc += G.st.late_hist[i];
        if (acc >= want)
            return (uint64_t)(i + 1) * 10; /* upper bound of the bucket, us */
    }
    return LATE_BUCKETS * 10;
}

static void log_stats(const char *why)
{
    logf_("stats(%s) packets=%" PRIu64 " counted=%" PRIu64 " accepted=%" PRIu64 " dropped=%" PRIu64
          " held=%zu max_queue=%" PRIu64 " late_avg_us=%.1f late_p99_us<=%" PRIu64
          " late_max_us=%.1f verdict_errors=%" PRIu64 " recv_errors=%" PRIu64,
          why, G.st.packets, G.st.counted, G.st.accepted, G.st.dropped, G.heap.n, G.st.max_queue,
          G.st.late_n ? (double)G.st.late_sum_ns / (double)G.st.late_n / 1000.0 : 0.0,
          late_pct(0.99), (double)G.st.late_max_ns / 1000.0, G.st.verdict_errors,
          G.st.recv_errors);
}

static void log_config(const char *why)
{
    const struct config *c = &G.cfg;
    char pat[64];
    if (c->pattern == PAT_RANDOM)
        snprintf(pat, sizeof pat, "random");
    else if (c->pattern == PAT_EVERY)
        snprintf(pat, sizeof pat, "every:%" PRIu64, c->every);
    else
        snprintf(pat, sizeof pat, "list(%zu indices)", c->list_len);
    logf_("config(%s) delay_ms=%.3f jitter_ms=%.3f loss_pct=%.3f seed=%" PRIu64
          " pattern=%s match=%s reorder=%d",
          why, c->delay_ms, c->jitter_ms, c->loss_pct, c->seed, pat,
          c->match_data ? "data" : "all", c->reorder);
}

/* (Re)start the loss/jitter machinery after a configuration change. */
static void apply_config(void)
{
    if (!G.cfg.seed_given) {
        uint64_t x = now_ns() ^ ((uint64_t)getpid() << 32);
        G.cfg.seed = test_splitmix64(&x) & 0xffffffffULL;
        G.cfg.seed_given = 1; /* keep it across reloads that do not set one */
    }
    if (!G.cfg.match_given)
        G.cfg.match_data = G.cfg.pattern != PAT_RANDOM;
    rng_seed(&G.loss_rng, G.cfg.seed);
    rng_seed(&G.jitter_rng, G.cfg.seed ^ 0x6a09e667f3bcc909ULL);
    G.pattern_index = 0;
    G.list_pos = 0;
}

/* ------------------------------------------------------------------ */
/* packet inspection                                                    */

static uint32_t mix32(uint32_t h, uint32_t v)
{
    h ^= v;
    h *= 0x01000193u;
    h ^= h >> 15;
    return h;
}

/* Flow bucket and whether the packet carries payload. */
static void inspect(const unsigned char *p, int len, uint32_t *bucket, int *is_data)
{
    uint32_t h = 0x811c9dc5u;
    int proto = -1, l4 = -1, total = len;
    *is_data = 1;
    if (len >= 20 && (p[0] >> 4) == 4) {
        int ihl = (p[0] & 15) * 4;
        uint32_t a, b;
        total = (p[2] << 8) | p[3];
        if (total > len)
            total = len;
        proto = p[9];
        memcpy(&a, p + 12, 4);
        memcpy(&b, p + 16, 4);
        h = mix32(mix32(mix32(h, a), b), (uint32_t)proto);
        if (((p[6] & 0x1f) | p[7]) == 0) /* first fragment only carries ports */
            l4 = ihl;
    } else if (len >= 40 && (p[0] >> 4) == 6) {
        uint32_t w;
        total = 40 + ((p[4] << 8) | p[5]);
        if (total > len)
            total = len;
        proto = p[6];
        for (int i = 8; i < 40; i += 4) {
            memcpy(&w, p + i, 4);
            h = mix32(h, w);
        }
        h = mix32(h, (uint32_t)proto);
        l4 = 40;
    }
    if (l4 >= 0 && (proto == 6 || proto == 17) && len >= l4 + 4) {
        uint32_t ports;
        memcpy(&ports, p + l4, 4);
        h = mix32(h, ports);
    }
    if (proto == 6 && l4 >= 0 && len >= l4 + 13) {
        int doff = (p[l4 + 12] >> 4) * 4;
        if (total - l4 - doff <= 0)
            *is_data = 0;
    }
    *bucket = h & (FLOW_BUCKETS - 1);
}

static int decide_drop(void)
{
    const struct config *c = &G.cfg;
    uint64_t idx = ++G.pattern_index;
    switch (c->pattern) {
    case PAT_RANDOM:
        if (c->loss_pct <= 0)
            return 0;
        return rng_double(&G.loss_rng) * 100.0 < c->loss_pct;
    case PAT_EVERY:
        return idx % c->every == 0;
    case PAT_LIST:
        while (G.list_pos < c->list_len && c->list[G.list_pos] < idx)
            G.list_pos++;
        return G.list_pos < c->list_len && c->list[G.list_pos] == idx;
    }
    return 0;
}

static void verdict(uint32_t id, uint32_t v)
{
    if (nfq_set_verdict(G.qh, id, v, 0, NULL) < 0)
        G.st.verdict_errors++;
    else if (v == NF_ACCEPT)
        G.st.accepted++;
    else
        G.st.dropped++;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *nfmsg, struct nfq_data *nfa,
                     void *data)
{
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    unsigned char *payload = NULL;
    int len, is_data;
    uint32_t id, bucket;
    uint64_t now = now_ns(), due;
    (void)qh;
    (void)nfmsg;
    (void)data;
    if (!ph)
        return 0;
    id = ntohl(ph->packet_id);
    G.st.packets++;
    len = nfq_get_payload(nfa, &payload);
    inspect(payload, len > 0 ? len : 0, &bucket, &is_data);

    if (!G.cfg.match_data || is_data) {
        G.st.counted++;
        if (decide_drop()) {
            verdict(id, NF_DROP);
            return 0;
        }
    }

    due = now + (uint64_t)(G.cfg.delay_ms * 1e6);
    if (G.cfg.jitter_ms > 0) {
        double j = (rng_double(&G.jitter_rng) * 2.0 - 1.0) * G.cfg.jitter_ms * 1e6;
        if (j < 0 && (uint64_t)(-j) > due - now)
            due = now;
        else
            due = (uint64_t)((double)due + j);
    }
    if (!G.cfg.reorder) {
        if (due < G.flow_last_due[bucket])
            due = G.flow_last_due[bucket];
        G.flow_last_due[bucket] = due;
    }
    if (due <= now && G.heap.n == 0) {
        verdict(id, NF_ACCEPT);
        return 0;
    }
    if (heap_push(&G.heap, (struct held){ .due = due, .seq = G.seq++, .id = id }) < 0) {
        verdict(id, NF_ACCEPT); /* out of memory: fail open */
        return 0;
    }
    if (G.heap.n > G.st.max_queue)
        G.st.max_queue = G.heap.n;
    return 0;
}

static void release_due(uint64_t now)
{
    while (G.heap.n && G.heap.v[0].due <= now) {
        struct held x = heap_pop(&G.heap);
        uint64_t late = now - x.due;
        size_t b = late / 10000;
        verdict(x.id, NF_ACCEPT);
        G.st.late_sum_ns += late;
        G.st.late_n++;
        if (late > G.st.late_max_ns)
            G.st.late_max_ns = late;
        G.st.late_hist[b < LATE_BUCKETS ? b : LATE_BUCKETS - 1]++;
        now = now_ns();
    }
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nfq-delay -q QUEUE [-c CONFIG] [-l LOGFILE] [-p PIDFILE] [options]\n"
            "  --delay MS        one-way delay (float)\n"
            "  --jitter MS       uniform jitter +-MS around the delay\n"
            "  --loss PCT        random loss percentage (seeded PRNG)\n"
            "  --seed N          PRNG seed (default: from time and pid, logged)\n"
            "  --pattern P       random | every:N | list:i,j,a-b (1-based counted packets)\n"
            "  --match M         all | data (default: all for random, data for patterns)\n"
            "  --reorder         let jitter reorder packets of a flow\n"
            "  --maxlen N        kernel queue length (default 65536)\n"
            "  --rt              SCHED_FIFO priority 10 (better timing under load)\n"
            "  --check           parse the configuration and exit\n"
            "signals: HUP reload config, USR1 log stats, TERM/INT release all and exit\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "queue", required_argument, 0, 'q' },  { "config", required_argument, 0, 'c' },
        { "log", required_argument, 0, 'l' },    { "pidfile", required_argument, 0, 'p' },
        { "delay", required_argument, 0, 'd' },  { "jitter", required_argument, 0, 'j' },
        { "loss", required_argument, 0, 'L' },   { "seed", required_argument, 0, 's' },
        { "pattern", required_argument, 0, 'P' }, { "match", required_argument, 0, 'm' },
        { "reorder", no_argument, 0, 'r' },      { "maxlen", required_argument, 0, 'M' },
        { "rt", no_argument, 0, 'R' },           { "check", no_argument, 0, 'C' },
        { "help", no_argument, 0, 'h' },         { 0, 0, 0, 0 }
    };
    const char *pidfile = NULL;
    unsigned long maxlen = 65536;
    int rt = 0, check = 0, c, fd;
    char err[512];
    static char buf[1 << 17];
    struct sigaction sa;

    while ((c = getopt_long(argc, argv, "q:c:l:p:h", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (c) {
        case 'q': {
            char *end;
            unsigned long q = strtoul(optarg, &end, 10);
            if (*end || q > 65535) {
                fprintf(stderr, "nfq-delay: bad queue number '%s'\n", optarg);
                return 2;
            }
            G.qnum = (uint16_t)q;
            break;
        }
        case 'c': G.config_path = optarg; break;
        case 'l': G.log_path = optarg; break;
        case 'p': pidfile = optarg; break;
        case 'd': key = "delay_ms"; break;
        case 'j': key = "jitter_ms"; break;
        case 'L': key = "loss_pct"; break;
        case 's': key = "seed"; break;
        case 'P': key = "pattern"; break;
        case 'm': key = "match"; break;
        case 'r': G.cfg.reorder = 1; break;
        case 'M': maxlen = strtoul(optarg, NULL, 10); break;
        case 'R': rt = 1; break;
        case 'C': check = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (key && set_key(&G.cfg, key, optarg, err, sizeof err) < 0) {
            fprintf(stderr, "nfq-delay: %s\n", err);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (G.config_path && load_config_file(&G.cfg, G.config_path, err, sizeof err) < 0) {
        fprintf(stderr, "nfq-delay: %s\n", err);
        return 2;
    }
    if (check)
        return 0;
    apply_config();

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Timer slack decides how late ppoll() wakes us; make it minimal. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (rt) {
        struct sched_param sp = { .sched_priority = 10 };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
            logf_("warning: SCHED_FIFO: %s", strerror(errno));
    }

    G.h = nfq_open();
    if (!G.h) {
        fprintf(stderr, "nfq-delay: nfq_open: %s (needs CAP_NET_ADMIN)\n", strerror(errno));
        return 1;
    }
    G.qh = nfq_create_queue(G.h, G.qnum, on_packet, NULL);
    if (!G.qh) {
        fprintf(stderr, "nfq-delay: cannot bind queue %u: %s (is another program bound to it?)\n",
                G.qnum, strerror(errno));
        nfq_close(G.h);
        return 1;
    }
    if (nfq_set_mode(G.qh, NFQNL_COPY_PACKET, 128) < 0) {
        fprintf(stderr, "nfq-delay: nfq_set_mode: %s\n", strerror(errno));
        return 1;
    }
    if (nfq_set_queue_maxlen(G.qh, (uint32_t)maxlen) < 0)
        logf_("warning: cannot set queue maxlen %lu", maxlen);
    if (nfq_set_queue_flags(G.qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN) < 0)
        logf_("warning: kernel refuses NFQA_CFG_F_FAIL_OPEN");
    fd = nfq_fd(G.h);
    nfnl_rcvbufsiz(nfq_nfnlh(G.h), 16 * 1024 * 1024);
    {
        int one = 1;
        /* A full socket buffer must not stop us: the kernel then fails open or
         * drops, and we keep going without the ENOBUFS error. */
        setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (!f) {
            fprintf(stderr, "nfq-delay: %s: %s\n", pidfile, strerror(errno));
            return 1;
        }
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    G.start_ns = now_ns();
    log_config("start");

    while (!sig_term) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        struct timespec ts, *tsp = NULL;
        uint64_t now = now_ns();
        int n;

        if (sig_hup) {
            struct config nc = { 0 };
            sig_hup = 0;
            nc.seed_given = 0;
            if (!G.config_path) {
                logf_("SIGHUP without a config file: ignored");
            } else if (load_config_file(&nc, G.config_path, err, sizeof err) < 0) {
                logf_("reload failed, keeping the old configuration: %s", err);
                config_free(&nc);
            } else {
                if (!nc.seed_given) {
                    nc.seed = G.cfg.seed;
                    nc.seed_given = 1;
                }
                log_stats("reload");
                memset(&G.st, 0, sizeof G.st);
                G.st.max_queue = G.heap.n;
                config_free(&G.cfg);
                G.cfg = nc;
                apply_config();
                /* Packets already held keep their due time. */
                log_config("reload");
            }
        }
        if (sig_usr1) {
            sig_usr1 = 0;
            log_stats("usr1");
        }

        release_due(now);
        if (G.heap.n) {
            uint64_t wait = G.heap.v[0].due > now ? G.heap.v[0].due - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ULL);
            ts.tv_nsec = (long)(wait % 1000000000ULL);
            tsp = &ts;
        }
        n = ppoll(&pfd, 1, tsp, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            logf_("ppoll: %s", strerror(errno));
            break;
        }
        if (n > 0 && (pfd.revents & POLLIN)) {
            /* Drain the socket, but let due packets out between batches. */
            for (int i = 0; i < 256; i++) {
                ssize_t r = recv(fd, buf, sizeof buf, 0);
                if (r < 0) {
                    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                        break;
                    G.st.recv_errors++;
                    break;
                }
                nfq_handle_packet(G.h, buf, (int)r);
                if ((i & 15) == 15)
                    release_due(now_ns());
            }
        }
    }

    /* Leave nothing held: release everything in due order. */
    while (G.heap.n) {
        struct held x = heap_pop(&G.heap);
        verdict(x.id, NF_ACCEPT);
    }
    log_stats("exit");
    nfq_destroy_queue(G.qh);
    nfq_close(G.h);
    if (pidfile)
        unlink(pidfile);
    config_free(&G.cfg);
    free(G.heap.v);
    return 0;
}
