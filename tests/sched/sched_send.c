/*
 * sched_send: a TLS client that sends the scheduler's test messages
 * (sched_wire.h) with one of three workloads, either through the send
 * scheduler or, as stock TLS does, straight into the socket.
 *
 *   sched_send --connect IP:PORT [--mode sched|stock] [--workload W]
 *              [--duration S] [--lowat BYTES] [--drops FILE] [--seed N]
 *              [--pacing-cap BYTES_PER_S] [--deadline-margin-ms MS] [--cc NAME]
 *              [--trace FILE] [--window-reserve SEGMENTS] [--probe-rtt-drain 0|1]
 *              [fig2c: --hp-interval-ms MS --hp-size B --bulk-size B (0: none)]
 *              [deadline: --deadline-ms MS --frame-ms MS --frame-msgs N
 *                         --msg-size B --gop N --no-drop]
 *
 * Workloads:
 *   fig2c     Minion Figure 2(c): a saturating low-priority bulk stream and a
 *             high-priority message every --hp-interval-ms.
 *   deadline  video-like frames: every --frame-ms, --frame-msgs messages,
 *             each due --deadline-ms after the frame was made; a message
 *             depends on the same slice of the previous frame, except in the
 *             first frame of every --gop. --no-drop submits the same without
 *             deadlines (the queue then only grows).
 *   mix       random sizes (up to one full record), priorities, sub-streams,
 *             squash tags, deadlines and dependencies; oversize messages are
 *             refused (checked).
 *
 * At the end it drains, sends close_notify and prints one line
 * "summary submitted=N written=W dropped=D refused=R squashed=S deadline=L
 * dependency=P ..." (with the ProbeRTT drain counters); --drops gets the app id of every dropped message, one a
 * line. App ids are the scheduler's message ids.
 */
#define _GNU_SOURCE /* ppoll */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "sched_wire.h"
#include "test_rng.h"

#define MS UINT64_C(1000000)

static void die(const char *what)
{
    fprintf(stderr, "sched_send: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(2);
}

typedef struct {
    const char *connect_to, *mode, *workload, *drops_path;
    double duration;
    size_t lowat;
    unsigned seed;
    uint64_t hp_interval_ns;
    size_t hp_size, bulk_size;
    uint64_t deadline_ns, frame_ns;
    int frame_msgs, gop, no_drop;
    size_t msg_size;
    uint64_t pacing_cap; /* bytes/s, 0: none */
    uint64_t margin_ns;
    const char *cc; /* TCP_CONGESTION, NULL: the system's */
    const char *trace_path; /* --trace: TCP state every 2 ms, for diagnosis */
    unsigned window_reserve; /* --window-reserve: window_reserve_segs */
    int probe_rtt_drain;     /* --probe-rtt-drain: -1 the library's default */
} options;

static UTLS_SCHED *trace_sched; /* its drain counters go into the trace */

/* trace_tcp appends one line "t NS ca_state cwnd unacked notsent retransmits
 * total_retrans pacing_rate delivery_rate srtt_us bbr_min_rtt_us drains
 * next_probe_rtt_ns draining" to f, at most every 2 ms (drains: drains
 * started so far; draining: 1 while one is under way): the benchmark joins it
 * with the urgent messages' latencies to say where a slow one waited (loss
 * recovery, a small window, unsent bytes) and lines up predicted drains with
 * the ProbeRTT entries. */
static void trace_tcp(FILE *f, int fd, uint64_t now)
{
    static uint64_t last;
    UTLS_SCHED_STATS st;
    int draining = 0;
    struct tcp_info ti; /* glibc's: for tcpi_ca_state */
    socklen_t len = sizeof(ti);
    UTLS_TCP_INFO u;

    if (f == NULL || now - last < 2000000u)
        return;
    last = now;
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || !UTLS_tcp_get_info(fd, &u))
        return;
    memset(&st, 0, sizeof(st));
    if (trace_sched != NULL) {
        UTLS_sched_get_stats(trace_sched, &st);
        draining = st.probe_rtt_drains
                   > st.probe_rtt_drains_wasted + st.probe_rtt_predicted;
    }
    fprintf(f, "t %llu %u %u %u %llu %u %llu %llu %llu %u %u %llu %llu %d\n",
            (unsigned long long)now, ti.tcpi_ca_state, u.cwnd_segs, u.unacked_segs,
            (unsigned long long)u.notsent_bytes, ti.tcpi_retransmits,
            (unsigned long long)u.total_retrans, (unsigned long long)u.pacing_rate,
            (unsigned long long)u.delivery_rate, u.srtt_us, u.bbr_min_rtt_us,
            (unsigned long long)st.probe_rtt_drains, (unsigned long long)st.probe_rtt_next_ns,
            draining);
}

static FILE *trace_file;

static uint64_t rnd_state = 88172645463325252ull;

static uint64_t rnd(void)
{
    return test_xorshift64(&rnd_state);
}

static int connect_to(const char *spec, const char *cc)
{
    struct sockaddr_in sa;
    char host[64];
    const char *colon = strrchr(spec, ':');
    int fd, i, one = 1;

    if (colon == NULL || (size_t)(colon - spec) >= sizeof(host))
        die("--connect IP:PORT");
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        die("--connect: not an IPv4 address");
    for (i = 0; i < 200; i++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (cc != NULL && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0)
            die("setsockopt(TCP_CONGESTION)");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            /* Nagle would hold a small urgent message behind unacknowledged
             * data: real-time senders turn it off. */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
        close(fd);
        usleep(50000);
    }
    die("cannot connect");
    return -1;
}

static void wait_fd(int fd, short events, uint64_t until_ns)
{
    struct pollfd p = {fd, events, 0};
    uint64_t now = sw_now_ns();
    struct timespec ts = {0, 0};

    if (until_ns > now) {
        uint64_t d = until_ns - now;

        ts.tv_sec = (time_t)(d / 1000000000u);
        ts.tv_nsec = (long)(d % 1000000000u);
    }
    if (ppoll(&p, events ? 1 : 0, &ts, NULL) < 0 && errno != EINTR)
        die("ppoll");
}

/* ---------------------------------------------------------------- sched */

typedef struct {
    options *o;
    SSL *ssl;
    int fd;
    UTLS_SCHED *sch;
    FILE *drops;
    uint64_t submitted, refused, dropped;
    uint64_t last_id;
    uint64_t frame_no;
    uint64_t *lane_last; /* deadline: last id of each slice */
    uint64_t recent[64];
    size_t num_recent;
    uint8_t msg[SW_MAX];
} sender;

/* submit builds message app id last_id + 1 and submits it. Returns its id,
 * or 0 if refused. */
static uint64_t submit(sender *s, uint8_t kind, size_t len, const UTLS_SCHED_MSG *m,
                       uint64_t gen_ns)
{
    sw_hdr h;
    uint64_t id = 0;

    memset(&h, 0, sizeof(h));
    h.len = (uint32_t)len;
    h.id = s->last_id + 1;
    h.gen_ns = gen_ns;
    h.deadline_ns = m->deadline_ns; /* also without the flag: the receiver judges lateness */
    h.dep = (m->flags & UTLS_SCHED_DEPENDS) ? m->depends_on : 0;
    h.kind = kind;
    h.substream = m->substream;
    h.priority = m->priority;
    if (!sw_build(s->msg, &h))
        die("bad message length");
    if (!UTLS_sched_submit(s->sch, s->msg, len, m, &id)) {
        unsigned long e = ERR_peek_last_error();

        if (ERR_GET_LIB(e) != UTLS_get_lib() || ERR_GET_REASON(e) != UTLS_R_SCHED_QUEUE_FULL)
            die("UTLS_sched_submit");
        ERR_clear_error();
        s->refused++;
        return 0;
    }
    if (id != h.id)
        die("scheduler ids do not count from 1");
    s->last_id = id;
    s->submitted++;
    return id;
}

static void collect_drops(sender *s)
{
    UTLS_SCHED_DROP d;

    while (UTLS_sched_next_drop(s->sch, &d)) {
        s->dropped++;
        if (s->drops != NULL)
            fprintf(s->drops, "%llu %d\n", (unsigned long long)d.id, (int)d.reason);
    }
}

static void gen_mix(sender *s, uint64_t now)
{
    UTLS_SCHED_MSG m;
    size_t len;
    uint64_t id;
    static uint8_t big[SW_MAX + 1];

    memset(&m, 0, sizeof(m));
    m.priority = (uint8_t)(rnd() % 4);
    m.substream = (uint8_t)(rnd() % 4);
    len = SW_HDR_LEN + (size_t)(rnd() % 4 == 0 ? rnd() % (SW_MAX - SW_HDR_LEN + 1)
                                                : rnd() % 1500);
    if (rnd() % 5 == 0)
        m.squash_tag = 1 + rnd() % 3;
    if (rnd() % 5 == 0) {
        m.flags |= UTLS_SCHED_DEADLINE;
        m.deadline_ns = now + (rnd() % 300) * MS;
    }
    if (rnd() % 5 == 0 && s->num_recent > 0) {
        m.flags |= UTLS_SCHED_DEPENDS;
        m.depends_on = s->recent[rnd() % s->num_recent];
    }
    id = submit(s, SW_MIX, len, &m, now);
    if (id != 0) {
        s->recent[s->num_recent < 64 ? s->num_recent++ : rnd() % 64] = id;
    }
    if (rnd() % 50 == 0) {
        /* Never split: one byte over a record is refused, and nothing else
         * changes. */
        memset(&m, 0, sizeof(m));
        if (UTLS_sched_submit(s->sch, big, UTLS_sched_max_message(s->sch) + 1, &m, NULL))
            die("an oversize message was accepted");
        if (ERR_GET_REASON(ERR_peek_last_error()) != UTLS_R_SCHED_MESSAGE_TOO_LARGE)
            die("oversize refused with the wrong reason");
        ERR_clear_error();
    }
}

static void gen_frame(sender *s, uint64_t now)
{
    options *o = s->o;
    int j, key = s->frame_no % (uint64_t)o->gop == 0;

    for (j = 0; j < o->frame_msgs; j++) {
        UTLS_SCHED_MSG m;
        uint64_t id;

        memset(&m, 0, sizeof(m));
        m.priority = 1;
        m.substream = 2;
        if (!o->no_drop) {
            m.flags |= UTLS_SCHED_DEADLINE;
        }
        m.deadline_ns = now + o->deadline_ns; /* carried in the message either way */
        if (!key && s->lane_last[j] != 0) {
            m.flags |= UTLS_SCHED_DEPENDS;
            m.depends_on = s->lane_last[j];
        }
        id = submit(s, SW_FRAME, o->msg_size, &m, now);
        /* A refused message breaks its lane until the next key frame. */
        s->lane_last[j] = id;
        if (id == 0 && !key) {
            s->lane_last[j] = 0;
        }
    }
    s->frame_no++;
}

static void run_sched(options *o, SSL *ssl, int fd, FILE *drops)
{
    sender s;
    UTLS_SCHED_CONFIG cfg;
    uint64_t start = sw_now_ns(), end = start + (uint64_t)(o->duration * 1e9), now;
    uint64_t next_hp = start + o->hp_interval_ns, next_frame = start, next_mix = start;
    UTLS_SCHED_STATS st;
    UTLS_SCHED_RESULT r = UTLS_SCHED_IDLE;
    int fig2c = strcmp(o->workload, "fig2c") == 0, deadline = strcmp(o->workload, "deadline") == 0;

    memset(&s, 0, sizeof(s));
    s.o = o;
    s.ssl = ssl;
    s.fd = fd;
    s.drops = drops;
    s.lane_last = calloc((size_t)o->frame_msgs + 1, sizeof(uint64_t));
    UTLS_sched_config_default(&cfg);
    if (o->lowat != 0)
        cfg.notsent_lowat = o->lowat;
    cfg.deadline_margin_ns = o->margin_ns;
    cfg.window_reserve_segs = o->window_reserve;
    if (o->probe_rtt_drain >= 0)
        cfg.probe_rtt_drain = (uint32_t)o->probe_rtt_drain;
    if (deadline && o->no_drop)
        cfg.max_bytes = 256u << 20; /* let the backlog show */
    if ((s.sch = UTLS_sched_new(ssl, &cfg)) == NULL)
        die("UTLS_sched_new");
    trace_sched = s.sch;

    while ((now = sw_now_ns()) < end) {
        uint64_t wake = end;
        UTLS_SCHED_STATS qs;

        if (fig2c) {
            UTLS_sched_get_stats(s.sch, &qs);
            while (o->bulk_size != 0 && qs.queued_messages < 2) {
                UTLS_SCHED_MSG m;

                memset(&m, 0, sizeof(m));
                submit(&s, SW_BULK, o->bulk_size, &m, now);
                UTLS_sched_get_stats(s.sch, &qs);
            }
            if (now >= next_hp) {
                UTLS_SCHED_MSG m;

                memset(&m, 0, sizeof(m));
                m.priority = 1;
                submit(&s, SW_URGENT, o->hp_size, &m, now);
                next_hp += o->hp_interval_ns;
            }
            wake = next_hp;
        } else if (deadline) {
            if (now >= next_frame) {
                gen_frame(&s, now);
                next_frame += o->frame_ns;
            }
            wake = next_frame;
        } else {
            if (now >= next_mix) {
                gen_mix(&s, now);
                next_mix += 2 * MS;
            }
            wake = next_mix;
        }
        r = UTLS_sched_flush(s.sch, NULL);
        trace_tcp(trace_file, fd, sw_now_ns());
        collect_drops(&s);
        if (r == UTLS_SCHED_ERROR)
            die("UTLS_sched_flush");
        if (fig2c && o->bulk_size != 0 && r == UTLS_SCHED_IDLE) {
            continue; /* the bulk source saturates: refill at once */
        }
        if (deadline || !fig2c) {
            /* Wake for deadlines of waiting messages too. */
            if (wake > now + 5 * MS)
                wake = now + 5 * MS;
        }
        if (r == UTLS_SCHED_WANT_TIMER && wake > now + UTLS_SCHED_WINDOW_RECHECK_MS * MS)
            wake = now + UTLS_SCHED_WINDOW_RECHECK_MS * MS; /* no event opens the window */
        wait_fd(fd, r == UTLS_SCHED_WANT_WRITE ? POLLOUT : r == UTLS_SCHED_WANT_READ ? POLLIN : 0,
                wake < end ? wake : end);
    }
    r = UTLS_sched_drain(s.sch, 120000);
    collect_drops(&s);
    if (r != UTLS_SCHED_IDLE)
        die("could not drain the scheduler");
    UTLS_sched_get_stats(s.sch, &st);
    printf("summary submitted=%llu written=%llu dropped=%llu refused=%llu squashed=%llu "
           "deadline=%llu dependency=%llu overtaken=%llu lowat_waits=%llu window_waits=%llu "
           "probe_rtt_seen=%llu probe_rtt_predicted=%llu probe_rtt_drains=%llu "
           "probe_rtt_drains_wasted=%llu probe_rtt_drain_waits=%llu probe_rtt_drain_ms=%llu "
           "probe_rtt_held_bytes=%llu probe_rtt_interval_ms=%llu\n",
           (unsigned long long)s.submitted, (unsigned long long)st.written,
           (unsigned long long)s.dropped, (unsigned long long)s.refused,
           (unsigned long long)st.dropped_squashed, (unsigned long long)st.dropped_deadline,
           (unsigned long long)st.dropped_dependency, (unsigned long long)st.overtaken,
           (unsigned long long)st.lowat_waits, (unsigned long long)st.window_waits,
           (unsigned long long)st.probe_rtt_seen, (unsigned long long)st.probe_rtt_predicted,
           (unsigned long long)st.probe_rtt_drains,
           (unsigned long long)st.probe_rtt_drains_wasted,
           (unsigned long long)st.probe_rtt_drain_waits,
           (unsigned long long)(st.probe_rtt_drain_ns / MS),
           (unsigned long long)st.probe_rtt_held_bytes,
           (unsigned long long)(st.probe_rtt_interval_ns / MS));
    if (st.written + s.dropped != s.submitted)
        die("written + dropped != submitted");
    trace_sched = NULL;
    UTLS_sched_free(s.sch);
    free(s.lane_last);
}

/* ---------------------------------------------------------------- stock */

/* Stock TLS: every message goes into the socket as soon as it is made. */
static void run_stock(options *o, SSL *ssl, int fd)
{
    static uint8_t bulk[SW_MAX], urgent[SW_MAX];
    uint64_t start = sw_now_ns(), end = start + (uint64_t)(o->duration * 1e9), now;
    uint64_t next_hp = start + o->hp_interval_ns, id = 0, written = 0;
    const uint8_t *cur = NULL; /* the message SSL_write has not finished */
    size_t cur_len = 0;
    int urgent_waiting = 0;
    sw_hdr h;

    if (strcmp(o->workload, "fig2c") != 0)
        die("--mode stock runs --workload fig2c only");
    while ((now = sw_now_ns()) < end) {
        short ev = 0;

        if (now >= next_hp && !urgent_waiting) {
            memset(&h, 0, sizeof(h));
            h.len = (uint32_t)o->hp_size;
            h.id = ++id;
            h.gen_ns = now;
            h.kind = SW_URGENT;
            h.priority = 1;
            sw_build(urgent, &h);
            urgent_waiting = 1;
            next_hp += o->hp_interval_ns;
        }
        for (;;) {
            size_t n;

            if (cur == NULL) {
                if (urgent_waiting) {
                    cur = urgent;
                    cur_len = o->hp_size;
                    urgent_waiting = 0;
                } else if (o->bulk_size == 0) {
                    break;
                } else {
                    memset(&h, 0, sizeof(h));
                    h.len = (uint32_t)o->bulk_size;
                    h.id = ++id;
                    h.gen_ns = sw_now_ns();
                    h.kind = SW_BULK;
                    sw_build(bulk, &h);
                    cur = bulk;
                    cur_len = o->bulk_size;
                }
            }
            if (SSL_write_ex(ssl, cur, cur_len, &n)) {
                cur = NULL;
                written++;
                if (sw_now_ns() >= next_hp)
                    break;
                continue;
            }
            if (SSL_get_error(ssl, 0) == SSL_ERROR_WANT_WRITE) {
                ev = POLLOUT;
                break;
            }
            die("SSL_write_ex");
        }
        trace_tcp(trace_file, fd, sw_now_ns());
        wait_fd(fd, ev, next_hp < end ? next_hp : end);
    }
    /* Finish the message in progress; the kernel sends the rest. */
    while (cur != NULL) {
        size_t n;

        if (SSL_write_ex(ssl, cur, cur_len, &n)) {
            cur = NULL;
            written++;
        } else if (SSL_get_error(ssl, 0) == SSL_ERROR_WANT_WRITE) {
            wait_fd(fd, POLLOUT, sw_now_ns() + 100 * MS);
        } else {
            die("SSL_write_ex");
        }
    }
    printf("summary submitted=%llu written=%llu dropped=0 refused=0 squashed=0 deadline=0 "
           "dependency=0 overtaken=0 lowat_waits=0\n",
           (unsigned long long)written, (unsigned long long)written);
}

int main(int argc, char **argv)
{
    options o;
    int i, fd, flags;
    SSL_CTX *ctx;
    SSL *ssl;
    FILE *drops = NULL;

    memset(&o, 0, sizeof(o));
    o.mode = "sched";
    o.workload = "fig2c";
    o.duration = 5;
    o.seed = 1;
    o.hp_interval_ns = 100 * MS;
    o.hp_size = 200;
    o.bulk_size = 4096;
    o.deadline_ns = 200 * MS;
    o.frame_ns = 20 * MS;
    o.frame_msgs = 30;
    o.gop = 10;
    o.msg_size = 1000;
    o.probe_rtt_drain = -1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--no-drop") == 0) {
            o.no_drop = 1;
            continue;
        }
        if (v == NULL)
            die("missing value (see the comment at the top of sched_send.c)");
        i++;
        if (strcmp(a, "--connect") == 0)
            o.connect_to = v;
        else if (strcmp(a, "--mode") == 0)
            o.mode = v;
        else if (strcmp(a, "--workload") == 0)
            o.workload = v;
        else if (strcmp(a, "--duration") == 0)
            o.duration = atof(v);
        else if (strcmp(a, "--lowat") == 0)
            o.lowat = (size_t)atol(v);
        else if (strcmp(a, "--drops") == 0)
            o.drops_path = v;
        else if (strcmp(a, "--seed") == 0)
            o.seed = (unsigned)atoi(v);
        else if (strcmp(a, "--hp-interval-ms") == 0)
            o.hp_interval_ns = (uint64_t)(atof(v) * MS);
        else if (strcmp(a, "--hp-size") == 0)
            o.hp_size = (size_t)atol(v);
        else if (strcmp(a, "--bulk-size") == 0)
            o.bulk_size = (size_t)atol(v);
        else if (strcmp(a, "--deadline-ms") == 0)
            o.deadline_ns = (uint64_t)(atof(v) * MS);
        else if (strcmp(a, "--frame-ms") == 0)
            o.frame_ns = (uint64_t)(atof(v) * MS);
        else if (strcmp(a, "--frame-msgs") == 0)
            o.frame_msgs = atoi(v);
        else if (strcmp(a, "--msg-size") == 0)
            o.msg_size = (size_t)atol(v);
        else if (strcmp(a, "--window-reserve") == 0)
            o.window_reserve = (unsigned)atoi(v);
        else if (strcmp(a, "--probe-rtt-drain") == 0)
            o.probe_rtt_drain = atoi(v);
        else if (strcmp(a, "--trace") == 0)
            o.trace_path = v;
        else if (strcmp(a, "--cc") == 0)
            o.cc = v;
        else if (strcmp(a, "--deadline-margin-ms") == 0)
            o.margin_ns = (uint64_t)(atof(v) * MS);
        else if (strcmp(a, "--pacing-cap") == 0)
            o.pacing_cap = (uint64_t)atoll(v);
        else if (strcmp(a, "--gop") == 0)
            o.gop = atoi(v);
        else
            die("unknown option (see the comment at the top of sched_send.c)");
    }
    if (o.connect_to == NULL)
        die("--connect IP:PORT is required");
    if (o.hp_size < SW_HDR_LEN || (o.bulk_size != 0 && o.bulk_size < SW_HDR_LEN)
        || o.msg_size < SW_HDR_LEN
        || o.gop < 1 || o.frame_msgs < 1)
        die("message sizes must be at least 44 bytes");
    rnd_state ^= (uint64_t)o.seed * 0x9E3779B97F4A7C15ull;
    signal(SIGPIPE, SIG_IGN);
    if (o.drops_path != NULL && (drops = fopen(o.drops_path, "w")) == NULL)
        die("cannot open --drops");

    if (o.trace_path != NULL && (trace_file = fopen(o.trace_path, "w")) == NULL)
        die("cannot open --trace");
    fd = connect_to(o.connect_to, o.cc);
    if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL || (ssl = SSL_new(ctx)) == NULL)
        die("SSL_new");
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1)
        die("TLS handshake");
    /* Safe control: a pacing cap below the bottleneck keeps the queue in this
     * host, where the scheduler decides, instead of in the router. */
    if (o.pacing_cap != 0 && !UTLS_tcp_set_max_pacing_rate(fd, o.pacing_cap))
        die("UTLS_tcp_set_max_pacing_rate");
    flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    if (strcmp(o.mode, "sched") == 0)
        run_sched(&o, ssl, fd, drops);
    else if (strcmp(o.mode, "stock") == 0)
        run_stock(&o, ssl, fd);
    else
        die("--mode sched or stock");
    /* close_notify, then let the kernel deliver what it holds. */
    for (i = 0; i < 1000; i++) {
        int r = SSL_shutdown(ssl);

        if (r >= 0)
            break;
        if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_WRITE)
            break;
        wait_fd(fd, POLLOUT, sw_now_ns() + 100 * MS);
    }
    fcntl(fd, F_SETFL, flags);
    shutdown(fd, SHUT_WR);
    {
        /* Wait for the receiver to close, so that the process exits only
         * after everything arrived (it reads NewSessionTickets and EOF). */
        char b[4096];

        while (read(fd, b, sizeof(b)) > 0) {
        }
    }
    if (drops != NULL)
        fclose(drops);
    if (trace_file != NULL)
        fclose(trace_file);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}
