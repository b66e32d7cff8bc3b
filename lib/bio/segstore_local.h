/*
 * The segment store's internals (lib/bio/): its limits and structure, shared
 * by the store and the BIOs over it (segment, uTCP; the tap keeps its own
 * context around one). Public OpenSSL headers only.
 */
#ifndef UTLS_LIB_SEGSTORE_LOCAL_H
#define UTLS_LIB_SEGSTORE_LOCAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/bio.h>

#include "utls/reasm.h"
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
/* The event ring starts this small and doubles up to UTLS_SEG_MAX_EVENTS:
 * a connection that meets one hole now and then (most of a server's
 * thousands) holds a few hundred bytes, not the whole bound. */
#define UTLS_SEG_MIN_EVENTS ((size_t)16)
/* The largest uTCP unit read from the next BIO: a 64 KiB TSO segment. */
#define UTLS_UTCP_MAX_UNIT (5 + 65536)

/* A fragment event names bytes held in the store; it copies nothing. */
typedef struct {
    uint64_t offset;
    size_t len;
    uint64_t arrival_ns;
    /* The tap's store: the bytes are a copy that differed from those held
     * (utls_reasm_find_alternate), handed on for the SSL to keep too. */
    int other_copy;
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
    size_t ev_head, ev_count, ev_cap;
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

/* segstore.c: the store itself (see the struct above). */
uint64_t utls_seg_inorder_end(const seg_ctx *c);
uint64_t utls_seg_inorder_avail(const seg_ctx *c);
int utls_seg_reserve(unsigned char **buf, size_t *cap, size_t need);
int utls_seg_push(seg_ctx *c, uint64_t offset, const unsigned char *data, size_t len,
                  uint64_t arrival_ns);
seg_ctx *utls_seg_ctx_new(void);
void utls_seg_ctx_free(seg_ctx *c);
int utls_seg_read_held(seg_ctx *c, char *out, int outl);
long utls_seg_common_ctrl(seg_ctx *c, int cmd, long num, void *ptr);
/* segment_bio.c: BIO create and destroy of a BIO over a new store (the
 * segment and uTCP BIOs). */
int utls_seg_bio_new(BIO *b);
int utls_seg_bio_free(BIO *b);
/* utcp.c: the uTCP BIO's type index, -1 until its method is made. */
extern int utls_utcp_bio_type;

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

static inline int seg_read_inorder(BIO *b, seg_ctx *c, char *out, int outl)
{
    size_t n;

    BIO_clear_retry_flags(b);
    if (c->held_inorder > 0)
        return utls_seg_read_held(c, out, outl);
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

#endif
