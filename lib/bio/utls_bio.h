/*
 * The fragment sources of the receive path (lib/bio/): the segment store
 * behind the segment, uTCP and tap BIOs, the BIO controls and signals the
 * receive path reads them through, and the tap (AF_PACKET capture). Needs
 * no OpenSSL internals: only the public BIO API.
 */
#ifndef UTLS_LIB_BIO_H
#define UTLS_LIB_BIO_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/bio.h>

#include "utls/reasm.h"

/*
 * BIO controls a fragment source answers. They sit above OpenSSL's own
 * BIO_C_* range (which ends below 200 in 3.0) so no stock BIO answers them.
 *
 * UTLS_BIO_CTRL_NEXT_FRAGMENT: ptr is a utls_bio_fragment; returns 1 and fills
 * it with the oldest fragment not yet taken (its data stays valid until the
 * next call on the BIO), 0 if there is none.
 * UTLS_BIO_CTRL_READ_OFFSET: ptr is a uint64_t; returns 1 and stores the
 * stream offset of the next byte BIO_read() will return.
 */

/*
 * The segment store behind the segment, uTCP and tap BIOs: a receive buffer
 * that returns the in-order stream and queues fragments for bytes past a hole
 * (lib/bio/segstore.c).
 */
typedef struct utls_segstore_st utls_segstore;
utls_segstore *utls_segstore_new(void);
void utls_segstore_free(utls_segstore *c);
/* utls_segstore_push: see UTLS_BIO_segment_push. */
int utls_segstore_push(utls_segstore *c, uint64_t offset, const unsigned char *data, size_t len,
                       uint64_t arrival_ns);
/* utls_segstore_skip_inorder drops the in-order bytes (the tap: the socket
 * delivers them) and moves the in-order point to at least |offset|. */
void utls_segstore_skip_inorder(utls_segstore *c, uint64_t offset);
/* utls_segstore_inorder_end: the end of the contiguous bytes received. */
uint64_t utls_segstore_inorder_end(const utls_segstore *c);
/* utls_segstore_num_events: fragments waiting to be taken. */
size_t utls_segstore_num_events(const utls_segstore *c);
/* utls_segstore_read_would_block returns 1 if BIO_read() of the segment BIO
 * on |c| would return -1 with the retry flag set: no in-order byte and no
 * end of stream. */
int utls_segstore_read_would_block(const utls_segstore *c);
#define UTLS_BIO_CTRL_NEXT_FRAGMENT 0x7574 /* "ut" */
#define UTLS_BIO_CTRL_READ_OFFSET 0x7575
/* UTLS_BIO_CTRL_TAKE_WAKEUP: returns 1 (and forgets it) if the last read
 * returned early, with the retry flag, only because fragments arrived while it
 * would otherwise have blocked; 0 otherwise. */
#define UTLS_BIO_CTRL_TAKE_WAKEUP 0x7576
/* UTLS_BIO_CTRL_GET_SIGNALS: ptr is a utls_bio_signals **; returns 1 and
 * stores a pointer to the BIO's signals, which live as long as the BIO. The
 * SSL reads them on every read instead of calling into the BIO. */
#define UTLS_BIO_CTRL_GET_SIGNALS 0x7577
/* UTLS_BIO_CTRL_GET_CAPTURE_FD: a tap BIO returns its packet socket (readable
 * when the ring holds captured segments), for callers that poll; -1 or 0
 * otherwise. */
#define UTLS_BIO_CTRL_GET_CAPTURE_FD 0x7578
/* UTLS_BIO_CTRL_EVLOOP_READY: ptr is a utls_evloop_state; a tap BIO drains its
 * ring under its lock and returns 1 if a read of the SSL over it could deliver
 * a record without the socket being readable (see lib/bio/evloop.c), else 0. */
#define UTLS_BIO_CTRL_EVLOOP_READY 0x757a
/* UTLS_BIO_CTRL_INORDER_END: ptr is a uint64_t; returns 1 and stores the stream
 * offset up to which in-order bytes can be read now without waiting (the tap:
 * what it read from the socket plus what the kernel holds readable), or 0. */
#define UTLS_BIO_CTRL_INORDER_END 0x757b
/* UTLS_BIO_CTRL_DISCARD: ptr is a const utls_bio_discard * (num unused). If
 * its offset is the next byte BIO_read() would return and its len in-order
 * bytes are all here, passes them without returning them and returns 1 (the
 * SSL skips the body of a record it verified out of order:
 * utls_hook_skip_body). Otherwise returns 0 and changes nothing; the caller
 * reads the bytes as usual. Answered by the segment and uTCP BIOs only (0
 * from any other BIO, and from the tap). */
#define UTLS_BIO_CTRL_DISCARD 0x7579
typedef struct {
    uint64_t offset;
    size_t len;
} utls_bio_discard;

/* What a fragment source tells the SSL without a call: |pending| is non-zero
 * when fragments or a wake-up may be waiting (the tap: also when its ring
 * may hold unprocessed blocks), zero when a BIO_ctrl would certainly find
 * nothing. */
typedef struct {
    size_t pending;
    /* The BIO's own store of the bytes past its in-order end, which the SSL
     * reads fragments from instead of keeping a copy (one store, see
     * docs/unordered.md, PERFORMANCE). Set only by a BIO whose in-order
     * stream is built from this store alone and in which a stream byte keeps
     * the value it first arrived with (the segment and uTCP BIOs); NULL for
     * the tap, whose in-order stream comes from the kernel socket. */
    utls_reasm *store;
    /* Counts the events after which a byte once held in |store| could come
     * back with another value: eviction from the store, a new store. A record
     * verified out of order is only trusted to match the in-order stream
     * while this is unchanged. */
    uint64_t store_epoch;
    /* The store whose fragment events UTLS_BIO_CTRL_NEXT_FRAGMENT hands out,
     * when taking one needs nothing else from the BIO (the segment and uTCP
     * BIOs): the SSL takes them with utls_segstore_take_event(), without a
     * BIO_ctrl() per fragment. NULL for the tap, which reads its capture
     * ring first. */
    utls_segstore *events;
    /* Set by the segment BIO alone, whose BIO_read() only returns what the
     * caller pushed: when utls_segstore_read_would_block(events) says so,
     * the SSL may report SSL_ERROR_WANT_READ without the call. */
    int read_is_push_only;
    /* Event-loop readiness (lib/bio/evloop.c, docs/evloop.md), read and
     * written with __atomic builtins because a poller thread reads them
     * while another thread runs SSL_read. |held_for_reader|: records the SSL
     * holds verified past a hole (written by the SSL after every read).
     * |offered|: the tap reported the connection ready for fragments alone,
     * and no read has looked at them yet. |spurious|: reads after such a
     * report that delivered no early record; |spurious_run| the same since
     * the last early record or in-order byte (UTLS_EVLOOP_MAX_SPURIOUS_RUN). */
    size_t held_for_reader;
    int offered;
    uint64_t spurious;
    uint32_t spurious_run;
} utls_bio_signals;

typedef struct {
    uint64_t offset;
    const unsigned char *data;
    size_t len;
    uint64_t arrival_ns;
} utls_bio_fragment;

/* utls_tap_wrap puts a tap in front of the socket BIO |sock| whose next byte
 * has stream offset |read_off|; returns the tap BIO (|sock| becomes its next),
 * or NULL with an error raised and |sock| untouched (lib/bio/tap.c). */
BIO *utls_tap_wrap(BIO *sock, uint64_t read_off);
/* utls_bio_method_new makes the BIO_METHOD of one of our BIOs (puts is
 * BIO_write of the string) and its new type index in |*out_type|; NULL on
 * failure. */
BIO_METHOD *utls_bio_method_new(int *out_type, int kind, const char *name,
                                int (*bwrite)(BIO *, const char *, int),
                                int (*bread)(BIO *, char *, int),
                                long (*ctrl)(BIO *, int, long, void *), int (*create)(BIO *),
                                int (*destroy)(BIO *));
/* utls_bio_filter_write: BIO_write of a filter BIO that passes writes to
 * its next BIO unchanged (uTCP, tap). */
int utls_bio_filter_write(BIO *b, const char *in, int inl);
int utls_tap_start_syn_watch(void);

/* What UTLS_BIO_CTRL_EVLOOP_READY reports besides readiness. */
typedef struct {
    uint64_t token;    /* changes when new bytes past the hole were captured */
    uint64_t wakeups;  /* readiness reports for captured fragments alone */
    uint64_t spurious; /* of those, reads that delivered no early record */
} utls_evloop_state;

/* utls_evloop_register notes that TCP socket |fd| is read through tap BIO
 * |tap| (lib/bio/evloop.c), for the descriptor-level readiness calls; 0 if the
 * registry is full (the connection then just gets no early wake-ups). */
int utls_evloop_register(int fd, BIO *tap);
/* utls_evloop_unregister forgets |tap| (before it is freed). */
void utls_evloop_unregister(int fd, BIO *tap);

/* utls_segstore_take_event: see UTLS_BIO_CTRL_NEXT_FRAGMENT. */
int utls_segstore_take_event(utls_segstore *c, utls_bio_fragment *f);
/* utls_segstore_discard: UTLS_BIO_CTRL_DISCARD of |len| bytes from stream
 * offset |at| on the store behind a segment or uTCP BIO, without a
 * BIO_ctrl(). Returns 1 if they were passed, 0 if refused (nothing changed). */
int utls_segstore_discard(utls_segstore *c, uint64_t at, size_t len);

#endif
