/* one concept: the process-wide capture, its flow table and its lock (the table,
 * the inboxes and the ring are drained under one lock, so they live in one file). */
/*
 * The process-wide tap (the "hub").
 *
 * One process holds one capture whatever the number of tapped connections:
 *
 *  - the data socket, an AF_PACKET socket with one TPACKET_V2 ring
 *    (UTLS_TAP_FRAME_NR frames of UTLS_TAP_FRAME_SIZE = 16 MiB), whose classic BPF
 *    filter accepts incoming TCP segments to the tapped local ports: the
 *    listeners' ports, and the local ports of connections tapped one by one.
 *    A packet costs the filter a binary search over those ports, never a
 *    test per connection, and a packet to any other port is rejected there;
 *  - the ISNs' source: the kernel's own record of each connection's ISNs
 *    at establishment (a sock_ops BPF program, tap_sockops.c), read at
 *    attach by the socket's cookie; or, where that program cannot run, the
 *    control socket, a plain AF_PACKET socket whose filter keeps the
 *    headers (UTLS_TAP_CTL_SNAPLEN bytes) of the handshake and teardown
 *    segments this host sends from those ports: the SYN-ACK our kernel sends
 *    for a listener, our SYN and the ACK that completes a handshake for a
 *    connecting socket, FIN and RST. With the BPF record the control socket
 *    stays unbound (the kernel clones no sent packet for it);
 *  - the flow table, a hash table keyed by 4-tuple (seeded hash, chained),
 *    that gives each captured segment to the one connection it belongs to.
 *    A segment for a 4-tuple no tap BIO of this process holds is dropped
 *    there (another process's connection in a prefork server, a connection
 *    not tapped).
 *
 * Trust only what the local kernel says. With the BPF record the ISNs are
 * the kernel's own rcv_nxt - 1 and snd_una - 1 at establishment. Otherwise
 * the peer's ISN is the
 * acknowledgement number of the SYN-ACK our kernel sent (minus 1), or of the
 * ACK with which it completed a handshake our kernel started: a SYN an
 * attacker sends is not answered by our kernel when its checksum, window or
 * 4-tuple is wrong, so it moves nothing. Only in the any-port watch mode
 * (preload, UTLS_MODE=tap), where our ACK is not captured, does a connecting
 * socket take the ISN from the incoming SYN-ACK that acknowledges our own
 * SYN (whose ISN an off-path attacker does not know) with a right checksum;
 * two different such SYN-ACKs make the flow ambiguous, and it runs in order.
 *
 * Readers drain the ring under the hub's lock, into per-connection inboxes
 * (bounded: UTLS_TAP_INBOX_MAX_BYTES each, UTLS_TAP_INBOX_TOTAL_MAX_BYTES
 * in all); each tap BIO moves its own inbox into its own segment store, so
 * no thread ever touches another connection's store. The sockets are opened
 * once, while the process may still be privileged (UTLS_tap_open), and
 * serve every later connection after it drops root: replacing a socket's
 * filter needs no privilege. A child of fork() reopens its own capture at
 * once (it may still hold the privilege then), keeping the handshakes whose
 * ISN its parent knew: prefork workers each see only their own connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/utls.h>
#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/tap_local.h"
#include "bio/tap_validate.h"

/* The table's buckets: a power of two, as many as flows at most. */
#define HUB_BUCKETS 65536u

/* How often a reader that finds its own segments also reads the control
 * socket (teardowns of connections no BIO took, handshakes): every this
 * many nanoseconds at most, so that a read costs no extra syscall. */
#define HUB_CTL_INTERVAL_NS 50000000u

enum { FLOW_SYN_SENT = 1, FLOW_PEER_SYNACK, FLOW_KNOWN, FLOW_AMBIGUOUS };

typedef struct tap_flow_st tap_flow;

struct tap_flow_st {
    tap_key key;
    uint32_t hash;
    int state;
    uint32_t local_isn, peer_isn;
    int local_connected;   /* our kernel sent the SYN (else the SYN-ACK) */
    tap_ctx *conn;         /* the tap BIO that took the flow, or NULL */
    int fd;                /* its socket */
    tap_flow *next;        /* bucket chain */
    tap_flow *older, *newer; /* the unattached flows, oldest first */
    tap_pkt *in_head, *in_tail;
    size_t in_bytes;
    int in_pending;        /* read without the lock: a hint */
    int in_any;            /* the inbox is not empty (atomic: utls_tap_hub_idle) */
    uint32_t read_seq;     /* the connection's next socket byte (atomic) */
    int read_seq_set;      /* (atomic) */
    tap_flow *ready_next;
    int on_ready;
};

typedef struct {
    uint16_t port;
    uint32_t n_listen, n_hs, n_data;
} hub_port;

static pthread_mutex_t hub_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    int open;
    int dfd, cfd;
    unsigned char *ring;      /* (atomic: utls_tap_hub_idle reads it unlocked) */
    unsigned int cur_frame;   /* (atomic, likewise) */
    unsigned char *copy;      /* a whole copy of a segment larger than a frame */
    int watch;
    int isn_sockops;          /* the ISNs come from the sock_ops program */
    uint64_t gen;             /* changes when a child of fork() starts afresh */
    uint64_t seed[2];
    hub_port ports[UTLS_TAP_MAX_PORTS];
    size_t num_ports;
    tap_flow **buckets;
    size_t num_flows, num_attached, num_unattached;
    tap_flow *oldest, *newest; /* unattached */
    size_t inbox_total;
    tap_flow *ready;
    int64_t real_to_mono_ns;
    uint64_t last_ctl_ns;
    int atfork_done;
    UTLS_TAP_GLOBAL_STATS st;
} hub;

/* --- The flow table -------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* key_hash: a hash keyed by a per-process random seed, so that a peer that
 * chooses its addresses and ports cannot aim them at one bucket. */
static uint32_t key_hash(const tap_key *k)
{
    uint64_t h = hub.seed[0] ^ ((uint64_t)k->lport << 16 | k->pport) ^ ((uint64_t)k->family << 40);
    size_t alen = k->family == AF_INET ? 4 : 16, i;
    uint64_t w;

    for (i = 0; i < alen; i += 4) {
        memcpy(&w, k->peer + i, 4);
        h = mix64(h ^ (w & 0xffffffffu) ^ hub.seed[1]);
        memcpy(&w, k->local + i, 4);
        h = mix64(h + (w & 0xffffffffu));
    }
    return (uint32_t)mix64(h);
}

static int key_equal(const tap_key *a, const tap_key *b)
{
    size_t alen = a->family == AF_INET ? 4 : 16;

    return a->family == b->family && a->lport == b->lport && a->pport == b->pport
        && memcmp(a->local, b->local, alen) == 0 && memcmp(a->peer, b->peer, alen) == 0;
}

static tap_flow *flow_find(const tap_key *k)
{
    uint32_t h = key_hash(k);
    tap_flow *f;

    for (f = hub.buckets[h & (HUB_BUCKETS - 1)]; f != NULL; f = f->next)
        if (f->hash == h && key_equal(&f->key, k))
            return f;
    return NULL;
}

static void unattached_unlink(tap_flow *f)
{
    if (f->older != NULL)
        f->older->newer = f->newer;
    else if (hub.oldest == f)
        hub.oldest = f->newer;
    if (f->newer != NULL)
        f->newer->older = f->older;
    else if (hub.newest == f)
        hub.newest = f->older;
    f->older = f->newer = NULL;
    hub.num_unattached--;
}

static void unattached_append(tap_flow *f)
{
    f->older = hub.newest;
    f->newer = NULL;
    if (hub.newest != NULL)
        hub.newest->newer = f;
    else
        hub.oldest = f;
    hub.newest = f;
    hub.num_unattached++;
}

static void inbox_clear(tap_flow *f)
{
    tap_pkt *p, *n;

    for (p = f->in_head; p != NULL; p = n) {
        n = p->next;
        OPENSSL_free(p);
    }
    hub.inbox_total -= f->in_bytes;
    f->in_head = f->in_tail = NULL;
    f->in_bytes = 0;
    f->in_pending = 0;
    __atomic_store_n(&f->in_any, 0, __ATOMIC_RELEASE);
}

static void ready_unlink(tap_flow *f)
{
    tap_flow **p;

    if (!f->on_ready)
        return;
    for (p = &hub.ready; *p != NULL; p = &(*p)->ready_next) {
        if (*p == f) {
            *p = f->ready_next;
            break;
        }
    }
    f->on_ready = 0;
    f->ready_next = NULL;
}

static void flow_remove(tap_flow *f)
{
    tap_flow **p;

    for (p = &hub.buckets[f->hash & (HUB_BUCKETS - 1)]; *p != NULL; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    if (f->conn == NULL)
        unattached_unlink(f);
    else
        hub.num_attached--;
    inbox_clear(f);
    ready_unlink(f);
    hub.num_flows--;
    OPENSSL_free(f);
}

/* flow_get returns the flow of |k|, made (unattached) if there is none;
 * NULL when the table is full of attached flows or memory runs out. */
static tap_flow *flow_get(const tap_key *k)
{
    tap_flow *f = flow_find(k);

    if (f != NULL)
        return f;
    if (hub.num_unattached >= UTLS_TAP_MAX_UNATTACHED
        || (hub.num_flows >= UTLS_TAP_MAX_FLOWS && hub.oldest != NULL)) {
        hub.st.evicted++;
        flow_remove(hub.oldest);
    }
    if (hub.num_flows >= UTLS_TAP_MAX_FLOWS || (f = OPENSSL_zalloc(sizeof(*f))) == NULL)
        return NULL;
    f->key = *k;
    f->hash = key_hash(k);
    f->fd = -1;
    f->next = hub.buckets[f->hash & (HUB_BUCKETS - 1)];
    hub.buckets[f->hash & (HUB_BUCKETS - 1)] = f;
    hub.num_flows++;
    unattached_append(f);
    return f;
}

/* --- Ports and filters ------------------------------------------------------ */

static int hub_refilter(void)
{
    uint16_t data[UTLS_TAP_MAX_PORTS], ctl[UTLS_TAP_MAX_PORTS], hs[UTLS_TAP_MAX_PORTS];
    tap_ports p;
    size_t i;

    memset(&p, 0, sizeof(p));
    for (i = 0; i < hub.num_ports; i++) {
        const hub_port *q = &hub.ports[i];

        if (q->n_listen + q->n_data > 0)
            data[p.num_data++] = q->port;
        if (q->n_listen + q->n_data + q->n_hs > 0)
            ctl[p.num_ctl++] = q->port;
        if (q->n_hs > 0)
            hs[p.num_hs++] = q->port;
    }
    p.data = data;
    p.ctl = ctl;
    p.hs = hs;
    p.watch = hub.watch;
    hub.st.filter_ports = p.num_ctl;
    hub.st.filter_rebuilds++;
    return utls_tap_set_filters(hub.dfd, hub.cfd, &p);
}

/* port_change adds |delta| (+1 or -1) to one of |port|'s counts (which: 0
 * listen, 1 handshake, 2 data) and rebuilds the filters when the port
 * enters or leaves a set. Returns 1, or 0 with an error raised. */
static int port_change(uint16_t port, int which, int delta)
{
    size_t i, j;
    hub_port *q = NULL, before;
    uint32_t *n;

    for (i = 0; i < hub.num_ports && hub.ports[i].port < port; i++)
        continue;
    if (i < hub.num_ports && hub.ports[i].port == port) {
        q = &hub.ports[i];
    } else {
        if (delta < 0)
            return 1;
        if (hub.num_ports >= UTLS_TAP_MAX_PORTS) {
            utls_raise(UTLS_R_TAP_SYSCALL, "more than %u tapped local ports", UTLS_TAP_MAX_PORTS);
            return 0;
        }
        memmove(&hub.ports[i + 1], &hub.ports[i], (hub.num_ports - i) * sizeof(hub.ports[0]));
        hub.num_ports++;
        q = &hub.ports[i];
        memset(q, 0, sizeof(*q));
        q->port = port;
    }
    before = *q;
    n = which == 0 ? &q->n_listen : which == 1 ? &q->n_hs : &q->n_data;
    if (delta < 0 && *n == 0)
        return 1;
    *n = (uint32_t)((int64_t)*n + delta);
    if ((before.n_listen + before.n_data > 0) != (q->n_listen + q->n_data > 0)
        || (before.n_hs > 0) != (q->n_hs > 0)
        || (before.n_listen + before.n_data + before.n_hs > 0)
               != (q->n_listen + q->n_data + q->n_hs > 0)) {
        if (q->n_listen + q->n_data + q->n_hs == 0) {
            for (j = i; j + 1 < hub.num_ports; j++)
                hub.ports[j] = hub.ports[j + 1];
            hub.num_ports--;
        }
        if (!hub_refilter())
            return 0;
    }
    return 1;
}

/* --- Draining ----------------------------------------------------------------- */

/* ctl_process: a handshake or teardown segment this host sent (|outgoing|)
 * or, in watch mode, an incoming SYN-ACK. */
static void ctl_process(const tap_segment *s, int outgoing, unsigned int status)
{
    tap_flow *f;

    hub.st.control_packets++;
    if (outgoing && (s->flags & (TCP_FLAG_RST | TCP_FLAG_FIN)) != 0) {
        /* Our kernel ends the connection: a flow no BIO took is done. */
        if ((f = flow_find(&s->key)) != NULL && f->conn == NULL)
            flow_remove(f);
        return;
    }
    if (outgoing && (s->flags & TCP_FLAG_SYN) != 0) {
        if ((f = flow_get(&s->key)) == NULL || f->conn != NULL)
            return;
        if ((s->flags & TCP_FLAG_ACK) != 0) {
            /* Our SYN-ACK acknowledges the SYN our kernel accepted. */
            f->peer_isn = s->ack - 1;
            f->local_isn = s->seq;
            f->local_connected = 0;
            f->state = FLOW_KNOWN;
            hub.st.isn_from_kernel++;
        } else {
            f->local_isn = s->seq;
            f->local_connected = 1;
            f->state = FLOW_SYN_SENT;
        }
        return;
    }
    if (outgoing) {
        /* The ACK that completes a handshake our kernel started. */
        if ((f = flow_find(&s->key)) != NULL && f->conn == NULL
            && (s->flags & TCP_FLAG_ACK) != 0
            && (f->state == FLOW_SYN_SENT || f->state == FLOW_PEER_SYNACK
                || f->state == FLOW_AMBIGUOUS)) {
            f->peer_isn = s->ack - 1;
            f->state = FLOW_KNOWN;
            hub.st.isn_from_kernel++;
        }
        return;
    }
    /* Watch mode: a SYN-ACK for a SYN this host sent. */
    if ((f = flow_find(&s->key)) == NULL || f->conn != NULL || s->ack != f->local_isn + 1)
        return;
    if ((status & (TP_STATUS_CSUMNOTREADY | TP_STATUS_CSUM_VALID)) == 0
        && !utls_tap_tcp_checksum_ok(s)) {
        hub.st.bad_checksum++;
        return;
    }
    if (f->state == FLOW_SYN_SENT) {
        f->peer_isn = s->seq;
        f->state = FLOW_PEER_SYNACK;
    } else if (f->state == FLOW_PEER_SYNACK && f->peer_isn != s->seq) {
        f->state = FLOW_AMBIGUOUS;
        hub.st.isn_ambiguous++;
    }
}

static void ctl_drain_locked(void)
{
    unsigned char buf[UTLS_TAP_CTL_SNAPLEN];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
    } cbuf;
    struct sockaddr_ll from;
    tap_segment seg;
    int budget = 4096; /* bounded per call: the socket buffer refills */

    hub.last_ctl_ns = utls_now_ns();
    if (hub.isn_sockops)
        return; /* the control socket is not bound: nothing to read */
    while (budget-- > 0) {
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr m;
        struct cmsghdr *c;
        unsigned int status = 0;
        ssize_t n;

        memset(&m, 0, sizeof(m));
        m.msg_name = &from;
        m.msg_namelen = sizeof(from);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = &cbuf;
        m.msg_controllen = sizeof(cbuf);
        if ((n = recvmsg(hub.cfd, &m, MSG_DONTWAIT)) <= 0)
            return;
        for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA) {
                struct tpacket_auxdata aux;

                memcpy(&aux, CMSG_DATA(c), sizeof(aux));
                status = aux.tp_status;
            }
        }
        if (utls_tap_parse_segment(buf, (size_t)n, from.sll_pkttype == PACKET_OUTGOING, 1, &seg))
            ctl_process(&seg, from.sll_pkttype == PACKET_OUTGOING, status);
    }
}

/* ring_process hands the captured segment |p| (|len| bytes from its network
 * header; |status| the ring's status word; |arrival_ns| the ring's
 * timestamp, CLOCK_MONOTONIC) to its connection's inbox. */
static void ring_process(const unsigned char *p, size_t len, unsigned int status,
                         uint64_t arrival_ns, uint64_t seen_ns)
{
    tap_segment seg;
    tap_flow *f;
    tap_pkt *pkt;
    int behind = 0, at_read = 0;
    size_t kept, cost;

    if (!utls_tap_parse_segment(p, len, 0, 0, &seg)) {
        hub.st.malformed++;
        return;
    }
    if ((f = flow_find(&seg.key)) == NULL || f->conn == NULL) {
        hub.st.foreign++; /* not a connection of this process's taps */
        return;
    }
    if (seg.payload_len == 0)
        return;
    /* Wholly before the connection's socket read point (less than 1 GiB
     * back): the kernel has delivered these bytes in order, the store would
     * ignore them, and only the validator's timestamp and counts want the
     * headers: no payload copy, no wake-up. A segment of a connection with
     * no hole is so when its reader drains the ring after reading the
     * socket (a busy connection); the tap BIO holds the others aside until
     * the kernel has queued them (UTLS_TAP_INFLIGHT_GRACE_NS). */
    if (__atomic_load_n(&f->read_seq_set, __ATOMIC_ACQUIRE)) {
        uint32_t rs = __atomic_load_n(&f->read_seq, __ATOMIC_RELAXED);

        behind = (int32_t)(seg.seq + (uint32_t)seg.payload_len - rs) <= 0
                 && (uint32_t)(rs - seg.seq) < (1u << 30);
        /* Starts at or before the read point: the next bytes the socket
         * gives, queued or on their way (the ring sees a packet before the
         * kernel's TCP queues it). The socket wakes the reader for them;
         * one the kernel rejects is looked at with the next segment. */
        at_read = !behind && (uint32_t)(rs - seg.seq) < (1u << 30);
    }
    kept = behind ? 0 : seg.payload_len;
    cost = UTLS_TAP_PKT_COST(kept);
    if (f->in_bytes + cost > UTLS_TAP_INBOX_MAX_BYTES
        || hub.inbox_total + cost > UTLS_TAP_INBOX_TOTAL_MAX_BYTES
        || (pkt = OPENSSL_malloc(sizeof(*pkt) + kept)) == NULL) {
        hub.st.inbox_drops++;
        return;
    }
    pkt->next = NULL;
    pkt->seq = seg.seq;
    pkt->behind = behind;
    /* The checksum and the headers the connection's validator needs are read
     * here: only the ring has the raw packet and its status word (a bad
     * checksum is counted and dropped by the connection, tap_validate.h). */
    utls_tap_inspect(p, len, status, seg.flags, &pkt->hdr);
    pkt->len = seg.payload_len;
    pkt->arrival_ns = arrival_ns;
    pkt->seen_ns = seen_ns;
    memcpy(pkt->data, seg.payload, kept);
    if (f->in_tail != NULL)
        f->in_tail->next = pkt;
    else
        f->in_head = pkt;
    f->in_tail = pkt;
    __atomic_store_n(&f->in_any, 1, __ATOMIC_RELEASE);
    f->in_bytes += cost;
    hub.inbox_total += cost;
    if (behind || at_read)
        return; /* taken with the connection's next ahead segment or read */
    __atomic_store_n(&f->in_pending, 1, __ATOMIC_RELEASE);
    if (!f->on_ready) {
        f->on_ready = 1;
        f->ready_next = hub.ready;
        hub.ready = f;
    }
}

/* ring_copy reads back the whole copy of the segment whose frame the kernel
 * cut off (TP_STATUS_COPY): the copies wait on the data socket in frame
 * order. Returns its length, or 0 if there is none or it is too large. */
static size_t ring_copy(void)
{
    ssize_t n;

    if (hub.copy == NULL && (hub.copy = OPENSSL_malloc(UTLS_TAP_COPY_MAX)) == NULL)
        return 0;
    n = recv(hub.dfd, hub.copy, UTLS_TAP_COPY_MAX, MSG_DONTWAIT | MSG_TRUNC);
    return n > 0 && (size_t)n <= UTLS_TAP_COPY_MAX ? (size_t)n : 0;
}

/* ring_drain_locked processes every frame the kernel has handed over: no
 * syscall, unless a segment was larger than its frame. */
static void ring_drain_locked(void)
{
    uint64_t seen_ns = 0;

    for (;;) {
        struct tpacket2_hdr *h =
            (void *)(hub.ring + (size_t)hub.cur_frame * UTLS_TAP_FRAME_SIZE);
        unsigned int status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        uint64_t arrival_ns;

        if ((status & TP_STATUS_USER) == 0)
            return;
        if (seen_ns == 0)
            seen_ns = utls_now_ns();
        arrival_ns = (uint64_t)h->tp_sec * 1000000000u + h->tp_nsec
                     + (uint64_t)hub.real_to_mono_ns;
        hub.st.packets++;
        if (h->tp_mac > h->tp_net || h->tp_net > UTLS_TAP_FRAME_SIZE
            || h->tp_snaplen < h->tp_net - h->tp_mac) {
            hub.st.malformed++;
        } else if (h->tp_snaplen - (h->tp_net - h->tp_mac) >= h->tp_len) {
            ring_process((const unsigned char *)h + h->tp_net, h->tp_len, status, arrival_ns,
                         seen_ns);
        } else if ((status & TP_STATUS_COPY) != 0) {
            size_t n = ring_copy();

            if (n == 0)
                hub.st.malformed++;
            else
                ring_process(hub.copy, n, status, arrival_ns, seen_ns);
        } else {
            hub.st.ring_drops++; /* cut off, and no room for its copy */
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        __atomic_store_n(&hub.cur_frame, (hub.cur_frame + 1) % UTLS_TAP_FRAME_NR,
                         __ATOMIC_RELEASE);
    }
}

/* --- Opening, and fork() ---------------------------------------------------- */

static void hub_set_clock(void)
{
    struct timespec rt, mt;

    /* the ring's timestamps are CLOCK_REALTIME */
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    hub.real_to_mono_ns =
        ((int64_t)mt.tv_sec - rt.tv_sec) * 1000000000 + (mt.tv_nsec - rt.tv_nsec);
}

static int hub_open_locked(void)
{
    void *ring = NULL;

    if (hub.open)
        return 1;
    if (hub.buckets == NULL) {
        if ((hub.buckets = OPENSSL_zalloc(HUB_BUCKETS * sizeof(hub.buckets[0]))) == NULL)
            return 0;
        if (RAND_bytes((unsigned char *)hub.seed, sizeof(hub.seed)) != 1)
            hub.seed[0] = utls_now_ns() ^ (uint64_t)getpid() << 32; /* still per process */
    }
    /* The sock_ops program (tap_sockops.c) once per process: a forked
     * child shares its parent's. Where it runs the control socket is left
     * unbound and captures nothing. */
    hub.isn_sockops = utls_tap_sockops_start();
    if (!utls_tap_open_sockets(&hub.dfd, &hub.cfd, &ring, !hub.isn_sockops))
        return 0;
    __atomic_store_n(&hub.cur_frame, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&hub.ring, (unsigned char *)ring, __ATOMIC_RELEASE);
    hub.open = 1;
    hub_set_clock();
    if (hub.num_ports > 0 || hub.watch)
        (void)hub_refilter();
    return 1;
}

static void hub_close_sockets(void)
{
    if (!hub.open)
        return;
    munmap(hub.ring, (size_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR);
    close(hub.dfd);
    close(hub.cfd);
    __atomic_store_n(&hub.ring, NULL, __ATOMIC_RELEASE);
    hub.dfd = hub.cfd = -1;
    hub.open = 0;
}

/*
 * hub_atfork_child: the parent's capture is the parent's (two processes
 * cannot share one ring). The child forgets the parent's connections, keeps
 * the listeners and the handshakes whose ISN is known (a prefork worker
 * accepts those), and opens its own capture at once, while it may still
 * hold the privilege its parent had.
 */
static void hub_atfork_child(void)
{
    size_t i;
    int was_open = hub.open;

    pthread_mutex_init(&hub_mu, NULL);
    hub.gen++;
    if (hub.buckets != NULL) {
        for (i = 0; i < HUB_BUCKETS; i++) {
            tap_flow *f = hub.buckets[i], *n;

            for (; f != NULL; f = n) {
                n = f->next;
                if (f->conn != NULL)
                    flow_remove(f);
            }
        }
    }
    for (i = 0; i < hub.num_ports; i++)
        hub.ports[i].n_data = hub.ports[i].n_hs = 0;
    while (hub.num_ports > 0 && hub.ports[hub.num_ports - 1].n_listen == 0)
        hub.num_ports--;
    for (i = 0; i < hub.num_ports;) {
        if (hub.ports[i].n_listen == 0) {
            memmove(&hub.ports[i], &hub.ports[i + 1],
                    (hub.num_ports - i - 1) * sizeof(hub.ports[0]));
            hub.num_ports--;
        } else {
            i++;
        }
    }
    hub.ready = NULL;
    memset(&hub.st, 0, sizeof(hub.st));
    if (!was_open)
        return;
    /* Only this process's mappings and descriptors go: the parent keeps its. */
    hub_close_sockets();
    ERR_set_mark();
    (void)hub_open_locked();
    ERR_pop_to_mark();
}

int utls_tap_hub_open(void)
{
    int ok;

    pthread_mutex_lock(&hub_mu);
    if (!hub.atfork_done) {
        hub.atfork_done = pthread_atfork(NULL, NULL, hub_atfork_child) == 0;
        hub.dfd = hub.cfd = -1;
    }
    ok = hub_open_locked();
    pthread_mutex_unlock(&hub_mu);
    return ok;
}

/* --- What the tap BIO and the public API use -------------------------------- */

int utls_tap_hub_listen(uint16_t port, int add)
{
    int ok;

    pthread_mutex_lock(&hub_mu);
    ok = port_change(port, 0, add ? 1 : -1);
    pthread_mutex_unlock(&hub_mu);
    return ok;
}

int utls_tap_hub_handshake(uint16_t port, int add)
{
    int ok;

    pthread_mutex_lock(&hub_mu);
    ok = hub.open && port_change(port, 1, add ? 1 : -1);
    pthread_mutex_unlock(&hub_mu);
    return ok;
}

int utls_tap_hub_set_watch(void)
{
    int ok = 1;

    pthread_mutex_lock(&hub_mu);
    if (!hub.watch) {
        hub.watch = 1;
        ok = !hub.open || hub_refilter();
    }
    pthread_mutex_unlock(&hub_mu);
    return ok;
}

/* isn_usable: the states in which a flow's peer ISN may be used. */
static int isn_usable(const tap_flow *f)
{
    return f != NULL && (f->state == FLOW_KNOWN || f->state == FLOW_PEER_SYNACK);
}

int utls_tap_hub_wait_isn(const tap_key *k, int timeout_ms)
{
    uint64_t deadline = utls_now_ns() + (uint64_t)timeout_ms * 1000000u;
    int known = 0;

    if (__atomic_load_n(&hub.isn_sockops, __ATOMIC_RELAXED))
        return 1; /* recorded before connect() returned: read at attach */

    for (;;) {
        struct pollfd p;
        uint64_t now;

        pthread_mutex_lock(&hub_mu);
        if (hub.open) {
            ctl_drain_locked();
            known = isn_usable(flow_find(k));
            p.fd = hub.cfd;
        }
        pthread_mutex_unlock(&hub_mu);
        if (known || !hub.open || (now = utls_now_ns()) >= deadline)
            return known;
        p.events = POLLIN;
        (void)poll(&p, 1, (int)((deadline - now + 999999u) / 1000000u));
    }
}

void *utls_tap_hub_attach(const tap_key *k, tap_ctx *t, int fd, uint64_t *out_gen,
                          uint32_t *out_isn, uint32_t *out_local_isn, int *out_local_connected)
{
    tap_flow *f = NULL;

    pthread_mutex_lock(&hub_mu);
    if (!hub.open) {
        utls_raise(UTLS_R_TAP_PERMISSION, "the process-wide tap is not open");
        goto end;
    }
    ctl_drain_locked();
    f = flow_find(k);
    if (hub.isn_sockops && (f == NULL || f->conn == NULL)) {
        uint32_t lisn, pisn;
        int lconn;

        if (utls_tap_sockops_isn(fd, k, &lisn, &pisn, &lconn) && (f = flow_get(k)) != NULL) {
            f->local_isn = lisn;
            f->peer_isn = pisn;
            f->local_connected = lconn;
            f->state = FLOW_KNOWN;
            hub.st.isn_from_sockops++;
        }
    }
    if (f == NULL || !isn_usable(f)) {
        utls_raise(UTLS_R_TAP_NO_ISN,
                   f != NULL && f->state == FLOW_AMBIGUOUS
                       ? "two different SYN-ACKs answered this connection's SYN: its ISN is "
                         "not trusted"
                       : hub.isn_sockops
                             ? "the kernel recorded no ISN for this connection: it was made "
                               "outside this process's cgroup, or before the tap opened"
                             : "the handshake of this connection was not seen: listen with "
                               "UTLS_tap_listen() or connect with UTLS_tap_connect()");
        f = NULL;
        goto end;
    }
    if (f->conn != NULL) {
        utls_raise(UTLS_R_TAP_SYSCALL, "this connection already has a tap");
        f = NULL;
        goto end;
    }
    if (!port_change(k->lport, 2, 1)) {
        f = NULL;
        goto end;
    }
    unattached_unlink(f);
    f->conn = t;
    f->fd = fd;
    hub.num_attached++;
    *out_isn = f->peer_isn;
    *out_local_isn = f->local_isn;
    *out_local_connected = f->local_connected;
    *out_gen = hub.gen;

end:
    pthread_mutex_unlock(&hub_mu);
    return f;
}

void utls_tap_hub_detach(void *att, uint64_t gen)
{
    tap_flow *f = att;

    if (f == NULL)
        return;
    pthread_mutex_lock(&hub_mu);
    if (gen == hub.gen) {
        uint16_t port = f->key.lport;

        flow_remove(f);
        (void)port_change(port, 2, -1);
    }
    pthread_mutex_unlock(&hub_mu);
}

tap_pkt *utls_tap_hub_take(void *att, uint64_t gen)
{
    tap_flow *f = att;
    tap_pkt *p = NULL;

    if (f == NULL)
        return NULL;
    pthread_mutex_lock(&hub_mu);
    if (gen == hub.gen && hub.open) {
        ring_drain_locked();
        if (utls_now_ns() - hub.last_ctl_ns > HUB_CTL_INTERVAL_NS)
            ctl_drain_locked();
        p = f->in_head;
        hub.inbox_total -= f->in_bytes;
        f->in_head = f->in_tail = NULL;
        f->in_bytes = 0;
        __atomic_store_n(&f->in_any, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&f->in_pending, 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&hub_mu);
    return p;
}

int utls_tap_hub_idle(void *att, uint64_t gen)
{
    tap_flow *f = att;
    unsigned char *ring = __atomic_load_n(&hub.ring, __ATOMIC_ACQUIRE);
    const struct tpacket2_hdr *h;

    if (f == NULL || ring == NULL || gen != __atomic_load_n(&hub.gen, __ATOMIC_ACQUIRE)
        || __atomic_load_n(&f->in_any, __ATOMIC_ACQUIRE))
        return 0;
    h = (const void *)(ring + (size_t)__atomic_load_n(&hub.cur_frame, __ATOMIC_ACQUIRE)
                                  * UTLS_TAP_FRAME_SIZE);
    return (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) == 0;
}

void utls_tap_hub_note_read(void *att, uint32_t next_seq)
{
    tap_flow *f = att;

    if (f == NULL)
        return;
    __atomic_store_n(&f->read_seq, next_seq, __ATOMIC_RELAXED);
    __atomic_store_n(&f->read_seq_set, 1, __ATOMIC_RELEASE);
}

int utls_tap_hub_pending(void *att)
{
    tap_flow *f = att;

    return f != NULL && __atomic_load_n(&f->in_pending, __ATOMIC_ACQUIRE);
}

int utls_tap_hub_fd(void)
{
    return hub.open ? hub.dfd : -1;
}

size_t utls_tap_hub_num_attached(void)
{
    return hub.num_attached;
}

uint64_t utls_tap_hub_ring_drops(void)
{
    struct tpacket_stats st;
    socklen_t sl = sizeof(st);

    pthread_mutex_lock(&hub_mu);
    /* The kernel's counters reset on every read; accumulate them. */
    if (hub.open && getsockopt(hub.dfd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
        hub.st.ring_drops += st.tp_drops;
    pthread_mutex_unlock(&hub_mu);
    return hub.st.ring_drops;
}

/* --- Public API ------------------------------------------------------------- */

int UTLS_tap_open(void)
{
    return utls_tap_hub_open();
}

int UTLS_tap_get_fd(void)
{
    return utls_tap_hub_fd();
}

int UTLS_tap_poll_ready(int *out_fds, size_t max_fds, size_t *out_num)
{
    size_t n = 0;

    if (out_num == NULL || (out_fds == NULL && max_fds > 0)) {
        utls_raise(UTLS_R_TAP_SYSCALL, "UTLS_tap_poll_ready: NULL argument");
        return 0;
    }
    pthread_mutex_lock(&hub_mu);
    if (hub.open) {
        /* The control socket as a reader's take does: at most every
         * HUB_CTL_INTERVAL_NS (an attach drains it itself), so that an event
         * loop's wake-up costs no extra syscall. */
        if (utls_now_ns() - hub.last_ctl_ns > HUB_CTL_INTERVAL_NS)
            ctl_drain_locked();
        ring_drain_locked();
        while (hub.ready != NULL && n < max_fds) {
            tap_flow *f = hub.ready;

            hub.ready = f->ready_next;
            f->ready_next = NULL;
            f->on_ready = 0;
            if (f->in_bytes > 0 && f->fd >= 0)
                out_fds[n++] = f->fd;
        }
    }
    pthread_mutex_unlock(&hub_mu);
    *out_num = n;
    return 1;
}

int UTLS_tap_get_global_stats(UTLS_TAP_GLOBAL_STATS *out_stats, size_t stats_size)
{
    UTLS_TAP_GLOBAL_STATS st;

    /* an older caller's struct ends at filter_rebuilds: its prefix is copied */
    if (out_stats == NULL || stats_size > sizeof(st)
        || stats_size < offsetof(UTLS_TAP_GLOBAL_STATS, isn_sockops)) {
        utls_raise(UTLS_R_TAP_SYSCALL, "UTLS_tap_get_global_stats: size %zu, expected %zu",
                   stats_size, sizeof(st));
        return 0;
    }
    (void)utls_tap_hub_ring_drops();
    pthread_mutex_lock(&hub_mu);
    if (hub.open)
        ctl_drain_locked();
    st = hub.st;
    st.open = hub.open;
    st.watch = hub.watch;
    st.flows = hub.num_flows;
    st.attached = hub.num_attached;
    st.unattached = hub.num_unattached;
    st.ports = hub.num_ports;
    st.inbox_bytes = hub.inbox_total;
    st.isn_sockops = hub.open && hub.isn_sockops;
    /* the ring, the data socket's whole copies, and the ISNs' source */
    st.kernel_bytes = 0;
    if (hub.open)
        st.kernel_bytes = (uint64_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR
                          + 2u * UTLS_TAP_COPY_RCVBUF
                          + (hub.isn_sockops
                                 ? (uint64_t)UTLS_TAP_SOCKOPS_SLOTS * UTLS_TAP_SOCKOPS_SLOT_BYTES
                                 : 2u * UTLS_TAP_CTL_RCVBUF);
    pthread_mutex_unlock(&hub_mu);
    memcpy(out_stats, &st, stats_size);
    return 1;
}
