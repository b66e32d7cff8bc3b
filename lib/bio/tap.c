/*
 * The tap: uTCP's fragments from a stock Linux kernel.
 *
 * An AF_PACKET socket with a TPACKET_V3 ring and a BPF filter on one TCP
 * connection's 4-tuple sees each segment as it reaches the host, before TCP's
 * reordering queue. The tap BIO is a filter over the connection's socket BIO:
 * in-order bytes still come from the socket (the kernel's TCP stays the
 * authority and does ACKs, SACK, retransmission and flow control), and the
 * captured segments go into a segment store that reports those past a hole as
 * fragments. A segment's stream offset is its sequence number minus the peer's
 * ISN minus 1; the ISN comes from the SYN (listener taps) or the SYN-ACK
 * (UTLS_tap_connect) and is kept in a small process-wide registry.
 *
 * Everything captured is untrusted: packets are seen before TCP checks them.
 * Parsing is bounds-checked, and nothing captured is ever delivered without
 * being authenticated by the record layer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/tap_local.h"
#include "bio/tap_validate.h"

typedef struct {
    tap_key key;
    uint32_t isn; /* the peer's initial sequence number */
    int used;
} isn_entry;

static CRYPTO_ONCE tap_once = CRYPTO_ONCE_STATIC_INIT;

static CRYPTO_RWLOCK *tap_lock = NULL;

static isn_entry isn_table[UTLS_TAP_MAX_ISNS];

static size_t isn_next = 0;

static UTLS_TAP_LISTENER *listeners = NULL;

struct utls_tap_listener_st {
    int pfd;
    UTLS_TAP_LISTENER *next;
};

static void tap_init(void)
{
    tap_lock = CRYPTO_THREAD_lock_new();
}

static int tap_ready(void)
{
    return CRYPTO_THREAD_run_once(&tap_once, tap_init) && tap_lock != NULL;
}

static int key_equal(const tap_key *a, const tap_key *b)
{
    size_t alen = a->family == AF_INET ? 4 : 16;

    return a->family == b->family && a->lport == b->lport && a->pport == b->pport
        && memcmp(a->local, b->local, alen) == 0 && memcmp(a->peer, b->peer, alen) == 0;
}

static void isn_put(const tap_key *k, uint32_t isn)
{
    size_t i;

    if (!CRYPTO_THREAD_write_lock(tap_lock))
        return;
    for (i = 0; i < UTLS_TAP_MAX_ISNS; i++) {
        if (isn_table[i].used && key_equal(&isn_table[i].key, k)) {
            isn_table[i].isn = isn; /* a new connection on the same 4-tuple */
            CRYPTO_THREAD_unlock(tap_lock);
            return;
        }
    }
    isn_table[isn_next].key = *k;
    isn_table[isn_next].isn = isn;
    isn_table[isn_next].used = 1;
    isn_next = (isn_next + 1) % UTLS_TAP_MAX_ISNS;
    CRYPTO_THREAD_unlock(tap_lock);
}

static int isn_get(const tap_key *k, uint32_t *out_isn)
{
    size_t i;
    int found = 0;

    if (!CRYPTO_THREAD_read_lock(tap_lock))
        return 0;
    for (i = 0; i < UTLS_TAP_MAX_ISNS && !found; i++) {
        if (isn_table[i].used && key_equal(&isn_table[i].key, k)) {
            *out_isn = isn_table[i].isn;
            found = 1;
        }
    }
    CRYPTO_THREAD_unlock(tap_lock);
    return found;
}

/* key_of_socket fills |k| from a connected TCP socket. */
static int key_of_socket(int fd, tap_key *k)
{
    struct sockaddr_storage l, p;
    socklen_t ll = sizeof(l), pl = sizeof(p);

    memset(k, 0, sizeof(*k));
    if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0
        || getpeername(fd, (struct sockaddr *)&p, &pl) != 0 || l.ss_family != p.ss_family)
        return 0;
    k->family = l.ss_family;
    if (k->family == AF_INET) {
        const struct sockaddr_in *a = (const void *)&l, *b = (const void *)&p;

        memcpy(k->local, &a->sin_addr, 4);
        memcpy(k->peer, &b->sin_addr, 4);
        k->lport = ntohs(a->sin_port);
        k->pport = ntohs(b->sin_port);
    } else if (k->family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)&l, *b = (const void *)&p;

        memcpy(k->local, &a->sin6_addr, 16);
        memcpy(k->peer, &b->sin6_addr, 16);
        k->lport = ntohs(a->sin6_port);
        k->pport = ntohs(b->sin6_port);
    } else {
        return 0;
    }
    return 1;
}

/* --- Listener taps -------------------------------------------------------- */

/* drain_syns records the ISN of every SYN waiting on |pfd|. */
static void drain_syns(int pfd)
{
    unsigned char buf[256];
    tap_segment seg;
    ssize_t n;

    /* A SYN carries no payload (no TCP Fast Open here): its headers fit. */
    while ((n = recv(pfd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        if (utls_tap_parse_segment(buf, (size_t)n, &seg) && (seg.flags & TCP_FLAG_SYN) != 0)
            isn_put(&seg.key, seg.seq);
    }
}

UTLS_TAP_LISTENER *UTLS_tap_listen(int listen_fd)
{
    struct sockaddr_storage a;
    socklen_t al = sizeof(a);
    UTLS_TAP_LISTENER *l;
    tap_key k;

    if (!tap_ready())
        return NULL;
    memset(&k, 0, sizeof(k));
    if (getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0) {
        utls_raise(UTLS_R_TAP_SYSCALL, "getsockname: %s", strerror(errno));
        return NULL;
    }
    k.family = a.ss_family;
    if (k.family == AF_INET)
        k.lport = ntohs(((struct sockaddr_in *)&a)->sin_port);
    else if (k.family == AF_INET6)
        k.lport = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    else {
        utls_raise(UTLS_R_TAP_SYSCALL, "not an IP socket");
        return NULL;
    }
    if ((l = OPENSSL_zalloc(sizeof(*l))) == NULL)
        return NULL;
    /* A SYN without ACK to the listening port, from anyone. */
    if ((l->pfd = utls_tap_open_socket(&k, 0, TCP_FLAG_SYN | TCP_FLAG_ACK, TCP_FLAG_SYN, NULL))
        < 0) {
        OPENSSL_free(l);
        return NULL;
    }
    if (CRYPTO_THREAD_write_lock(tap_lock)) {
        l->next = listeners;
        listeners = l;
        CRYPTO_THREAD_unlock(tap_lock);
    }
    return l;
}

void UTLS_tap_listener_free(UTLS_TAP_LISTENER *l)
{
    UTLS_TAP_LISTENER **p;

    if (l == NULL)
        return;
    if (CRYPTO_THREAD_write_lock(tap_lock)) {
        for (p = &listeners; *p != NULL; p = &(*p)->next) {
            if (*p == l) {
                *p = l->next;
                break;
            }
        }
        CRYPTO_THREAD_unlock(tap_lock);
    }
    close(l->pfd);
    OPENSSL_free(l);
}

/*
 * utls_tap_start_syn_watch opens, once per process, a tap that records the ISN
 * of every SYN and SYN-ACK arriving in this network namespace (IPv4 and IPv6,
 * any port), so that connections set up afterwards by a program that knows
 * nothing of uTLS can get a tap through SSL_set_fd. Returns 1 if it runs.
 */
int utls_tap_start_syn_watch(void)
{
    static UTLS_TAP_LISTENER *watch = NULL;
    UTLS_TAP_LISTENER *l;
    tap_key any;

    if (!tap_ready() || !CRYPTO_THREAD_write_lock(tap_lock))
        return 0;
    l = watch;
    CRYPTO_THREAD_unlock(tap_lock);
    if (l != NULL)
        return 1;
    memset(&any, 0, sizeof(any)); /* family 0, port 0: everything */
    if ((l = OPENSSL_zalloc(sizeof(*l))) == NULL)
        return 0;
    if ((l->pfd = utls_tap_open_socket(&any, 0, TCP_FLAG_SYN, TCP_FLAG_SYN, NULL)) < 0) {
        OPENSSL_free(l);
        return 0;
    }
    if (!CRYPTO_THREAD_write_lock(tap_lock)) {
        close(l->pfd);
        OPENSSL_free(l);
        return 0;
    }
    if (watch == NULL) {
        watch = l;
        l->next = listeners;
        listeners = l;
        l = NULL;
    }
    CRYPTO_THREAD_unlock(tap_lock);
    if (l != NULL) { /* another thread won */
        close(l->pfd);
        OPENSSL_free(l);
    }
    return 1;
}

/* drain_listeners records the SYNs every listener tap has seen so far. */
static void drain_listeners(void)
{
    UTLS_TAP_LISTENER *l;
    int fds[64];
    size_t n = 0, i;

    if (!CRYPTO_THREAD_read_lock(tap_lock))
        return;
    for (l = listeners; l != NULL && n < 64; l = l->next)
        fds[n++] = l->pfd;
    CRYPTO_THREAD_unlock(tap_lock);
    for (i = 0; i < n; i++)
        drain_syns(fds[i]);
}

int UTLS_tap_connect(int fd, const void *addr, unsigned int addrlen)
{
    struct sockaddr_storage l;
    socklen_t ll = sizeof(l);
    const struct sockaddr *sa = addr;
    tap_key k;
    int pfd = -1, r;

    if (!tap_ready())
        return 0;
    memset(&k, 0, sizeof(k));
    if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0)
        return 0;
    k.family = l.ss_family;
    if (k.family == AF_INET && ((struct sockaddr_in *)&l)->sin_port == 0) {
        struct sockaddr_in any = {.sin_family = AF_INET};

        if (bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0)
            return 0;
    } else if (k.family == AF_INET6 && ((struct sockaddr_in6 *)&l)->sin6_port == 0) {
        struct sockaddr_in6 any = {.sin6_family = AF_INET6};

        if (bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0)
            return 0;
    }
    ll = sizeof(l);
    if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0)
        return 0;
    k.lport = ntohs(k.family == AF_INET ? ((struct sockaddr_in *)&l)->sin_port
                                        : ((struct sockaddr_in6 *)&l)->sin6_port);
    /*
     * The SYN-ACK to our port carries the peer's ISN. Without the tap (no
     * CAP_NET_RAW) the connection is still made and runs in order: that is a
     * success, so the tap's error does not stay on the queue (UTLS_BIO_new_tap
     * reports it when the tap is asked for).
     */
    ERR_set_mark();
    pfd = utls_tap_open_socket(&k, 0, TCP_FLAG_SYN | TCP_FLAG_ACK, TCP_FLAG_SYN | TCP_FLAG_ACK,
                               NULL);
    ERR_pop_to_mark();
    r = connect(fd, sa, addrlen);
    if (r != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof(err);

        while ((r = poll(&p, 1, -1)) < 0 && errno == EINTR)
            continue;
        if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            if (err != 0)
                errno = err;
            r = -1;
        } else {
            r = 0;
        }
    }
    if (pfd >= 0) {
        tap_key conn;
        unsigned char buf[256];
        tap_segment seg;
        ssize_t n;

        if (r == 0 && key_of_socket(fd, &conn)) {
            while ((n = recv(pfd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
                if (utls_tap_parse_segment(buf, (size_t)n, &seg) && key_equal(&seg.key, &conn))
                    isn_put(&conn, seg.seq);
            }
        }
        close(pfd);
    }
    return r == 0;
}

/* --- The tap BIO ------------------------------------------------------------ */

typedef struct {
    int sock;                 /* the TCP socket (owned by the next BIO) */
    int pfd;
    unsigned char *ring;
    unsigned int cur_block;
    uint32_t stream_seq0;     /* sequence number of stream offset 0: ISN + 1 */
    tap_key key;
    utls_segstore *cap;       /* captured bytes: fragments past a hole */
    uint64_t sock_read_off;   /* stream offset of the next byte from the socket */
    int64_t real_to_mono_ns;  /* kernel timestamps are CLOCK_REALTIME */
    int woke;
    utls_bio_signals sig; /* always "maybe": the ring is checked in memory */
    UTLS_TAP_STATS stats;
    /* The local kernel's in-order point (SIOCINQ past sock_read_off) when
     * the ring was last drained, and what validation knows (tap_validate.h). */
    uint64_t confirmed;
    utls_tap_validator val;
    utls_tap_kernel_query query;
} tap_ctx;

static int tap_type = -1;

static void tap_ctx_free(tap_ctx *t)
{
    if (t == NULL)
        return;
    if (t->ring != NULL)
        munmap(t->ring, (size_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR);
    if (t->pfd >= 0)
        close(t->pfd);
    utls_segstore_free(t->cap);
    OPENSSL_free(t);
}

/* tap_confirm moves the capture store's in-order point to where the
 * kernel's own in-order stream reaches: only the kernel moves it (a forged
 * copy of a lost segment lined up with it would otherwise hide the hole). */
static void tap_confirm(tap_ctx *t)
{
    uint64_t k = utls_tap_kernel_inorder(t->sock, t->sock_read_off);

    if (k > t->confirmed)
        t->confirmed = k;
    utls_segstore_skip_inorder(t->cap, t->confirmed);
    utls_tap_validator_drain(&t->val);
}

static void tap_process(tap_ctx *t, const struct tpacket3_hdr *h)
{
    const unsigned char *p = (const unsigned char *)h + h->tp_net;
    tap_segment seg;
    uint64_t end, off, ts;
    int32_t d;

    t->stats.packets++;
    if (h->tp_snaplen < h->tp_net - h->tp_mac
        || !utls_tap_parse_segment(p, h->tp_snaplen - (h->tp_net - h->tp_mac), &seg)
        || !key_equal(&seg.key, &t->key)) {
        t->stats.malformed++;
        return;
    }
    if (seg.payload_len == 0)
        return;
    /* Widen the 32-bit offset around the captured in-order end (RFC 1982). */
    end = utls_segstore_inorder_end(t->cap);
    d = (int32_t)((seg.seq - t->stream_seq0) - (uint32_t)end);
    if (d < 0 && (uint64_t)(-(int64_t)d) > end)
        return;
    off = end + (int64_t)d;
    /* What the kernel would drop does not enter the store (tap_validate.h). */
    if (utls_tap_validate(&t->val, p, h->tp_snaplen - (h->tp_net - h->tp_mac), h->tp_status, &seg,
                          off, t->confirmed, &t->query)
        != UTLS_TAP_SEG_OK)
        return;
    ts = (uint64_t)h->tp_sec * 1000000000u + h->tp_nsec + (uint64_t)t->real_to_mono_ns;
    t->stats.payload_bytes += seg.payload_len;
    if (ts > t->stats.last_byte_ns)
        t->stats.last_byte_ns = ts;
    ERR_set_mark();
    if (!utls_segstore_push(t->cap, off, seg.payload, seg.payload_len, ts))
        ERR_pop_to_mark(); /* outside the window: like TCP, ignore it */
    else
        ERR_clear_last_mark();
}

/* tap_drain processes every block the kernel has handed over: one ioctl
 * (tap_confirm) when there is any. */
static void tap_drain(tap_ctx *t)
{
    int confirmed = 0;

    for (;;) {
        struct tpacket_block_desc *b =
            (void *)(t->ring + (size_t)t->cur_block * UTLS_TAP_BLOCK_SIZE);
        const unsigned char *pkt;
        uint32_t i, n;

        if ((__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) == 0)
            return;
        if (!confirmed) {
            tap_confirm(t);
            confirmed = 1;
        }
        n = b->hdr.bh1.num_pkts;
        pkt = (const unsigned char *)b + b->hdr.bh1.offset_to_first_pkt;
        for (i = 0; i < n; i++) {
            const struct tpacket3_hdr *h = (const void *)pkt;

            tap_process(t, h);
            pkt += h->tp_next_offset;
        }
        __atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        t->cur_block = (t->cur_block + 1) % UTLS_TAP_BLOCK_NR;
    }
}

/*
 * tap_attach sets up the capture for the connected socket |fd|, whose next
 * byte from the socket has stream offset |read_off|. Returns 1, or 0 with an
 * error raised.
 */
static int tap_attach(tap_ctx *t, int fd, uint64_t read_off)
{
    struct timespec rt, mt;
    uint32_t isn;
    void *ring = NULL;

    if (!tap_ready())
        return 0;
    if (!key_of_socket(fd, &t->key)) {
        utls_raise(UTLS_R_TAP_SYSCALL, "fd %d is not a connected TCP/IP socket", fd);
        return 0;
    }
    drain_listeners();
    if (!isn_get(&t->key, &isn)) {
        utls_raise(UTLS_R_TAP_NO_ISN,
                   "the SYN of this connection was not seen: listen with UTLS_tap_listen() "
                   "or connect with UTLS_tap_connect()");
        return 0;
    }
    if ((t->cap = utls_segstore_new()) == NULL)
        return 0;
    t->pfd = utls_tap_open_socket(&t->key, 1, 0, 0, &ring);
    if (t->pfd < 0)
        return 0;
    t->ring = ring;
    t->sock = fd;
    t->stream_seq0 = isn + 1;
    t->sock_read_off = read_off;
    t->confirmed = read_off;
    t->query = utls_tap_socket_query(&t->sock);
    utls_segstore_skip_inorder(t->cap, read_off);
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    t->real_to_mono_ns = ((int64_t)mt.tv_sec - rt.tv_sec) * 1000000000 + (mt.tv_nsec - rt.tv_nsec);
    return 1;
}

static int tap_new(BIO *b)
{
    tap_ctx *t = OPENSSL_zalloc(sizeof(*t));

    if (t == NULL)
        return 0;
    t->pfd = -1;
    t->sock = -1;
    t->sig.pending = 1;
    BIO_set_data(b, t);
    BIO_set_init(b, 1);
    return 1;
}

static int tap_free(BIO *b)
{
    if (b == NULL)
        return 0;
    tap_ctx_free(BIO_get_data(b));
    BIO_set_data(b, NULL);
    return 1;
}

/*
 * tap_rcvtimeo_deadline_ns: when a blocking read of |sock| would give up, as
 * the kernel's recv() does under SO_RCVTIMEO; 0 when it waits for ever.
 */
static uint64_t tap_rcvtimeo_deadline_ns(int sock)
{
    struct timeval tv;
    socklen_t tl = sizeof(tv);

    if (getsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) != 0
        || (tv.tv_sec == 0 && tv.tv_usec == 0))
        return 0;
    return utls_now_ns() + (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

static int tap_read(BIO *b, char *out, int outl)
{
    tap_ctx *t = BIO_get_data(b);
    BIO *next = BIO_next(b);
    int r, fl;

    BIO_clear_retry_flags(b);
    if (next == NULL)
        return -1;
    if (t->ring != NULL) {
        tap_drain(t);
        fl = fcntl(t->sock, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK) == 0) {
            /*
             * A blocking socket: wait for in-order bytes or for captured
             * segments, whichever comes first, so that a record that became
             * whole past a hole is not held behind the hole (the lock-out of
             * the uTLS report, 7.1, in the other direction). A receive
             * timeout on the socket (SO_RCVTIMEO) ends the wait as it ends
             * recv(): EAGAIN, and SSL_read() says SSL_ERROR_WANT_READ.
             */
            uint64_t deadline = 0;
            int deadline_read = 0; /* SO_RCVTIMEO is read only if we wait */

            for (;;) {
                struct pollfd p[2] = {{.fd = t->sock, .events = POLLIN},
                                      {.fd = t->pfd, .events = POLLIN}};
                int wait_ms = -1, n;

                if (utls_segstore_num_events(t->cap) > 0) {
                    t->woke = 1;
                    BIO_set_retry_read(b);
                    return -1;
                }
                if (!deadline_read) {
                    deadline = tap_rcvtimeo_deadline_ns(t->sock);
                    deadline_read = 1;
                }
                if (deadline != 0) {
                    uint64_t now = utls_now_ns();

                    wait_ms = now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u);
                }
                n = poll(p, 2, wait_ms);
                if (n < 0) {
                    if (errno == EINTR)
                        continue;
                    break;
                }
                if (n == 0) {
                    errno = EAGAIN;
                    BIO_set_retry_read(b);
                    return -1;
                }
                if (p[1].revents != 0)
                    tap_drain(t);
                if (p[0].revents != 0 && utls_segstore_num_events(t->cap) == 0)
                    break;
            }
        }
    }
    r = BIO_read(next, out, outl);
    BIO_copy_next_retry(b);
    if (r > 0) {
        t->sock_read_off += (uint64_t)r;
        if (t->cap != NULL)
            utls_segstore_skip_inorder(t->cap, t->sock_read_off);
    }
    return r;
}

static long tap_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    tap_ctx *t = BIO_get_data(b);
    BIO *next = BIO_next(b);

    switch (cmd) {
    case UTLS_BIO_CTRL_NEXT_FRAGMENT:
        if (t->ring == NULL)
            return 0;
        tap_drain(t);
        if (!utls_segstore_take_event(t->cap, ptr))
            return 0;
        t->stats.fragments++;
        return 1;
    case UTLS_BIO_CTRL_READ_OFFSET:
        if (t->ring == NULL)
            return 0;
        *(uint64_t *)ptr = t->sock_read_off;
        return 1;
    case UTLS_BIO_CTRL_TAKE_WAKEUP: {
        int w = t->woke;

        t->woke = 0;
        return w;
    }
    case UTLS_BIO_CTRL_GET_CAPTURE_FD:
        return t->ring != NULL ? t->pfd : -1;
    case UTLS_BIO_CTRL_GET_SIGNALS:
        if (t->ring == NULL)
            return 0;
        *(const utls_bio_signals **)ptr = &t->sig;
        return 1;
    default:
        return next != NULL ? BIO_ctrl(next, cmd, num, ptr) : 0;
    }
}

static CRYPTO_ONCE tap_meth_once = CRYPTO_ONCE_STATIC_INIT;

static BIO_METHOD *tap_method = NULL;

static void tap_method_init(void)
{
    tap_method = utls_bio_method_new(&tap_type, BIO_TYPE_FILTER, "uTLS tap",
                                     utls_bio_filter_write, tap_read, tap_ctrl, tap_new,
                                     tap_free);
}

static const BIO_METHOD *tap_bio_method(void)
{
    if (!CRYPTO_THREAD_run_once(&tap_meth_once, tap_method_init))
        return NULL;
    return tap_method;
}

/* utls_tap_wrap puts a tap in front of the socket BIO |sock| (the SSL's rbio),
 * whose next byte has stream offset |read_off|. Returns the tap BIO, or NULL
 * with an error raised (|sock| is untouched). */
BIO *utls_tap_wrap(BIO *sock, uint64_t read_off)
{
    const BIO_METHOD *m = tap_bio_method();
    BIO *tap;
    int fd;

    if (m == NULL || sock == NULL || BIO_get_fd(sock, &fd) <= 0 || fd < 0)
        return NULL;
    if ((tap = BIO_new(m)) == NULL)
        return NULL;
    if (!tap_attach(BIO_get_data(tap), fd, read_off)) {
        BIO_free(tap);
        return NULL;
    }
    BIO_push(tap, sock);
    return tap;
}

BIO *UTLS_BIO_new_tap(int fd, int close_flag)
{
    BIO *sock = BIO_new_socket(fd, close_flag), *tap;

    if (sock == NULL)
        return NULL;
    if ((tap = utls_tap_wrap(sock, 0)) == NULL) {
        (void)BIO_set_close(sock, BIO_NOCLOSE); /* the caller keeps the fd */
        BIO_free(sock);
        return NULL;
    }
    return tap;
}

int UTLS_BIO_tap_get_stats(BIO *b, UTLS_TAP_STATS *out_stats)
{
    tap_ctx *t;
    struct tpacket_stats_v3 st;
    socklen_t sl = sizeof(st);

    if (b == NULL || out_stats == NULL || tap_type < 0 || BIO_method_type(b) != tap_type)
        return 0;
    t = BIO_get_data(b);
    /* The kernel's counters reset on every read; accumulate them. */
    if (t->pfd >= 0 && getsockopt(t->pfd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
        t->stats.ring_drops += st.tp_drops;
    *out_stats = t->stats;
    return 1;
}

int UTLS_BIO_tap_get_check_stats(BIO *b, UTLS_TAP_CHECK_STATS *out_stats, size_t stats_size)
{
    UTLS_TAP_CHECK_STATS st;
    const tap_ctx *t;

    if (b == NULL || out_stats == NULL || stats_size > sizeof(st) || tap_type < 0
        || BIO_method_type(b) != tap_type)
        return 0;
    t = BIO_get_data(b);
    memset(&st, 0, sizeof(st));
    st.passed = t->val.counts[UTLS_TAP_SEG_OK];
    st.bad_checksum = t->val.counts[UTLS_TAP_SEG_BAD_CHECKSUM];
    st.bad_flags = t->val.counts[UTLS_TAP_SEG_BAD_FLAGS];
    st.out_of_window = t->val.counts[UTLS_TAP_SEG_OUT_OF_WINDOW];
    st.bad_ack = t->val.counts[UTLS_TAP_SEG_BAD_ACK];
    st.paws = t->val.counts[UTLS_TAP_SEG_PAWS];
    st.checksum_unchecked = t->val.csum_unchecked;
    st.checksum_by_device = t->val.csum_by_device;
    memcpy(out_stats, &st, stats_size);
    return 1;
}
