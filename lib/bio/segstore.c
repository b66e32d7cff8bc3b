/*
 * Fragment sources: the segment BIO and the uTCP BIO.
 *
 * Both stand where a TCP socket would. They keep a receive buffer like the
 * kernel's: bytes contiguous from the read point are returned by BIO_read()
 * (the authoritative in-order stream), bytes past a hole wait in a sparse
 * store until the hole fills. When it fills, the run held past it is not
 * copied: the in-order stream goes on in the store, and BIO_read() returns
 * those bytes from there (store-backed in-order bytes, seg_read_inorder).
 * Bytes past a hole are also queued as fragment
 * events, which the SSL takes through UTLS_BIO_CTRL_NEXT_FRAGMENT to deliver
 * records early. The segment BIO gets segments from the caller; the uTCP BIO
 * reads Minion's uTCP units (flags, 32-bit TCP sequence offset, data) from
 * the next BIO in its chain.
 */
#include <limits.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>

#include "common/utls_common.h"
#include "bio/utls_bio.h"

/* The default receive window: a large TCP receive buffer. Segments beyond it
 * are refused (TCP would drop them; the sender retransmits). */
#define UTLS_SEG_DEFAULT_WINDOW ((uint64_t)16 << 20)
/* Runs the receive buffer may hold past a hole: a TCP out-of-order queue is
 * bounded the same way by its memory accounting. */
#define UTLS_SEG_MAX_RUNS ((size_t)1 << 16)
/* Fragment events not yet taken by the SSL (they point into the store, which
 * bounds their bytes). Past this, the oldest events are dropped: the
 * out-of-order side loses them, the in-order stream does not. */
#define UTLS_SEG_MAX_EVENTS ((size_t)4096)
/* The largest uTCP unit read from the next BIO: a 64 KiB TSO segment. */
#define UTLS_UTCP_MAX_UNIT (5 + 65536)

/* A fragment event names bytes held in the store; it copies nothing. */
typedef struct {
    uint64_t offset;
    size_t len;
    uint64_t arrival_ns;
} seg_event;

struct utls_segstore_st {
    /* In-order bytes: stream offsets [read_off, read_off + inorder_len) in
     * |inorder|, then [read_off + inorder_len, + held_inorder) in the store's
     * run that holds them (a run held past a hole that filled): BIO_read()
     * returns them from there, uncopied. While held_inorder > 0, in-order
     * bytes that arrive go into the store behind them, so that stream order
     * is kept; they are copied into |inorder| (seg_spill) only before an
     * insert that could evict from the store, or before in-order bytes that
     * would reach past the window counted from read_off (the store would
     * drop them). */
    unsigned char *inorder;
    size_t inorder_start, inorder_len, inorder_cap;
    uint64_t read_off;
    int eof_known;
    uint64_t eof_off;
    /* Bytes past the first hole, stream offsets >= read_off + inorder_len. */
    utls_reasm *ooo;
    uint64_t window;
    /* Fragment events for the SSL: a ring. */
    seg_event *events;
    size_t ev_head, ev_count;
    /* Written bytes: an internal buffer, or a BIO. */
    unsigned char *out;
    size_t out_len, out_cap;
    BIO *out_bio;
    /* uTCP: the unit being parsed. */
    unsigned char *unit;
    /* A read returned early only because fragments arrived. */
    int woke;
    /* For the SSL: events queued + woke, kept up to date below. */
    utls_bio_signals sig;
    /* The tap: contiguous bytes are not kept (the socket delivers them), only
     * the point they reach. */
    int discard_inorder;
    /* In-order bytes held in the store, after |inorder|'s (see above). Last:
     * the fields above keep the places the in-order path has them in. */
    uint64_t held_inorder;
};
typedef struct utls_segstore_st seg_ctx;

static uint64_t seg_inorder_end(const seg_ctx *c)
{
    return c->read_off + c->inorder_len + c->held_inorder;
}

/* seg_inorder_avail: in-order bytes BIO_read() can return now. */
static uint64_t seg_inorder_avail(const seg_ctx *c)
{
    return c->inorder_len + c->held_inorder;
}

static int seg_reserve(unsigned char **buf, size_t *cap, size_t need)
{
    unsigned char *n;
    /* 64 KiB to start: a few records fit, so the in-order buffer rarely moves. */
    size_t ncap = *cap ? *cap : 65536;

    if (need <= *cap)
        return 1;
    while (ncap < need)
        ncap *= 2;
    if ((n = OPENSSL_realloc(*buf, ncap)) == NULL)
        return 0;
    *buf = n;
    *cap = ncap;
    return 1;
}

/* seg_append_inorder adds bytes at the in-order end. */
static int seg_append_inorder(seg_ctx *c, const unsigned char *data, size_t len)
{
    if (c->discard_inorder) {
        c->read_off += len;
        return 1;
    }
    if (c->inorder_start > 0 && c->inorder_start + c->inorder_len + len > c->inorder_cap) {
        memmove(c->inorder, c->inorder + c->inorder_start, c->inorder_len);
        c->inorder_start = 0;
    }
    if (!seg_reserve(&c->inorder, &c->inorder_cap, c->inorder_start + c->inorder_len + len))
        return 0;
    memcpy(c->inorder + c->inorder_start + c->inorder_len, data, len);
    c->inorder_len += len;
    return 1;
}

static void seg_event_drop_oldest(seg_ctx *c)
{
    c->ev_head = (c->ev_head + 1) % UTLS_SEG_MAX_EVENTS;
    c->ev_count--;
    c->sig.pending = c->ev_count + (size_t)c->woke;
}

static void seg_queue_event(seg_ctx *c, uint64_t offset, size_t len, uint64_t arrival_ns)
{
    seg_event *e;

    if (len == 0)
        return;
    if (c->ev_count == UTLS_SEG_MAX_EVENTS)
        seg_event_drop_oldest(c);
    e = &c->events[(c->ev_head + c->ev_count) % UTLS_SEG_MAX_EVENTS];
    e->offset = offset;
    e->len = len;
    /* The clock is read only for bytes past a hole, never on the in-order path. */
    e->arrival_ns = arrival_ns != 0 ? arrival_ns : utls_now_ns();
    c->ev_count++;
    c->sig.pending = c->ev_count + (size_t)c->woke;
}

/* seg_pull_contiguous makes the bytes of the sparse store that became
 * contiguous with the in-order end part of the in-order stream, without
 * copying them: they stay in the store, and BIO_read() returns them from
 * there (seg_read_inorder). The SSL may still scan them, and skips records
 * it verified there unread (UTLS_BIO_CTRL_DISCARD). */
static int seg_pull_contiguous(seg_ctx *c)
{
    utls_reasm_run run;
    uint64_t end = seg_inorder_end(c);

    /* Nothing held past a hole (the common case): nothing can join. */
    if (utls_reasm_num_fragments(c->ooo) == 0)
        return 1;

    /* Runs never touch, so at most one run holds the in-order end. */
    if (utls_reasm_find_run(c->ooo, &run, end)) {
        uint64_t grow = run.offset + run.len - end;

        if (c->discard_inorder)
            c->read_off += grow; /* the tap keeps no in-order bytes */
        else
            c->held_inorder += grow;
    }
    /* The tap: what it held is returned at once. */
    utls_reasm_advance(c->ooo, c->read_off);
    return 1;
}

/* seg_spill copies the store-backed in-order bytes into |inorder| (behind
 * the bytes already there: stream order is kept), so that an insert may
 * evict from the store without losing a byte of the in-order stream. The
 * store keeps its copy until the reader passes it, as before. Rare: only
 * when the store is at a limit. */
static UTLS_COLD int seg_spill(seg_ctx *c)
{
    utls_reasm_run run;
    uint64_t from = c->read_off + c->inorder_len;

    if (c->held_inorder == 0)
        return 1;
    if (!utls_reasm_find_run(c->ooo, &run, from)
        || run.offset + run.len - from < c->held_inorder) {
        /* Cannot happen: nothing evicts these bytes before they are here. */
        ERR_raise_data(ERR_LIB_SSL, ERR_R_INTERNAL_ERROR, "in-order bytes missing from the store");
        return 0;
    }
    if (!seg_append_inorder(c, run.data + (from - run.offset), (size_t)c->held_inorder))
        return 0;
    c->held_inorder = 0;
    return 1;
}

/* seg_store_fits: inserting |len| bytes cannot make the store evict (it
 * evicts only past max_bytes = window, or past UTLS_SEG_MAX_RUNS runs; one
 * insert adds at most one run). */
static int seg_store_fits(const seg_ctx *c, size_t len)
{
    return utls_reasm_bytes_held(c->ooo) + len <= c->window
        && utls_reasm_num_fragments(c->ooo) < UTLS_SEG_MAX_RUNS;
}

/* seg_first_held finds the first held run at or past the in-order end. */
static int seg_first_held(const seg_ctx *c, uint64_t end, utls_reasm_run *out_run)
{
    if (end == 0)
        return utls_reasm_first_run(c->ooo, out_run);
    return utls_reasm_next_run(c->ooo, out_run, end - 1);
}

/* seg_store_insert puts bytes past the in-order end into the sparse store.
 * If that evicted held bytes (a limit), they may come back with other values:
 * the epoch moves, so nothing verified from the old ones is trusted unseen. */
static utls_reasm_result seg_store_insert(seg_ctx *c, uint64_t offset, const unsigned char *data,
                                          size_t len)
{
    utls_reasm_stats before, after;
    utls_reasm_result r;

    /* The store's in-order point is the read point: bytes the reader has not
     * taken yet stay (seg_pull_contiguous), and its window counts from there
     * as a TCP receive window does. */
    utls_reasm_advance(c->ooo, c->read_off);
    if (seg_store_fits(c, len))
        return utls_reasm_insert(c->ooo, offset, data, len); /* no limit reached: no eviction */
    /* Eviction takes the farthest bytes first, but may reach the in-order
     * run at the bottom: copy the in-order bytes out of the store first. */
    if (!seg_spill(c))
        return UTLS_REASM_ERROR;
    utls_reasm_get_stats(c->ooo, &before);
    r = utls_reasm_insert(c->ooo, offset, data, len);
    utls_reasm_get_stats(c->ooo, &after);
    if (after.bytes_evicted != before.bytes_evicted)
        c->sig.store_epoch++;
    return r;
}

/*
 * seg_store_window_ok: bytes that go to the store must end within the
 * window counted from the read point, where the store's own window counts
 * from (as a TCP receive window counts unread data). Past it the store would
 * keep only the near part and drop the rest silently, after the push had
 * said it took the segment: a later copy, forged or not, would then win over
 * bytes accepted first. Refused whole instead (UTLS_R_OUTSIDE_WINDOW): the
 * caller offers it again once the reader has moved on. In-order bytes are
 * not bound by this; they never go to the store past its window (seg_spill).
 */
static int seg_store_window_ok(const seg_ctx *c, uint64_t offset, size_t len)
{
    if (offset + len - c->read_off <= c->window)
        return 1;
    utls_raise(UTLS_R_OUTSIDE_WINDOW, "segment ends %llu bytes past the read point, window %llu",
               (unsigned long long)(offset + len - c->read_off), (unsigned long long)c->window);
    return 0;
}

/* seg_push is UTLS_BIO_segment_push on the context. */
static int seg_push(seg_ctx *c, uint64_t offset, const unsigned char *data, size_t len,
                    uint64_t arrival_ns)
{
    uint64_t end = seg_inorder_end(c);
    utls_reasm_run held;

    if (len == 0)
        return 1;
    if (data == NULL || (uint64_t)len > UINT64_MAX - offset) {
        utls_raise(UTLS_R_OFFSET_WRAPS, "segment at %llu, %zu bytes",
                   (unsigned long long)offset, len);
        return 0;
    }
    if (offset + len <= end)
        return 1; /* already received: a retransmission or duplicate */
    if (offset + len - end > c->window) {
        utls_raise(UTLS_R_OUTSIDE_WINDOW, "segment ends %llu bytes past the read point, window %llu",
                   (unsigned long long)(offset + len - c->read_off),
                   (unsigned long long)c->window);
        return 0;
    }
    if (offset <= end) {
        /* At or straddling the in-order end: TCP would deliver it now. */
        size_t skip = (size_t)(end - offset), take = len - skip;
        int any_held;

        if (c->held_inorder > 0) {
            utls_reasm_advance(c->ooo, c->read_off); /* what was read is not held */
            if ((end + take - c->read_off > c->window || !seg_store_fits(c, take))
                && !seg_spill(c))
                return 0;
            if (c->held_inorder > 0) {
                /* The in-order stream goes on in the store: append there (the
                 * run grows in place; held bytes past it keep their values),
                 * without an eviction or a window drop (both ruled out above:
                 * the window counts from read_off). */
                switch (seg_store_insert(c, end, data + skip, take)) {
                case UTLS_REASM_STORED:
                case UTLS_REASM_NO_NEW_DATA:
                    return seg_pull_contiguous(c);
                case UTLS_REASM_DROPPED:
                case UTLS_REASM_INVALID:
                case UTLS_REASM_ERROR:
                default:
                    return 0;
                }
            }
        }
        any_held = utls_reasm_num_fragments(c->ooo) > 0;

        if (any_held && seg_first_held(c, end, &held) && held.offset < offset + len) {
            if (!seg_store_window_ok(c, offset, len))
                return 0;
            /* It reaches bytes held past the hole. Those keep the values they
             * arrived with (the SSL may have authenticated them there, and
             * skips them unread when they come in order: see
             * utls_bio_signals.store); this segment's bytes from there on go
             * through the store, which keeps what it holds and adds only what
             * is new. */
            size_t cut = (size_t)(held.offset - offset);

            if (seg_store_insert(c, held.offset, data + cut, len - cut) == UTLS_REASM_ERROR)
                return 0;
            take = cut - skip;
        }
        if (!seg_append_inorder(c, data + skip, take))
            return 0;
        /* Nothing held past a hole (the common case): nothing can join. */
        return !any_held || seg_pull_contiguous(c);
    }
    /* Past a hole: keep it for the in-order stream, and tell the SSL. */
    if (!seg_store_window_ok(c, offset, len))
        return 0;
    switch (seg_store_insert(c, offset, data, len)) {
    case UTLS_REASM_STORED:
        seg_queue_event(c, offset, len, arrival_ns);
        return 1;
    case UTLS_REASM_NO_NEW_DATA:
        return 1;
    case UTLS_REASM_DROPPED:
        utls_raise(UTLS_R_OUTSIDE_WINDOW, "receive buffer full");
        return 0;
    case UTLS_REASM_INVALID:
    case UTLS_REASM_ERROR:
    default:
        return 0;
    }
}

static seg_ctx *seg_ctx_new(void)
{
    seg_ctx *c = OPENSSL_zalloc(sizeof(*c));
    utls_reasm_limits lim;

    if (c == NULL)
        return NULL;
    c->window = UTLS_SEG_DEFAULT_WINDOW;
    lim.max_bytes = (size_t)c->window;
    lim.max_fragments = UTLS_SEG_MAX_RUNS;
    lim.max_window = c->window;
    c->ooo = utls_reasm_new(&lim, 0);
    c->events = OPENSSL_zalloc(sizeof(*c->events) * UTLS_SEG_MAX_EVENTS);
    if (c->ooo == NULL || c->events == NULL) {
        utls_reasm_free(c->ooo);
        OPENSSL_free(c->events);
        OPENSSL_free(c);
        return NULL;
    }
    return c;
}

static void seg_ctx_free(seg_ctx *c)
{
    if (c == NULL)
        return;
    OPENSSL_free(c->events);
    utls_reasm_free(c->ooo);
    OPENSSL_free(c->inorder);
    OPENSSL_free(c->out);
    OPENSSL_free(c->unit);
    OPENSSL_free(c);
}

/* seg_take_buffered passes the first |k| (k <= inorder_len) bytes of the
 * in-order buffer, copying them to |out| unless it is NULL. */
static inline void seg_take_buffered(seg_ctx *c, unsigned char *out, size_t k)
{
    if (out != NULL)
        memcpy(out, c->inorder + c->inorder_start, k);
    c->inorder_start += k;
    c->inorder_len -= k;
    c->read_off += k;
    if (c->inorder_len == 0)
        c->inorder_start = 0;
}

/* seg_consume passes |n| in-order bytes (n <= seg_inorder_avail), copying
 * them to |out| unless it is NULL. Returns 1, or 0 if the store no longer
 * holds bytes it should (cannot happen: see seg_spill). */
static int seg_consume(seg_ctx *c, unsigned char *out, size_t n)
{
    size_t k = c->inorder_len < n ? c->inorder_len : n;
    utls_reasm_run run;

    if (k > 0) {
        seg_take_buffered(c, out, k);
        n -= k;
        if (out != NULL)
            out += k;
    }
    if (n == 0)
        return 1;
    /* Store-backed: one run holds [read_off, read_off + held_inorder). */
    if (!utls_reasm_find_run(c->ooo, &run, c->read_off)
        || run.offset + run.len - c->read_off < n)
        return 0;
    if (out != NULL)
        memcpy(out, run.data + (c->read_off - run.offset), n);
    c->read_off += n;
    c->held_inorder -= n;
    /* Held bytes returned now are the reader's; the store lets them go at its
     * next insert (seg_store_insert), not on every read. */
    return 1;
}

/* seg_read_held is seg_read_inorder while in-order bytes are held in the
 * store (held_inorder > 0): the buffer's bytes, then the store's. Kept out
 * of seg_read_inorder, which every in-order read inlines. */
static UTLS_NOINLINE int seg_read_held(seg_ctx *c, char *out, int outl)
{
    uint64_t avail = seg_inorder_avail(c);
    size_t n;

    if (outl <= 0)
        return 0;
    n = avail < (uint64_t)outl ? (size_t)avail : (size_t)outl;
    if (!seg_consume(c, (unsigned char *)out, n)) {
        ERR_raise_data(ERR_LIB_SSL, ERR_R_INTERNAL_ERROR, "in-order bytes missing from the store");
        return -1;
    }
    return (int)n;
}

static inline int seg_read_inorder(BIO *b, seg_ctx *c, char *out, int outl)
{
    size_t n;

    BIO_clear_retry_flags(b);
    if (c->held_inorder > 0)
        return seg_read_held(c, out, outl);
    if (c->inorder_len > 0) {
        /* The common case: bytes that arrived in order, in the buffer. */
        n = c->inorder_len < (size_t)outl ? c->inorder_len : (size_t)outl;
        seg_take_buffered(c, (unsigned char *)out, n);
        return (int)n;
    }
    if (c->eof_known && c->read_off >= c->eof_off)
        return 0;
    BIO_set_retry_read(b);
    return -1;
}

/* seg_discard is UTLS_BIO_CTRL_DISCARD: passes |len| in-order bytes from
 * stream offset |at| without returning them. Refused (0, nothing changed)
 * unless |at| is the read point and all |len| bytes are here. */
static int seg_discard(seg_ctx *c, uint64_t at, size_t len)
{
    if (at != c->read_off || c->discard_inorder || (uint64_t)len > seg_inorder_avail(c))
        return 0;
    return seg_consume(c, NULL, len);
}

/* seg_take_event hands out the oldest event's bytes where the store holds
 * them now: still past the in-order end (what became in order needs no
 * early delivery) and not evicted. */
static int seg_take_event(seg_ctx *c, utls_bio_fragment *f)
{
    while (c->ev_count > 0) {
        seg_event e = c->events[c->ev_head];
        uint64_t start = e.offset, end = e.offset + e.len, inorder = seg_inorder_end(c);
        utls_reasm_run run;

        seg_event_drop_oldest(c);
        if (start < inorder)
            start = inorder;
        if (start >= end || !utls_reasm_find_run(c->ooo, &run, start))
            continue;
        if (end > run.offset + run.len)
            end = run.offset + run.len;
        f->offset = start;
        f->data = run.data + (start - run.offset);
        f->len = (size_t)(end - start);
        f->arrival_ns = e.arrival_ns;
        return 1;
    }
    return 0;
}

static long seg_common_ctrl(seg_ctx *c, int cmd, long num, void *ptr)
{
    switch (cmd) {
    case UTLS_BIO_CTRL_NEXT_FRAGMENT:
        return seg_take_event(c, ptr);
    case UTLS_BIO_CTRL_READ_OFFSET:
        *(uint64_t *)ptr = c->read_off;
        return 1;
    case UTLS_BIO_CTRL_DISCARD: {
        const utls_bio_discard *d = ptr;

        return d != NULL && seg_discard(c, d->offset, d->len);
    }
    case UTLS_BIO_CTRL_TAKE_WAKEUP: {
        int w = c->woke;

        c->woke = 0;
        c->sig.pending = c->ev_count;
        return w;
    }
    case UTLS_BIO_CTRL_GET_SIGNALS:
        *(const utls_bio_signals **)ptr = &c->sig;
        return 1;
    case BIO_CTRL_PENDING: {
        uint64_t avail = seg_inorder_avail(c);

        return avail > (uint64_t)LONG_MAX ? LONG_MAX : (long)avail;
    }
    case BIO_CTRL_EOF:
        return c->eof_known && c->read_off >= c->eof_off && seg_inorder_avail(c) == 0;
    default:
        (void)num;
        return 0;
    }
}

/* --- The store as the tap uses it ---------------------------------------- */

utls_segstore *utls_segstore_new(void)
{
    seg_ctx *c = seg_ctx_new();

    if (c != NULL)
        c->discard_inorder = 1;
    return c;
}

void utls_segstore_free(utls_segstore *c)
{
    seg_ctx_free(c);
}

int utls_segstore_push(utls_segstore *c, uint64_t offset, const unsigned char *data, size_t len,
                       uint64_t arrival_ns)
{
    return seg_push(c, offset, data, len, arrival_ns);
}

int utls_segstore_take_event(utls_segstore *c, utls_bio_fragment *f)
{
    return seg_take_event(c, f);
}

int utls_segstore_discard(utls_segstore *c, uint64_t at, size_t len)
{
    return seg_discard(c, at, len);
}

void utls_segstore_skip_inorder(utls_segstore *c, uint64_t offset)
{
    /* The socket has delivered up to |offset|: what the capture missed below
     * it is no hole. */
    if (offset > c->read_off) {
        c->read_off = offset;
        utls_reasm_advance(c->ooo, offset);
        seg_pull_contiguous(c);
    }
}

uint64_t utls_segstore_inorder_end(const utls_segstore *c)
{
    return seg_inorder_end(c);
}

size_t utls_segstore_num_events(const utls_segstore *c)
{
    return c->ev_count;
}

int utls_segstore_read_would_block(const utls_segstore *c)
{
    return seg_inorder_avail(c) == 0 && !(c->eof_known && c->read_off >= c->eof_off);
}

/* --- BIO methods ------------------------------------------------------------ */

static int utls_bio_puts(BIO *b, const char *str)
{
    return BIO_write(b, str, (int)strlen(str));
}

BIO_METHOD *utls_bio_method_new(int *out_type, int kind, const char *name,
                                int (*bwrite)(BIO *, const char *, int),
                                int (*bread)(BIO *, char *, int),
                                long (*ctrl)(BIO *, int, long, void *), int (*create)(BIO *),
                                int (*destroy)(BIO *))
{
    BIO_METHOD *m;

    *out_type = BIO_get_new_index() | kind;
    m = BIO_meth_new(*out_type, name);
    if (m == NULL
        || !BIO_meth_set_write(m, bwrite) || !BIO_meth_set_read(m, bread)
        || !BIO_meth_set_puts(m, utls_bio_puts) || !BIO_meth_set_ctrl(m, ctrl)
        || !BIO_meth_set_create(m, create) || !BIO_meth_set_destroy(m, destroy)) {
        BIO_meth_free(m);
        return NULL;
    }
    return m;
}

/* --- The segment BIO ----------------------------------------------------- */

static int seg_new(BIO *b)
{
    seg_ctx *c = seg_ctx_new();

    if (c == NULL)
        return 0;
    /* The in-order stream is built from the store alone, and held bytes keep
     * their first values (seg_push): the SSL may read fragments from it in
     * place. Not the tap's store (utls_segstore_new). */
    c->sig.store = c->ooo;
    c->sig.events = c;
    BIO_set_data(b, c);
    BIO_set_init(b, 1);
    return 1;
}

static int seg_free(BIO *b)
{
    if (b == NULL)
        return 0;
    seg_ctx_free(BIO_get_data(b));
    BIO_set_data(b, NULL);
    return 1;
}

static int seg_new_segment(BIO *b)
{
    seg_ctx *c;

    if (!seg_new(b))
        return 0;
    c = BIO_get_data(b);
    c->sig.read_is_push_only = 1;
    return 1;
}

static int seg_read(BIO *b, char *out, int outl)
{
    return seg_read_inorder(b, BIO_get_data(b), out, outl);
}

static int seg_write(BIO *b, const char *in, int inl)
{
    seg_ctx *c = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (inl <= 0)
        return 0;
    if (c->out_bio != NULL) {
        int r = BIO_write(c->out_bio, in, inl);

        if (r <= 0 && BIO_should_retry(c->out_bio))
            BIO_set_retry_write(b);
        return r;
    }
    if (!seg_reserve(&c->out, &c->out_cap, c->out_len + (size_t)inl))
        return -1;
    memcpy(c->out + c->out_len, in, (size_t)inl);
    c->out_len += (size_t)inl;
    return inl;
}

static long seg_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    seg_ctx *c = BIO_get_data(b);

    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return c->out_bio != NULL ? BIO_flush(c->out_bio) : 1;
    case BIO_CTRL_WPENDING:
        return (long)c->out_len;
    default:
        return seg_common_ctrl(c, cmd, num, ptr);
    }
}


static CRYPTO_ONCE seg_once = CRYPTO_ONCE_STATIC_INIT;
static BIO_METHOD *seg_method = NULL;
static int seg_type = -1;
static CRYPTO_ONCE utcp_once = CRYPTO_ONCE_STATIC_INIT;
static BIO_METHOD *utcp_method = NULL;
static int utcp_type = -1;

static void seg_method_init(void)
{
    seg_method = utls_bio_method_new(&seg_type, BIO_TYPE_SOURCE_SINK, "uTLS segment", seg_write,
                                     seg_read, seg_ctrl, seg_new_segment, seg_free);
}

const BIO_METHOD *UTLS_BIO_s_segment(void)
{
    if (!CRYPTO_THREAD_run_once(&seg_once, seg_method_init))
        return NULL;
    return seg_method;
}

static seg_ctx *seg_of(BIO *b)
{
    int type = b != NULL ? BIO_method_type(b) : -1;

    /* No CRYPTO_THREAD_run_once() per push: a BIO of ours was made with a
     * method whose init set its type (before that the types are -1, which no
     * BIO has); any other BIO matches neither. */
    if (type == -1 || (type != seg_type && type != utcp_type)) {
        utls_raise(UTLS_R_NOT_A_SEGMENT_BIO, NULL);
        return NULL;
    }
    return BIO_get_data(b);
}

int UTLS_BIO_segment_push(BIO *b, uint64_t offset, const void *data, size_t len)
{
    seg_ctx *c = seg_of(b);

    return c != NULL && seg_push(c, offset, data, len, 0);
}

int UTLS_BIO_segment_push_eof(BIO *b, uint64_t offset)
{
    seg_ctx *c = seg_of(b);

    if (c == NULL)
        return 0;
    c->eof_known = 1;
    c->eof_off = offset;
    return 1;
}

size_t UTLS_BIO_segment_take_output(BIO *b, void *buf, size_t len)
{
    seg_ctx *c = seg_of(b);
    size_t n;

    if (c == NULL)
        return 0;
    n = c->out_len < len ? c->out_len : len;
    if (n == 0)
        return 0; /* c->out may not exist yet: no pointer arithmetic on NULL */
    memcpy(buf, c->out, n);
    memmove(c->out, c->out + n, c->out_len - n);
    c->out_len -= n;
    return n;
}

int UTLS_BIO_segment_set_output(BIO *b, BIO *out)
{
    seg_ctx *c = seg_of(b);

    if (c == NULL)
        return 0;
    c->out_bio = out;
    return 1;
}

int UTLS_BIO_segment_set_window(BIO *b, uint64_t window)
{
    seg_ctx *c = seg_of(b);
    utls_reasm_limits lim;
    utls_reasm *n;

    if (c == NULL || window == 0)
        return 0;
    lim.max_bytes = window > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)window;
    lim.max_fragments = UTLS_SEG_MAX_RUNS;
    lim.max_window = window;
    utls_reasm_advance(c->ooo, c->read_off); /* what was read is not held */
    if (utls_reasm_bytes_held(c->ooo) != 0) {
        /* Held bytes would have to move; only allowed before data arrives. */
        return 0;
    }
    if ((n = utls_reasm_new(&lim, seg_inorder_end(c))) == NULL)
        return 0;
    utls_reasm_free(c->ooo);
    c->ooo = n;
    if (c->sig.store != NULL)
        c->sig.store = n;
    c->sig.store_epoch++;
    c->window = window;
    return 1;
}

/* --- The uTCP BIO (filter) ----------------------------------------------- */

/* utcp_extend turns a 32-bit TCP sequence offset into the 64-bit stream
 * offset nearest the in-order end (RFC 1982 serial arithmetic). */
static int utcp_extend(const seg_ctx *c, uint32_t off32, uint64_t *out)
{
    uint64_t end = seg_inorder_end(c);
    int32_t d = (int32_t)(off32 - (uint32_t)end);

    if (d < 0 && (uint64_t)(-(int64_t)d) > end)
        return 0;
    *out = end + (int64_t)d;
    return 1;
}

/* utcp_pump reads one unit from the next BIO. Returns 1 if a unit was
 * consumed, 0 at end of file, -1 when the next BIO has nothing (retry) or
 * failed. */
static int utcp_pump(BIO *b, seg_ctx *c)
{
    BIO *next = BIO_next(b);
    int n;
    uint64_t off;

    if (next == NULL)
        return -1;
    if (c->unit == NULL && (c->unit = OPENSSL_malloc(UTLS_UTCP_MAX_UNIT)) == NULL)
        return -1;
    n = BIO_read(next, c->unit, UTLS_UTCP_MAX_UNIT);
    if (n <= 0) {
        BIO_copy_next_retry(b);
        return n == 0 ? 0 : -1;
    }
    if (n < 5) {
        /*
         * Too short to carry an offset: skip it, like a segment outside the
         * window; the in-order stream is unaffected. Nothing goes on the
         * error queue: the SSL_read() under way goes on (or retries), and
         * SSL_get_error() would report any queued error as SSL_ERROR_SSL,
         * making a read that should retry look fatal.
         */
        return 1;
    }
    if (!utcp_extend(c, ((uint32_t)c->unit[1] << 24) | ((uint32_t)c->unit[2] << 16)
                            | ((uint32_t)c->unit[3] << 8) | c->unit[4], &off))
        return 1;
    if (c->unit[0] & UTLS_UTCP_FLAG_EOF) {
        c->eof_known = 1;
        c->eof_off = off;
        return 1;
    }
    ERR_set_mark();
    if (!seg_push(c, off, c->unit + 5, (size_t)n - 5, 0))
        ERR_pop_to_mark(); /* outside the window: like TCP, drop it */
    else
        ERR_clear_last_mark();
    return 1;
}

static int utcp_read(BIO *b, char *out, int outl)
{
    seg_ctx *c = BIO_get_data(b);
    int r;

    BIO_clear_retry_flags(b);
    while (seg_inorder_avail(c) == 0) {
        uint64_t before = c->ev_count;

        if (c->eof_known && c->read_off >= c->eof_off)
            return 0;
        r = utcp_pump(b, c);
        if (r == 0) {
            /* The next BIO ended: so does the stream, at the in-order end. */
            c->eof_known = 1;
            c->eof_off = seg_inorder_end(c);
            continue;
        }
        if (r < 0)
            return -1; /* retry flags copied from the next BIO */
        if (seg_inorder_avail(c) == 0 && c->ev_count > before) {
            /* Data past a hole: give the SSL a chance to deliver it. */
            c->woke = 1;
            c->sig.pending = c->ev_count + 1;
            BIO_set_retry_read(b);
            return -1;
        }
    }
    return seg_read_inorder(b, c, out, outl);
}

/* Filter BIOs (uTCP, tap): writes go straight to the next BIO. */
int utls_bio_filter_write(BIO *b, const char *in, int inl)
{
    BIO *next = BIO_next(b);
    int r;

    BIO_clear_retry_flags(b);
    if (next == NULL)
        return 0;
    r = BIO_write(next, in, inl);
    BIO_copy_next_retry(b);
    return r;
}

static long utcp_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    seg_ctx *c = BIO_get_data(b);
    BIO *next = BIO_next(b);

    switch (cmd) {
    case UTLS_BIO_CTRL_NEXT_FRAGMENT:
    case UTLS_BIO_CTRL_READ_OFFSET:
    case UTLS_BIO_CTRL_DISCARD:
    case UTLS_BIO_CTRL_TAKE_WAKEUP:
    case UTLS_BIO_CTRL_GET_SIGNALS:
    case BIO_CTRL_PENDING:
    case BIO_CTRL_EOF:
        return seg_common_ctrl(c, cmd, num, ptr);
    default:
        return next != NULL ? BIO_ctrl(next, cmd, num, ptr) : 0;
    }
}


static void utcp_method_init(void)
{
    utcp_method = utls_bio_method_new(&utcp_type, BIO_TYPE_FILTER, "uTLS uTCP",
                                      utls_bio_filter_write, utcp_read, utcp_ctrl, seg_new,
                                      seg_free);
}

const BIO_METHOD *UTLS_BIO_f_utcp(void)
{
    if (!CRYPTO_THREAD_run_once(&utcp_once, utcp_method_init))
        return NULL;
    return utcp_method;
}
