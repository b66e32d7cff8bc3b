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
#include "bio/segstore_local.h"

uint64_t utls_seg_inorder_end(const seg_ctx *c)
{
    return c->read_off + c->inorder_len + c->held_inorder;
}

/* utls_seg_inorder_avail: in-order bytes BIO_read() can return now. */
uint64_t utls_seg_inorder_avail(const seg_ctx *c)
{
    return c->inorder_len + c->held_inorder;
}

int utls_seg_reserve(unsigned char **buf, size_t *cap, size_t need)
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
    if (!utls_seg_reserve(&c->inorder, &c->inorder_cap, c->inorder_start + c->inorder_len + len))
        return 0;
    memcpy(c->inorder + c->inorder_start + c->inorder_len, data, len);
    c->inorder_len += len;
    return 1;
}

static void seg_event_drop_oldest(seg_ctx *c)
{
    c->ev_head = (c->ev_head + 1) % c->ev_cap;
    c->ev_count--;
    c->sig.pending = c->ev_count + (size_t)c->woke;
}

static void seg_queue_event(seg_ctx *c, uint64_t offset, size_t len, uint64_t arrival_ns)
{
    seg_event *e;

    if (len == 0)
        return;
    /* The ring is made on the first fragment (a store that never sees a
     * hole has none) and grows by doubling, in order from its head, up to
     * UTLS_SEG_MAX_EVENTS; then the oldest event goes. */
    if (c->ev_count == c->ev_cap && c->ev_cap < UTLS_SEG_MAX_EVENTS) {
        size_t cap = c->ev_cap == 0 ? UTLS_SEG_MIN_EVENTS : c->ev_cap * 2, i;
        seg_event *ev = OPENSSL_malloc(sizeof(*ev) * cap);

        if (ev == NULL) {
            if (c->ev_cap == 0)
                return; /* the fragment comes in order */
        } else {
            for (i = 0; i < c->ev_count; i++)
                ev[i] = c->events[(c->ev_head + i) % c->ev_cap];
            OPENSSL_free(c->events);
            c->events = ev;
            c->ev_cap = cap;
            c->ev_head = 0;
        }
    }
    if (c->ev_count == c->ev_cap)
        seg_event_drop_oldest(c);
    e = &c->events[(c->ev_head + c->ev_count) % c->ev_cap];
    e->offset = offset;
    e->len = len;
    e->other_copy = 0;
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
    uint64_t end = utls_seg_inorder_end(c);

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

/* seg_stored_past_hole finishes a store of |len| bytes at |offset| past the
 * in-order end, whose result was |r|: new bytes are announced to the SSL as
 * an event, a store that had no room is an error on the queue. Returns 1 or 0
 * as the push does. */
static int seg_stored_past_hole(seg_ctx *c, utls_reasm_result r, uint64_t offset, size_t len,
                                uint64_t arrival_ns)
{
    switch (r) {
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

/*
 * seg_push_captured is utls_seg_push for the tap's store. Its in-order point
 * is the local kernel's (utls_segstore_skip_inorder), never moved by what
 * was captured: a captured segment is a claim the kernel may have rejected
 * (a forged copy at a lost offset that lined up with the in-order end would
 * otherwise hide the hole and every record behind it). So every captured
 * byte at or past the in-order point goes to the store, as bytes past a
 * hole, and the record layer authenticates what it finds there.
 */
static int seg_push_captured(seg_ctx *c, uint64_t offset, const unsigned char *data, size_t len,
                             uint64_t arrival_ns)
{
    uint64_t end = c->read_off;
    utls_reasm_stats before, after;
    utls_reasm_result r;

    if (offset + len <= end)
        return 1; /* the kernel has these bytes */
    if (offset < end) {
        data += end - offset;
        len -= (size_t)(end - offset);
        offset = end;
    }
    if (!seg_store_window_ok(c, offset, len))
        return 0;
    utls_reasm_get_stats(c->ooo, &before);
    r = seg_store_insert(c, offset, data, len);
    utls_reasm_get_stats(c->ooo, &after);
    if (after.alt_copies_kept != before.alt_copies_kept) {
        /* It differed from bytes held: the SSL gets this copy too, and
         * keeps it in case the first one fails to authenticate. */
        seg_queue_event(c, offset, len, arrival_ns);
        c->events[(c->ev_head + c->ev_count - 1) % c->ev_cap].other_copy = 1;
    }
    return seg_stored_past_hole(c, r, offset, len, arrival_ns);
}

/* utls_seg_push is UTLS_BIO_segment_push on the context. */
int utls_seg_push(seg_ctx *c, uint64_t offset, const unsigned char *data, size_t len,
                  uint64_t arrival_ns)
{
    uint64_t end = utls_seg_inorder_end(c);
    utls_reasm_run held;

    if (len == 0)
        return 1;
    if (data == NULL || (uint64_t)len > UINT64_MAX - offset) {
        utls_raise(UTLS_R_OFFSET_WRAPS, "segment at %llu, %zu bytes",
                   (unsigned long long)offset, len);
        return 0;
    }
    if (c->discard_inorder)
        return seg_push_captured(c, offset, data, len, arrival_ns);
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
    return seg_stored_past_hole(c, seg_store_insert(c, offset, data, len), offset, len,
                                arrival_ns);
}

seg_ctx *utls_seg_ctx_new(void)
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
    if (c->ooo == NULL) {
        OPENSSL_free(c);
        return NULL;
    }
    return c;
}

void utls_seg_ctx_free(seg_ctx *c)
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

/* seg_consume passes |n| in-order bytes (n <= utls_seg_inorder_avail), copying
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

/* utls_seg_read_held is seg_read_inorder while in-order bytes are held in the
 * store (held_inorder > 0): the buffer's bytes, then the store's. Kept out
 * of seg_read_inorder, which every in-order read inlines. */
UTLS_NOINLINE int utls_seg_read_held(seg_ctx *c, char *out, int outl)
{
    uint64_t avail = utls_seg_inorder_avail(c);
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

/* seg_discard is UTLS_BIO_CTRL_DISCARD: passes |len| in-order bytes from
 * stream offset |at| without returning them. Refused (0, nothing changed)
 * unless |at| is the read point and all |len| bytes are here. */
static int seg_discard(seg_ctx *c, uint64_t at, size_t len)
{
    size_t k;

    if (at != c->read_off || c->discard_inorder || (uint64_t)len > utls_seg_inorder_avail(c))
        return 0;
    /* Nothing is copied, so the counts alone: the store holds
     * [read_off + inorder_len, + held_inorder) by construction
     * (seg_pull_contiguous, seg_spill), and seg_consume's lookup of that run
     * (a tree search per record skipped) only finds the bytes to copy. */
    k = c->inorder_len < len ? c->inorder_len : len;
    if (k > 0)
        seg_take_buffered(c, NULL, k);
    c->read_off += len - k;
    c->held_inorder -= len - k;
    return 1;
}

/* seg_take_event hands out the oldest event's bytes where the store holds
 * them now: still past the in-order end (what became in order needs no
 * early delivery) and not evicted. */
static int seg_take_event(seg_ctx *c, utls_bio_fragment *f)
{
    while (c->ev_count > 0) {
        seg_event e = c->events[c->ev_head];
        uint64_t start = e.offset, end = e.offset + e.len, inorder = utls_seg_inorder_end(c);
        utls_reasm_run run;

        seg_event_drop_oldest(c);
        if (e.other_copy) {
            /* Handed on whole, from the kept copy (if still kept). */
            if (!utls_reasm_find_alternate(c->ooo, &run, e.offset) || e.offset < inorder)
                continue;
            f->offset = run.offset;
            f->data = run.data;
            f->len = run.len;
            f->arrival_ns = e.arrival_ns;
            return 1;
        }
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

long utls_seg_common_ctrl(seg_ctx *c, int cmd, long num, void *ptr)
{
    switch (cmd) {
    case UTLS_BIO_CTRL_NEXT_FRAGMENT:
        return seg_take_event(c, ptr);
    case UTLS_BIO_CTRL_READ_OFFSET:
        *(uint64_t *)ptr = c->read_off;
        return 1;
    case UTLS_BIO_CTRL_INORDER_END:
        *(uint64_t *)ptr = utls_seg_inorder_end(c);
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
        uint64_t avail = utls_seg_inorder_avail(c);

        return avail > (uint64_t)LONG_MAX ? LONG_MAX : (long)avail;
    }
    case BIO_CTRL_EOF:
        return c->eof_known && c->read_off >= c->eof_off && utls_seg_inorder_avail(c) == 0;
    default:
        (void)num;
        return 0;
    }
}

/* --- The store as the tap uses it ---------------------------------------- */

utls_segstore *utls_segstore_new(void)
{
    seg_ctx *c = utls_seg_ctx_new();

    if (c != NULL) {
        c->discard_inorder = 1;
        /* Its bytes are never the in-order stream (the socket's are): a
         * differing later copy is kept and handed on (seg_push_captured). */
        utls_reasm_keep_alternates(c->ooo, 1);
    }
    return c;
}

void utls_segstore_free(utls_segstore *c)
{
    utls_seg_ctx_free(c);
}

int utls_segstore_push(utls_segstore *c, uint64_t offset, const unsigned char *data, size_t len,
                       uint64_t arrival_ns)
{
    return utls_seg_push(c, offset, data, len, arrival_ns);
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
        /* Held bytes that now touch the in-order point stay held: only the
         * kernel says which bytes it took (seg_push_captured). */
    }
}

uint64_t utls_segstore_inorder_end(const utls_segstore *c)
{
    return utls_seg_inorder_end(c);
}

size_t utls_segstore_num_events(const utls_segstore *c)
{
    return c->ev_count;
}

int utls_segstore_read_would_block(const utls_segstore *c)
{
    return utls_seg_inorder_avail(c) == 0 && !(c->eof_known && c->read_off >= c->eof_off);
}
