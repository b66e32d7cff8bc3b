/*
 * The tap BIO: uTCP's fragments from a stock Linux kernel.
 *
 * The process-wide tap (tap_hub.c) captures each segment as it reaches the
 * host, before TCP's reordering queue, and gives it to its connection by
 * 4-tuple. The tap BIO is a filter over the connection's socket BIO: in-order
 * bytes still come from the socket (the kernel's TCP stays the authority and
 * does ACKs, SACK, retransmission and flow control), and the segments the hub
 * handed to this connection go into its own segment store, which reports
 * those past a hole as fragments. A segment's stream offset is its sequence
 * number minus the peer's ISN minus 1; the hub reads the ISN from what the
 * local kernel sent (the SYN-ACK of a listener, the ACK of a connecting
 * socket).
 *
 * Everything captured is untrusted: packets are seen before TCP checks them.
 * Parsing is bounds-checked, and nothing captured is ever delivered without
 * being authenticated by the record layer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/tap_local.h"
#include "bio/tap_validate.h"

/* How long a blocking read waits on the shared descriptor before it looks at
 * its own inbox again, when other connections share the tap: another thread
 * may have drained this connection's segments between the look and the
 * wait. */
#define TAP_SHARED_WAIT_MS 5

/* A socket last seen non-blocking is asked again (fcntl) only every this many
 * reads: an event loop's reads then cost no extra syscall each. One seen
 * blocking is asked every time, so that a switch to non-blocking is never
 * answered with a wait; a switch the other way is seen within this many
 * reads (until then a read goes straight to recv(), in order, as stock). */
#define TAP_NONBLOCK_RECHECK 32

/* --- The tap BIO ------------------------------------------------------------ */

struct tap_ctx_st {
    int sock;                 /* the TCP socket (owned by the next BIO) */
    void *att;                /* the hub's flow, NULL when not capturing */
    uint64_t gen;             /* the hub's generation at attach */
    uint32_t stream_seq0;     /* sequence number of stream offset 0: ISN + 1 */
    utls_segstore *cap;       /* captured bytes: fragments past a hole */
    uint64_t sock_read_off;   /* stream offset of the next byte from the socket */
    int woke;
    unsigned nonblock_left;   /* reads before O_NONBLOCK is asked again; 0: ask */
    utls_bio_signals sig; /* always "maybe": the hub is checked in memory */
    UTLS_TAP_STATS stats;
    /* Event-loop readiness (lib/bio/evloop.c): a poller thread drains the hub
     * and tests the store while another thread may be in SSL_read. |lock|
     * serialises every use of |cap| (never held across a wait). */
    CRYPTO_RWLOCK *lock;
    uint64_t token;   /* pushes that added fragment events */
    uint64_t wakeups; /* readiness reports for fragments alone */
    /* The local kernel's in-order point (SIOCINQ past sock_read_off) when
     * the ring was last drained, and what validation knows (tap_validate.h). */
    uint64_t confirmed;
    /* Segments on their way into the socket (UTLS_TAP_INFLIGHT_GRACE_NS),
     * in the order taken; |fl_end|: where the last of them ends. */
    tap_pkt *fl_head, *fl_tail;
    size_t fl_bytes;
    uint64_t fl_end;
    utls_tap_validator val;
    utls_tap_kernel_query query;
};

static void tap_lock_w(tap_ctx *t)
{
    if (t->lock != NULL)
        (void)CRYPTO_THREAD_write_lock(t->lock);
}

static void tap_unlock(tap_ctx *t)
{
    if (t->lock != NULL)
        (void)CRYPTO_THREAD_unlock(t->lock);
}

static int tap_type = -1;

static void pkt_list_free(tap_pkt *p)
{
    tap_pkt *n;

    for (; p != NULL; p = n) {
        n = p->next;
        OPENSSL_free(p);
    }
}

static void tap_ctx_free(tap_ctx *t)
{
    if (t == NULL)
        return;
    pkt_list_free(t->fl_head);
    utls_tap_hub_detach(t->att, t->gen);
    utls_segstore_free(t->cap);
    CRYPTO_THREAD_lock_free(t->lock);
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

/* tap_accept computes the stream offset of |p| (p->off) and validates it:
 * 1 if it goes on towards the store, 0 if it is dropped (what the kernel
 * would drop, or a segment behind the read point that only teaches the
 * validator). */
static int tap_accept(tap_ctx *t, tap_pkt *p)
{
    uint64_t end;
    int32_t d;

    t->stats.packets++;
    /* Widen the 32-bit offset around the captured in-order end (RFC 1982). */
    end = utls_segstore_inorder_end(t->cap);
    d = (int32_t)((p->seq - t->stream_seq0) - (uint32_t)end);
    if (d < 0 && (uint64_t)(-(int64_t)d) > end)
        return 0;
    p->off = end + (int64_t)d;
    /* What the kernel would drop does not enter the store (tap_validate.h):
     * the hub read the checksum and headers (p->hdr) from the raw packet;
     * the window, ACK and PAWS checks need this connection's state. */
    return utls_tap_validate_hdr(&t->val, &p->hdr, p->len, p->off, t->confirmed, &t->query)
               == UTLS_TAP_SEG_OK
           && !p->behind;
}

static void tap_push(tap_ctx *t, const tap_pkt *p)
{
    size_t nev;

    t->stats.payload_bytes += p->len;
    if (p->arrival_ns > t->stats.last_byte_ns)
        t->stats.last_byte_ns = p->arrival_ns;
    ERR_set_mark();
    nev = utls_segstore_num_events(t->cap);
    if (!utls_segstore_push(t->cap, p->off, p->data, p->len, p->arrival_ns))
        ERR_pop_to_mark(); /* outside the window: like TCP, ignore it */
    else
        ERR_clear_last_mark();
    if (utls_segstore_num_events(t->cap) > nev)
        t->token++;
}

/* tap_in_flight: is |p| on its way into the socket? It starts at or before
 * the kernel's in-order point, or right after a segment that is, and the
 * hub took it less than the grace ago (tap_local.h). */
static int tap_in_flight(const tap_ctx *t, const tap_pkt *p, uint64_t now)
{
    uint64_t edge = t->fl_head != NULL && t->fl_end > t->confirmed ? t->fl_end : t->confirmed;

    return p->off <= edge && now - p->seen_ns < UTLS_TAP_INFLIGHT_GRACE_NS;
}

/* tap_hold puts |p| at the end of the segments held in flight. */
static void tap_hold(tap_ctx *t, tap_pkt *p)
{
    p->next = NULL;
    if (t->fl_tail != NULL)
        t->fl_tail->next = p;
    else
        t->fl_head = p;
    t->fl_tail = p;
    t->fl_bytes += UTLS_TAP_PKT_COST(p->len);
    if (p->off + p->len > t->fl_end)
        t->fl_end = p->off + p->len;
}

/* tap_settle looks again at the segments held in flight: one the kernel
 * has queued since goes (its bytes come from the socket), and teaches the
 * validator as a segment behind the in-order point does. One the kernel has
 * not queued within the grace was rejected (a forged copy, a full receive
 * buffer): from the kernel's view it is a hole, so it and every segment held
 * after it enter the store at once; so do all of them past the bound. The
 * kernel is asked (one ioctl) before the first of them counts as a hole,
 * unless |asked|: it may have queued the segment for a reader that has not
 * read it yet. */
static void tap_settle(tap_ctx *t, uint64_t now, int asked)
{
    tap_pkt **pp = &t->fl_head, *p;
    int flush = t->fl_bytes > UTLS_TAP_INFLIGHT_MAX_BYTES;

    t->fl_tail = NULL;
    t->fl_end = 0;
    while ((p = *pp) != NULL) {
        int done = p->off + p->len <= t->confirmed;
        int due = flush || now - p->seen_ns >= UTLS_TAP_INFLIGHT_GRACE_NS;

        if (!done && due && !asked) {
            tap_confirm(t);
            asked = 1;
            done = p->off + p->len <= t->confirmed;
        }
        if (done) {
            utls_tap_validator_learn(&t->val, &p->hdr);
        } else if (due) {
            tap_push(t, p);
            flush = done = 1;
        }
        if (done) {
            *pp = p->next;
            t->fl_bytes -= UTLS_TAP_PKT_COST(p->len);
            OPENSSL_free(p);
            continue;
        }
        if (p->off + p->len > t->fl_end)
            t->fl_end = p->off + p->len;
        t->fl_tail = p;
        pp = &p->next;
    }
}

/* tap_hold_takes_all: would the hold take every segment of the list |p| that
 * reaches past the in-order point we know (|t->confirmed|), without asking
 * the kernel? It does when each starts at or before where the segments held
 * and taken so far end, and was taken within the grace: the next bytes of
 * the stream, which the socket returns (or, if the kernel rejected them, the
 * grace ends and the kernel is asked then). */
static int tap_hold_takes_all(const tap_ctx *t, const tap_pkt *p, uint64_t now)
{
    uint64_t edge = t->fl_head != NULL && t->fl_end > t->confirmed ? t->fl_end : t->confirmed;

    for (; p != NULL; p = p->next) {
        uint32_t es = t->stream_seq0 + (uint32_t)edge;
        int32_t end = (int32_t)(p->seq + (uint32_t)p->len - es);

        if (p->behind || end <= 0)
            continue; /* within what is known to be in order */
        if ((int32_t)(p->seq - es) > 0 || now - p->seen_ns >= UTLS_TAP_INFLIGHT_GRACE_NS)
            return 0;
        edge += (uint64_t)end;
    }
    return 1;
}

/* tap_drain moves what the hub holds for this connection into its store.
 * Bytes the socket has returned are in order by definition. One ioctl
 * (tap_confirm) asks the kernel how far it has queued when a segment taken
 * reaches past what is known and the hold would not take it (it may be past
 * a hole), after the take so that the kernel's in-order point is at least as
 * new as every segment taken. The next bytes of a stream with no hole are
 * held, and go when the socket returns them: a connection with no hole costs
 * no ioctl. */
static void tap_drain(tap_ctx *t)
{
    tap_pkt *p, *n;
    int asked = 0;
    uint64_t now;

    /* The common case of a read on a quiet connection: nothing arrived,
     * nothing held; no lock of the hub's, no clock. */
    if (t->fl_head == NULL && utls_tap_hub_idle(t->att, t->gen))
        return;
    p = utls_tap_hub_take(t->att, t->gen);
    if (p == NULL && t->fl_head == NULL)
        return;
    if (t->sock_read_off > t->confirmed)
        t->confirmed = t->sock_read_off;
    now = utls_now_ns();
    if (!tap_hold_takes_all(t, p, now)) {
        tap_confirm(t);
        asked = 1;
    } else {
        utls_tap_validator_drain(&t->val);
    }
    for (; p != NULL; p = n) {
        n = p->next;
        if (tap_accept(t, p) && p->off + p->len > t->confirmed) {
            if (!asked && !tap_in_flight(t, p, now)) {
                /* Nothing enters the store without the kernel asked first
                 * (one the look ahead counted on was refused since). */
                tap_confirm(t);
                asked = 1;
            }
            if (p->off + p->len > t->confirmed) {
                if (tap_in_flight(t, p, now)) {
                    tap_hold(t, p);
                    continue;
                }
                tap_push(t, p);
            }
        }
        OPENSSL_free(p);
    }
    if (t->fl_head != NULL)
        tap_settle(t, now, asked);
}

/* tap_flight_wait_ms: how long a blocking read may wait before a segment
 * held in flight must be looked at again; -1 when none is held. */
static int tap_flight_wait_ms(const tap_ctx *t)
{
    uint64_t now, due;

    if (t->fl_head == NULL)
        return -1;
    now = utls_now_ns();
    due = t->fl_head->seen_ns + UTLS_TAP_INFLIGHT_GRACE_NS;
    return due <= now ? 0 : (int)((due - now + 999999u) / 1000000u);
}

/*
 * tap_attach sets up the capture for the connected socket |fd|, whose next
 * byte from the socket has stream offset |read_off|. Returns 1, or 0 with an
 * error raised.
 */
static int tap_attach(tap_ctx *t, int fd, uint64_t read_off)
{
    tap_key key;
    uint32_t isn, local_isn;
    int local_connected;

    if (!utls_tap_key_of_socket(fd, &key)) {
        utls_raise(UTLS_R_TAP_SYSCALL, "fd %d is not a connected TCP/IP socket", fd);
        return 0;
    }
    if (!utls_tap_hub_open() || (t->cap = utls_segstore_new()) == NULL)
        return 0;
    if ((t->att = utls_tap_hub_attach(&key, t, fd, &t->gen, &isn, &local_isn, &local_connected))
        == NULL)
        return 0;
    t->sock = fd;
    t->stream_seq0 = isn + 1;
    t->sock_read_off = read_off;
    t->confirmed = read_off;
    t->query = utls_tap_socket_query(&t->sock);
    /* The hub saw our kernel's own SYN or SYN-ACK: the ACK check is exact. */
    utls_tap_validator_set_send_base(&t->val, local_isn, local_connected);
    utls_segstore_skip_inorder(t->cap, read_off);
    utls_tap_hub_note_read(t->att, t->stream_seq0 + (uint32_t)read_off);
    return 1;
}

static int tap_new(BIO *b)
{
    tap_ctx *t = OPENSSL_zalloc(sizeof(*t));

    if (t == NULL)
        return 0;
    t->sock = -1;
    t->sig.pending = 1;
    if ((t->lock = CRYPTO_THREAD_lock_new()) == NULL) {
        OPENSSL_free(t);
        return 0;
    }
    BIO_set_data(b, t);
    BIO_set_init(b, 1);
    return 1;
}

static int tap_free(BIO *b)
{
    tap_ctx *t;

    if (b == NULL)
        return 0;
    t = BIO_get_data(b);
    if (t != NULL && t->att != NULL)
        utls_evloop_unregister(t->sock, b); /* no poller may reach it now */
    tap_ctx_free(t);
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
    if (t->att != NULL) {
        tap_lock_w(t);
        tap_drain(t);
        tap_unlock(t);
        if (t->nonblock_left > 0) {
            t->nonblock_left--;
            fl = O_NONBLOCK;
        } else {
            fl = fcntl(t->sock, F_GETFL);
            if (fl >= 0 && (fl & O_NONBLOCK) != 0)
                t->nonblock_left = TAP_NONBLOCK_RECHECK - 1;
        }
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
                                      {.fd = utls_tap_hub_fd(), .events = POLLIN}};
                int wait_ms = -1, n, timed = 0, fw;
                size_t nev;

                tap_lock_w(t);
                nev = utls_segstore_num_events(t->cap);
                fw = tap_flight_wait_ms(t);
                tap_unlock(t);
                if (nev > 0) {
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
                    timed = 1;
                }
                if (utls_tap_hub_num_attached() > 1
                    && (wait_ms < 0 || wait_ms > TAP_SHARED_WAIT_MS))
                    wait_ms = TAP_SHARED_WAIT_MS;
                if (fw >= 0 && (wait_ms < 0 || wait_ms > fw))
                    wait_ms = fw; /* a segment held in flight is due */
                n = utls_tap_poll(p, p[1].fd >= 0 ? 2 : 1, wait_ms);
                if (n < 0) {
                    if (errno == EINTR)
                        continue;
                    break;
                }
                if (n == 0 && timed && utls_now_ns() >= deadline) {
                    errno = EAGAIN;
                    BIO_set_retry_read(b);
                    return -1;
                }
                tap_lock_w(t);
                tap_drain(t);
                nev = utls_segstore_num_events(t->cap);
                tap_unlock(t);
                if (p[0].revents != 0 && nev == 0)
                    break;
            }
        }
    }
    r = BIO_read(next, out, outl);
    BIO_copy_next_retry(b);
    if (r > 0) {
        t->sock_read_off += (uint64_t)r;
        utls_tap_hub_note_read(t->att, t->stream_seq0 + (uint32_t)t->sock_read_off);
        if (t->cap != NULL) {
            tap_lock_w(t);
            utls_segstore_skip_inorder(t->cap, t->sock_read_off);
            tap_unlock(t);
            /* The in-order stream moved: fragments may wake the loop again. */
            __atomic_store_n(&t->sig.spurious_run, 0, __ATOMIC_RELAXED);
        }
    }
    return r;
}

/*
 * tap_evloop_ready: could a read of the SSL over this tap deliver a record
 * without its socket being readable? Yes when the SSL holds a record verified
 * past a hole, or when captured bytes past the hole wait to be looked at (a
 * cheap test: nothing is decrypted here; the read that follows verifies them,
 * and a read that finds nothing is a spurious wake-up, counted and bounded by
 * UTLS_EVLOOP_MAX_SPURIOUS_RUN). Readiness is per connection even though the
 * capture descriptor is shared; the store is used under the tap's lock.
 */
static long tap_evloop_ready(tap_ctx *t, utls_evloop_state *out)
{
    size_t nev, held;
    int ready;

    tap_lock_w(t);
    tap_drain(t);
    nev = utls_segstore_num_events(t->cap);
    held = __atomic_load_n(&t->sig.held_for_reader, __ATOMIC_ACQUIRE);
    ready = held > 0;
    if (!ready && nev > 0
        && __atomic_load_n(&t->sig.spurious_run, __ATOMIC_RELAXED) < UTLS_EVLOOP_MAX_SPURIOUS_RUN) {
        ready = 1;
        if (!__atomic_exchange_n(&t->sig.offered, 1, __ATOMIC_ACQ_REL))
            t->wakeups++;
    }
    if (out != NULL) {
        out->token = t->token;
        out->wakeups = t->wakeups;
        out->spurious = __atomic_load_n(&t->sig.spurious, __ATOMIC_RELAXED);
    }
    tap_unlock(t);
    return ready;
}

static long tap_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    tap_ctx *t = BIO_get_data(b);
    BIO *next = BIO_next(b);

    switch (cmd) {
    case UTLS_BIO_CTRL_NEXT_FRAGMENT:
        if (t->att == NULL)
            return 0;
        tap_lock_w(t);
        tap_drain(t);
        if (!utls_segstore_take_event(t->cap, ptr)) {
            tap_unlock(t);
            return 0;
        }
        tap_unlock(t);
        t->stats.fragments++;
        return 1;
    case UTLS_BIO_CTRL_READ_OFFSET:
        if (t->att == NULL)
            return 0;
        *(uint64_t *)ptr = t->sock_read_off;
        return 1;
    case UTLS_BIO_CTRL_INORDER_END: {
        int avail = 0;

        /* The kernel's count, not the capture's: only bytes the socket will
         * really return count as in order. */
        if (t->att == NULL || ioctl(t->sock, FIONREAD, &avail) != 0 || avail < 0)
            return 0;
        *(uint64_t *)ptr = t->sock_read_off + (uint64_t)avail;
        return 1;
    }
    case UTLS_BIO_CTRL_EVLOOP_READY:
        return t->att != NULL ? tap_evloop_ready(t, ptr) : 0;
    case UTLS_BIO_CTRL_TAKE_WAKEUP: {
        int w = t->woke;

        t->woke = 0;
        return w;
    }
    case UTLS_BIO_CTRL_GET_CAPTURE_FD:
        /* One descriptor shared by every tapped connection of the process. */
        return t->att != NULL ? utls_tap_hub_fd() : -1;
    case UTLS_BIO_CTRL_GET_SIGNALS:
        if (t->att == NULL)
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
    (void)utls_evloop_register(fd, tap);
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

    if (b == NULL || out_stats == NULL || tap_type < 0 || BIO_method_type(b) != tap_type)
        return 0;
    t = BIO_get_data(b);
    /* Drops happen in the one ring every connection shares. */
    t->stats.ring_drops = utls_tap_hub_ring_drops();
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
