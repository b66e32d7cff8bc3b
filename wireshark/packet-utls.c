/* packet-utls.c
 * uTLS dissector plugin for Wireshark 4.0.
 *
 * Two parts, neither of which changes how the stock TCP and TLS dissectors
 * show a stream:
 *
 *  - A postdissector ("uTLS" tree after everything else) that follows every
 *    TCP connection's byte stream in each direction, in capture order, finds
 *    the TLS record boundaries and marks the records that a receiver with
 *    SSL_MODE_UNORDERED could have delivered before TCP did: records whose
 *    last byte arrived while an earlier byte of the stream was still missing
 *    (a hole). It uses Wireshark's own TCP fields (tcp.stream, tcp.seq_raw,
 *    tcp.payload, tcp.flags) and cross-checks its holes with Wireshark's TCP
 *    analysis (tcp.analysis.lost_segment on the segment past a hole,
 *    retransmission / fast retransmission / out-of-order on the one that
 *    fills it). A capture taken at the receiver shows what the receiver saw;
 *    one taken at the sender shows no holes.
 *
 *    Holes are judged by sequence numbers and TCP's segment lengths
 *    (tcp.len), never by what the capture kept: a segment cut by the snap
 *    length is marked truncated and counts whole.
 *
 *  - A heuristic dissector on the "tls" list that sees each decrypted
 *    application data record (with a key log). It records the plaintext
 *    length (and which TLS record of the frame it was, so that the
 *    postdissector can tell application data from alerts and handshake
 *    messages past a hole) and declines the record (returns FALSE), so
 *    the application dissector that would have run still runs. It is where
 *    uTLS messages inside decrypted records (the negotiation and explicit
 *    record numbers) will be recognised once they are specified: a matching
 *    record will be claimed and dissected under utls.negotiation.* and
 *    utls.record_number; nothing is registered for them before they exist.
 *
 * A uCOBS dissector (framing over plain TCP) belongs in its own file and
 * protocol (ucobs), registered from plugin.c next to this one.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later (as Wireshark plugins must be)
 */

#define WS_BUILD_DLL
#include <wireshark.h>

#include <epan/packet.h>
#include <epan/expert.h>
#include <epan/proto.h>
#include <epan/address.h>
#include <epan/tvbuff.h>
#include <wsutil/nstime.h>

#include "packet-utls.h"

/*
 * Limits. The capture is untrusted input: segments past a hole are copied
 * until the hole fills, so an attacker (or a lossy capture) that never fills
 * a hole could make the plugin hold the rest of the stream.
 */
#define UTLS_MAX_HELD_BYTES (64u * 1024u * 1024u) /* per direction; bounds memory per connection */
#define UTLS_MAX_RECORD_LEN (16384u + 2048u)      /* RFC 5246 6.2.3: TLSCiphertext.length <= 2^14 + 2048 */

static int proto_utls = -1;

static int hf_utls_segment_offset = -1;
static int hf_utls_past_hole = -1;
static int hf_utls_hole_bytes = -1;
static int hf_utls_fills_hole = -1;
static int hf_utls_tcp_analysis = -1;
static int hf_utls_record = -1;
static int hf_utls_record_offset = -1;
static int hf_utls_record_type = -1;
static int hf_utls_record_version = -1;
static int hf_utls_record_length = -1;
static int hf_utls_ooo_candidate = -1;
static int hf_utls_completed_in = -1;
static int hf_utls_ooo_wait = -1;
static int hf_utls_record_hole_bytes = -1;
static int hf_utls_completes_record = -1;
static int hf_utls_plaintext_len = -1;
static int hf_utls_truncated = -1;
static int hf_utls_captured_bytes = -1;
static int hf_utls_ooo_record = -1;
static int hf_utls_ooo_record_offset = -1;
static int hf_utls_ooo_record_type = -1;
static int hf_utls_ooo_record_length = -1;
static int hf_utls_ooo_record_plaintext_len = -1;
static int hf_utls_ooo_control = -1;

static gint ett_utls = -1;
static gint ett_utls_record = -1;
static gint ett_utls_ooo_record = -1;

static expert_field ei_utls_ooo_candidate = EI_INIT;
static expert_field ei_utls_ooo_completed = EI_INIT;
static expert_field ei_utls_conflict = EI_INIT;
static expert_field ei_utls_bad_header = EI_INIT;
static expert_field ei_utls_held_limit = EI_INIT;
static expert_field ei_utls_analysis_mismatch = EI_INIT;
static expert_field ei_utls_truncated = EI_INIT;
static expert_field ei_utls_records_unknown = EI_INIT;

/* Wireshark fields the postdissector reads (looked up at handoff). */
static int hf_tcp_stream = -1;
static int hf_tcp_seq_raw = -1;
static int hf_tcp_flags = -1;
static int hf_tcp_payload = -1;
static int hf_tcp_len = -1;
static int hf_tcp_lost_segment = -1;
static int hf_tcp_retransmission = -1;
static int hf_tcp_fast_retransmission = -1;
static int hf_tcp_spurious_retransmission = -1;
static int hf_tcp_out_of_order = -1;
/* TLS fields that tell what a decrypted record held (looked up at handoff) */
static int hf_tls_record_length = -1;
static int hf_tls_alert_message = -1;
static int hf_tls_handshake = -1;
static int hf_tls_change_cipher_spec = -1;

static dissector_handle_t utls_post_handle;

static const value_string utls_content_types[] = {
    { 20, "change_cipher_spec" },
    { 21, "alert" },
    { 22, "handshake" },
    { 23, "application_data" },
    { 24, "heartbeat" },
    { 0, NULL }
};

#define TCP_FLAG_SYN 0x002
#define TCP_FLAG_ACK 0x010

/* What a record held, as far as the TLS dissector could tell (a key log
 * decrypts TLS 1.3 records; TLS 1.2 shows alerts and handshakes in clear). */
typedef enum {
    UTLS_INNER_UNKNOWN = 0, /* not decrypted, or not matched to a TLS record */
    UTLS_INNER_APPDATA,     /* application data (its plaintext was seen) */
    UTLS_INNER_CONTROL      /* alert, handshake or change_cipher_spec */
} utls_inner_t;

/* A record that became part of the in-order stream in some frame. */
typedef struct {
    guint64 offset;
    guint32 length;       /* header + body */
    guint8 content_type;
    guint16 version;
    guint32 completed_in; /* frame in which its last byte first arrived */
    nstime_t wait;        /* from that frame to the one that made it in order */
    guint64 hole_bytes;   /* bytes missing before it when it completed */
    gboolean ooo;         /* completed before it was in order */
} utls_record_t;

/* A decrypted application data record seen by the heuristic: its
 * plaintext length and which TLS record of the frame it was (1-based). */
typedef struct {
    guint32 len;
    guint32 tls_index;
} utls_plaintext_t;

/* A record completed in this frame but delivered in order only later:
 * the frame in which a receiver with SSL_MODE_UNORDERED delivers it. */
typedef struct {
    guint64 offset;
    guint32 length;
    guint8 content_type;
    guint32 delivered_in;
    nstime_t wait;
    guint64 hole_bytes;
    utls_inner_t inner;      /* known once TCP delivers it (first pass) */
    guint32 plaintext_len;   /* for UTLS_INNER_APPDATA */
} utls_early_t;

/*
 * What a direction's first record header says about its stream. Only
 * directions that start like TLS get a uTLS tree and expert items: a TCP
 * stream of another protocol (uCOBS, HTTP, a STARTTLS preamble) is none of
 * this plugin's business, and "no TLS record header" on every such stream
 * would bury the anomalies of real TLS streams.
 */
typedef enum {
    UTLS_KIND_UNKNOWN = 0, /* the first 5 bytes have not arrived in order yet */
    UTLS_KIND_TLS,         /* starts with a plausible handshake or alert record */
    UTLS_KIND_OTHER        /* starts with anything else: never shown */
} utls_kind_t;

struct utls_dir;

/* What the plugin found in one frame (file scope, kept across passes). */
typedef struct {
    struct utls_dir *dir;    /* direction of a data segment, NULL otherwise */
    gboolean tracked;        /* a data segment of a tracked direction */
    guint64 segment_offset;
    guint32 segment_len;     /* TCP's length (tcp.len), never the captured one */
    guint32 captured_len;    /* bytes of it in the capture (less: snap length) */
    gboolean past_hole;
    gboolean new_gap;        /* starts beyond everything seen before */
    guint64 hole_bytes;
    gboolean fills_hole;
    guint32 analysis_flags;  /* UTLS_TCPA_* seen on this frame */
    gboolean analysis_mismatch;
    gboolean conflict;
    gboolean held_limit;
    gboolean bad_header;
    guint64 bad_header_offset;
    gboolean records_unknown; /* a record header fell in bytes not captured */
    guint64 records_unknown_offset;
    wmem_array_t *records;   /* utls_record_t */
    wmem_array_t *early;     /* utls_early_t */
    wmem_array_t *plaintext; /* utls_plaintext_t: decrypted application data */
} utls_frame_t;

#define UTLS_TCPA_LOST 0x01
#define UTLS_TCPA_RETRANS 0x02
#define UTLS_TCPA_FAST_RETRANS 0x04
#define UTLS_TCPA_SPURIOUS 0x08
#define UTLS_TCPA_OOO 0x10

/* Bytes that arrived past the in-order point, waiting for the hole to fill.
 * A segment cut by the capture's snap length arrived whole, but only the
 * first |known| bytes of [start, start+len) are in the capture. */
typedef struct {
    guint64 start;
    guint32 len;
    guint32 known;
    guint8 *data;            /* |known| bytes */
} utls_held_t;

/* First arrival of a stretch of the stream. */
typedef struct {
    guint64 start;
    guint64 end;
    guint32 frame;
    nstime_t ts;
    guint64 missing_before; /* bytes missing before |start| when it arrived */
} utls_arrival_t;

typedef struct utls_dir {
    gboolean started;
    utls_kind_t kind;
    gboolean lost;           /* tracking stopped (bad header, limit, not TLS) */
    gboolean blind;          /* record boundaries unknown (a header was not
                                captured); holes are still tracked */
    guint32 base;            /* sequence number of stream offset 0 */
    guint64 last_offset;     /* to extend 32-bit sequence numbers */
    guint64 highest;         /* end of the furthest byte seen */
    guint64 inorder;         /* [0, inorder) arrived contiguously */
    wmem_list_t *held;       /* utls_held_t, sorted, disjoint, all > inorder */
    guint64 held_bytes;
    wmem_list_t *arrivals;   /* utls_arrival_t, sorted, disjoint */
    /* record scanner on the in-order stream */
    guint64 rec_start;
    guint8 hdr[5];
    guint hdr_have;
    guint64 rec_end;         /* 0 while the header is incomplete */
} utls_dir_t;

typedef struct {
    address client_addr;
    guint32 client_port;
    gboolean client_known;
    utls_dir_t dir[2];       /* 0: client to server, 1: server to client */
} utls_conn_t;

static wmem_map_t *utls_conns;  /* tcp.stream -> utls_conn_t */
static wmem_map_t *utls_frames; /* frame number -> utls_frame_t */

static void utls_init(void)
{
    utls_conns = wmem_map_new(wmem_file_scope(), g_direct_hash, g_direct_equal);
    utls_frames = wmem_map_new(wmem_file_scope(), g_direct_hash, g_direct_equal);
}

static utls_frame_t *utls_frame_get(guint32 num, gboolean create)
{
    utls_frame_t *fr = (utls_frame_t *)wmem_map_lookup(utls_frames, GUINT_TO_POINTER(num));

    if (fr == NULL && create) {
        fr = wmem_new0(wmem_file_scope(), utls_frame_t);
        wmem_map_insert(utls_frames, GUINT_TO_POINTER(num), fr);
    }
    return fr;
}

static void utls_frame_add_record(utls_frame_t *fr, const utls_record_t *r)
{
    if (fr->records == NULL)
        fr->records = wmem_array_new(wmem_file_scope(), sizeof(utls_record_t));
    wmem_array_append_one(fr->records, *r);
}

/* ---- field access ---------------------------------------------------- */

static field_info *utls_first_field(proto_tree *tree, int hf)
{
    GPtrArray *a;

    if (hf < 0 || tree == NULL)
        return NULL;
    a = proto_get_finfo_ptr_array(tree, hf);
    if (a == NULL || a->len == 0)
        return NULL;
    return (field_info *)g_ptr_array_index(a, 0);
}

static gboolean utls_get_uint(proto_tree *tree, int hf, guint32 *out)
{
    field_info *fi = utls_first_field(tree, hf);

    if (fi == NULL)
        return FALSE;
    *out = fvalue_get_uinteger(&fi->value);
    return TRUE;
}

static gboolean utls_has_field(proto_tree *tree, int hf)
{
    return utls_first_field(tree, hf) != NULL;
}

/* ---- stream tracking ------------------------------------------------- */

static guint64 utls_arrival_completion(utls_dir_t *d, guint64 start, guint64 end,
                                       const utls_arrival_t **out_last)
{
    wmem_list_frame_t *it;
    const utls_arrival_t *last = NULL;

    for (it = wmem_list_head(d->arrivals); it != NULL; it = wmem_list_frame_next(it)) {
        const utls_arrival_t *a = (const utls_arrival_t *)wmem_list_frame_data(it);

        if (a->end <= start)
            continue;
        if (a->start >= end)
            break;
        if (last == NULL || a->frame > last->frame)
            last = a;
    }
    *out_last = last;
    return last != NULL ? last->frame : 0;
}

static void utls_prune_arrivals(utls_dir_t *d, guint64 below)
{
    wmem_list_frame_t *it = wmem_list_head(d->arrivals);

    while (it != NULL) {
        wmem_list_frame_t *next = wmem_list_frame_next(it);
        utls_arrival_t *a = (utls_arrival_t *)wmem_list_frame_data(it);

        if (a->end > below)
            break;
        wmem_list_remove_frame(d->arrivals, it);
        wmem_free(wmem_file_scope(), a);
        it = next;
    }
}

/* Bytes of [from, to) that are not held (nor in order). */
static guint64 utls_missing(utls_dir_t *d, guint64 from, guint64 to)
{
    guint64 missing = to > from ? to - from : 0;
    wmem_list_frame_t *it;

    for (it = wmem_list_head(d->held); it != NULL; it = wmem_list_frame_next(it)) {
        const utls_held_t *h = (const utls_held_t *)wmem_list_frame_data(it);
        guint64 s = MAX(h->start, from), e = MIN(h->start + h->len, to);

        if (h->start >= to)
            break;
        if (e > s)
            missing -= e - s;
    }
    return missing;
}

static gboolean utls_plausible_header(const guint8 *h)
{
    guint16 len = (guint16)((h[3] << 8) | h[4]);

    if (h[0] < 20 || h[0] > 24)
        return FALSE;
    /* SSL 3.0 to TLS 1.3 legacy_record_version values (RFC 8446 5.1: 0x0301 or 0x0303) */
    if (h[1] != 3 || h[2] > 4)
        return FALSE;
    return len <= UTLS_MAX_RECORD_LEN;
}

/* A record became complete in the in-order stream in frame |fr_num|. */
static void utls_record_done(utls_dir_t *d, utls_frame_t *fr, guint32 fr_num, const nstime_t *ts)
{
    utls_record_t r;
    const utls_arrival_t *last = NULL;

    memset(&r, 0, sizeof(r));
    r.offset = d->rec_start;
    r.length = (guint32)(d->rec_end - d->rec_start);
    r.content_type = d->hdr[0];
    r.version = (guint16)((d->hdr[1] << 8) | d->hdr[2]);
    r.completed_in = (guint32)utls_arrival_completion(d, d->rec_start, d->rec_end, &last);
    if (last != NULL && last->frame < fr_num) {
        utls_frame_t *early;
        utls_early_t e;

        r.ooo = TRUE;
        r.hole_bytes = last->missing_before;
        nstime_delta(&r.wait, ts, &last->ts);
        early = utls_frame_get(last->frame, TRUE);
        if (early->early == NULL)
            early->early = wmem_array_new(wmem_file_scope(), sizeof(utls_early_t));
        e.offset = r.offset;
        e.length = r.length;
        e.content_type = r.content_type;
        e.delivered_in = fr_num;
        e.wait = r.wait;
        e.hole_bytes = r.hole_bytes;
        wmem_array_append_one(early->early, e);
    } else {
        r.completed_in = fr_num;
    }
    utls_frame_add_record(fr, &r);
    d->rec_start = d->rec_end;
    d->rec_end = 0;
    d->hdr_have = 0;
    utls_prune_arrivals(d, d->rec_start);
}

/* Feeds in-order bytes at stream offset |off| to the record scanner. Only
 * the first |known| of the |len| bytes are in the capture (the rest of a
 * segment cut by the snap length): a record body may pass through unknown
 * bytes, a record header may not -- then the record boundaries are lost
 * for the rest of the direction (the direction goes blind). */
static void utls_scan(utls_dir_t *d, guint64 off, const guint8 *p, guint64 len, guint64 known,
                      utls_frame_t *fr, guint32 fr_num, const nstime_t *ts)
{
    guint64 i = 0; /* bytes of |p| consumed; p[i] is read only while i < known */

    while (i < len && !d->lost && !d->blind) {
        if (d->rec_end == 0) {
            guint take = (guint)MIN((guint64)(5 - d->hdr_have), len - i);

            if (i + take > known) {
                /* the header is in bytes the capture did not keep */
                d->blind = TRUE;
                fr->records_unknown = TRUE;
                fr->records_unknown_offset = d->rec_start;
                break;
            }
            memcpy(d->hdr + d->hdr_have, p + i, take);
            d->hdr_have += take;
            i += take;
            off += take;
            if (d->hdr_have < 5)
                break;
            if (d->rec_start == 0) {
                /* A TLS connection opens with the client's ClientHello and
                 * the server's ServerHello, or an alert when the server
                 * refuses (RFC 8446 2, RFC 5246 7.3): handshake (22) or
                 * alert (21) records. SSL 2.0-format hellos are not TLS
                 * records and are not recognised. */
                if (utls_plausible_header(d->hdr) && (d->hdr[0] == 22 || d->hdr[0] == 21)) {
                    d->kind = UTLS_KIND_TLS;
                } else {
                    d->kind = UTLS_KIND_OTHER;
                    d->lost = TRUE;
                    break;
                }
            }
            if (!utls_plausible_header(d->hdr)) {
                d->lost = TRUE;
                fr->bad_header = TRUE;
                fr->bad_header_offset = d->rec_start;
                break;
            }
            d->rec_end = d->rec_start + 5 + (guint64)((d->hdr[3] << 8) | d->hdr[4]);
        } else {
            /* a record body: its bytes need not be known */
            guint64 take = MIN(d->rec_end - off, len - i);

            i += take;
            off += take;
        }
        if (d->rec_end != 0 && off == d->rec_end)
            utls_record_done(d, fr, fr_num, ts);
    }
}

static gint utls_held_cmp(gconstpointer a, gconstpointer b)
{
    const utls_held_t *x = (const utls_held_t *)a, *y = (const utls_held_t *)b;

    return x->start < y->start ? -1 : (x->start > y->start ? 1 : 0);
}

static gint utls_arrival_cmp(gconstpointer a, gconstpointer b)
{
    const utls_arrival_t *x = (const utls_arrival_t *)a, *y = (const utls_arrival_t *)b;

    return x->start < y->start ? -1 : (x->start > y->start ? 1 : 0);
}

/* Inserts the not yet received parts of [off, off+len) into the arrival
 * list and, past the in-order point, into the held list. Only the first
 * |known| bytes of the segment are in the capture. */
static void utls_accept(utls_dir_t *d, guint64 off, const guint8 *p, guint64 len, guint64 known,
                        utls_frame_t *fr, guint32 fr_num, const nstime_t *ts)
{
    guint64 pos = MAX(off, d->inorder), end = off + len, known_end = off + known;
    wmem_list_frame_t *it = wmem_list_head(d->held);

    while (pos < end) {
        const utls_held_t *h = NULL;
        guint64 gap_end = end;

        /* skip held segments that end before pos; compare overlaps */
        while (it != NULL) {
            h = (const utls_held_t *)wmem_list_frame_data(it);
            if (h->start + h->len <= pos) {
                it = wmem_list_frame_next(it);
                h = NULL;
                continue;
            }
            break;
        }
        if (h != NULL && h->start <= pos) {
            guint64 ov_end = MIN(h->start + h->len, end);
            /* only bytes that both copies have in the capture can be compared */
            guint64 cmp_end = MIN(ov_end, MIN(h->start + h->known, known_end));

            /* TCP keeps the first copy; differing later copies are an anomaly
             * (a buggy middlebox or injection) */
            if (cmp_end > pos &&
                memcmp(h->data + (pos - h->start), p + (pos - off), (size_t)(cmp_end - pos)) != 0)
                fr->conflict = TRUE;
            pos = ov_end;
            continue;
        }
        if (h != NULL)
            gap_end = MIN(end, h->start);
        {
            utls_arrival_t *a = wmem_new0(wmem_file_scope(), utls_arrival_t);

            a->start = pos;
            a->end = gap_end;
            a->frame = fr_num;
            a->ts = *ts;
            a->missing_before = utls_missing(d, d->inorder, pos);
            wmem_list_insert_sorted(d->arrivals, a, utls_arrival_cmp);
        }
        if (pos > d->inorder) {
            utls_held_t *n;

            if (d->held_bytes + (gap_end - pos) > UTLS_MAX_HELD_BYTES) {
                fr->held_limit = TRUE;
                d->lost = TRUE;
                return;
            }
            n = wmem_new0(wmem_file_scope(), utls_held_t);
            n->start = pos;
            n->len = (guint32)(gap_end - pos);
            n->known = known_end > pos ? (guint32)MIN(known_end - pos, (guint64)n->len) : 0;
            n->data = n->known > 0 ? (guint8 *)wmem_memdup(wmem_file_scope(), p + (pos - off), n->known)
                                   : NULL;
            d->held_bytes += n->len;
            wmem_list_insert_sorted(d->held, n, utls_held_cmp);
        }
        pos = gap_end;
    }
}

/* One data segment of |len| bytes (TCP's length) at stream offset |off|, of
 * which the capture holds the first |known| (fewer when the snap length cut
 * it). Holes are judged by sequence numbers and TCP's lengths only: a
 * truncated segment still covers its whole length. */
static void utls_segment(utls_dir_t *d, guint64 off, const guint8 *p, guint64 len, guint64 known,
                         utls_frame_t *fr, guint32 fr_num, const nstime_t *ts)
{
    guint64 end = off + len;
    gboolean had_held = wmem_list_count(d->held) > 0;

    fr->tracked = TRUE;
    fr->segment_offset = off;
    fr->segment_len = (guint32)len;
    fr->captured_len = (guint32)known;
    fr->new_gap = off > d->highest;
    d->highest = MAX(d->highest, end);
    if (end <= d->inorder)
        return; /* all of it arrived before */
    if (off > d->inorder) {
        fr->past_hole = TRUE;
        fr->hole_bytes = utls_missing(d, d->inorder, off);
    }
    utls_accept(d, off, p, len, known, fr, fr_num, ts);
    if (d->lost || off > d->inorder)
        return;
    /* the in-order point advances over this segment and any held bytes it reaches */
    {
        guint64 from = d->inorder, skip = from - off;

        d->inorder = end;
        utls_scan(d, from, known > skip ? p + skip : NULL, end - from, known > skip ? known - skip : 0,
                  fr, fr_num, ts);
    }
    while (!d->lost) {
        wmem_list_frame_t *h0 = wmem_list_head(d->held);
        utls_held_t *h;

        if (h0 == NULL)
            break;
        h = (utls_held_t *)wmem_list_frame_data(h0);
        if (h->start > d->inorder)
            break;
        if (h->start + h->len > d->inorder) {
            guint64 from = d->inorder, skip = from - h->start;

            d->inorder = h->start + h->len;
            utls_scan(d, from, h->known > skip ? h->data + skip : NULL, d->inorder - from,
                      h->known > skip ? h->known - skip : 0, fr, fr_num, ts);
        }
        d->held_bytes -= h->len;
        wmem_list_remove_frame(d->held, h0);
        if (h->data != NULL)
            wmem_free(wmem_file_scope(), h->data);
        wmem_free(wmem_file_scope(), h);
    }
    /* without record boundaries, arrival times are of no further use */
    if (d->blind)
        utls_prune_arrivals(d, d->inorder);
    if (had_held)
        fr->fills_hole = TRUE;
}

/* ---- what the records held (with a key log) ------------------------- */

/* One TLS record the TLS dissector showed in this frame. */
typedef struct {
    guint32 length;          /* tls.record.length: the body */
    utls_inner_t inner;
} utls_tls_rec_t;

typedef struct {
    wmem_array_t *recs;      /* utls_tls_rec_t, in tree order */
    gint cur;                /* the record being walked, -1 before the first */
} utls_walk_t;

/* Walks the tree in order. Each TLS record shows its header fields and
 * then its messages, so a tls.record.length starts a record and the
 * messages after it are its own. (The tls.record item itself is not
 * relied on: tshark does not always build it when it only looks for
 * fields.) */
static void utls_walk(proto_node *node, gpointer data)
{
    utls_walk_t *w = (utls_walk_t *)data;
    field_info *fi = PNODE_FINFO(node);

    if (fi != NULL && fi->hfinfo != NULL) {
        int id = fi->hfinfo->id;

        if (id == hf_tls_record_length) {
            utls_tls_rec_t r;

            r.length = fvalue_get_uinteger(&fi->value);
            r.inner = UTLS_INNER_UNKNOWN;
            wmem_array_append_one(w->recs, r);
            w->cur = (gint)wmem_array_get_count(w->recs) - 1;
        } else if (w->cur >= 0 &&
                   (id == hf_tls_alert_message || id == hf_tls_handshake || id == hf_tls_change_cipher_spec)) {
            ((utls_tls_rec_t *)wmem_array_index(w->recs, (guint)w->cur))->inner = UTLS_INNER_CONTROL;
        }
    }
    proto_tree_children_foreach(node, utls_walk, data);
}

/*
 * The records that became in order in this frame are the ones the TLS
 * dissector shows in it -- when TCP hands it the same bytes, which it does
 * for segments past a hole only with tcp.reassemble_out_of_order. If the
 * two lists match (count and lengths), each record takes what TLS found in
 * it: application data (its plaintext went through the heuristic) or an
 * alert, handshake or change_cipher_spec message. A record completed
 * earlier, past a hole, passes this on to the frame it completed in.
 */
static void utls_classify(proto_tree *tree, utls_frame_t *fr)
{
    utls_walk_t w;
    guint i, n;

    if (tree == NULL || fr->records == NULL || hf_tls_record_length < 0)
        return;
    n = wmem_array_get_count(fr->records);
    w.recs = wmem_array_new(wmem_packet_scope(), sizeof(utls_tls_rec_t));
    w.cur = -1;
    proto_tree_children_foreach(tree, utls_walk, &w);
    if (wmem_array_get_count(w.recs) != n)
        return;
    for (i = 0; i < n; i++) {
        const utls_record_t *r = (const utls_record_t *)wmem_array_index(fr->records, i);
        const utls_tls_rec_t *t = (const utls_tls_rec_t *)wmem_array_index(w.recs, i);

        if ((guint64)t->length + 5 != r->length)
            return;
    }
    for (i = 0; i < n; i++) {
        const utls_record_t *r = (const utls_record_t *)wmem_array_index(fr->records, i);
        const utls_tls_rec_t *t = (const utls_tls_rec_t *)wmem_array_index(w.recs, i);
        utls_inner_t inner = t->inner;
        guint32 plain = 0, k, m;
        utls_frame_t *early;

        m = fr->plaintext != NULL ? wmem_array_get_count(fr->plaintext) : 0;
        for (k = 0; k < m; k++) {
            const utls_plaintext_t *p = (const utls_plaintext_t *)wmem_array_index(fr->plaintext, k);

            if (p->tls_index == i + 1) {
                inner = UTLS_INNER_APPDATA;
                plain = p->len;
            }
        }
        if (!r->ooo || inner == UTLS_INNER_UNKNOWN)
            continue;
        early = utls_frame_get(r->completed_in, FALSE);
        m = early != NULL && early->early != NULL ? wmem_array_get_count(early->early) : 0;
        for (k = 0; k < m; k++) {
            utls_early_t *e = (utls_early_t *)wmem_array_index(early->early, k);

            if (e->offset == r->offset) {
                e->inner = inner;
                e->plaintext_len = plain;
            }
        }
    }
}

static void utls_track(packet_info *pinfo, proto_tree *tree, utls_frame_t *fr)
{
    guint32 stream, seq, flags, seglen, known;
    utls_conn_t *c;
    utls_dir_t *d;
    int dir;
    field_info *payload;

    if (!utls_get_uint(tree, hf_tcp_stream, &stream) || !utls_get_uint(tree, hf_tcp_seq_raw, &seq) ||
        !utls_get_uint(tree, hf_tcp_flags, &flags))
        return;
    c = (utls_conn_t *)wmem_map_lookup(utls_conns, GUINT_TO_POINTER(stream));
    if (c == NULL) {
        c = wmem_new0(wmem_file_scope(), utls_conn_t);
        c->dir[0].held = wmem_list_new(wmem_file_scope());
        c->dir[0].arrivals = wmem_list_new(wmem_file_scope());
        c->dir[1].held = wmem_list_new(wmem_file_scope());
        c->dir[1].arrivals = wmem_list_new(wmem_file_scope());
        wmem_map_insert(utls_conns, GUINT_TO_POINTER(stream), c);
    }
    if (!c->client_known && (flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN) {
        copy_address_wmem(wmem_file_scope(), &c->client_addr, &pinfo->src);
        c->client_port = pinfo->srcport;
        c->client_known = TRUE;
    }
    if (!c->client_known)
        return; /* the connection's start was not captured: stream offsets unknown */
    dir = (addresses_equal(&pinfo->src, &c->client_addr) && pinfo->srcport == c->client_port) ? 0 : 1;
    d = &c->dir[dir];
    if (flags & TCP_FLAG_SYN) {
        /* RFC 9293 3.4: the SYN occupies one sequence number before the data */
        if (!d->started) {
            d->started = TRUE;
            d->base = seq + 1;
        }
        return;
    }
    /* The segment's length is TCP's own (tcp.len: IP's total length minus
     * the headers), not what the capture kept of it: a capture cut by its
     * snap length holds only the start of each segment, yet every byte of
     * it arrived. Without tcp.len (TCP could not take it from IP) the
     * segment is not judged. */
    if (!d->started || !utls_get_uint(tree, hf_tcp_len, &seglen) || seglen == 0)
        return;
    payload = utls_first_field(tree, hf_tcp_payload);
    known = 0;
    if (payload != NULL && payload->length > 0 && payload->ds_tvb != NULL)
        known = MIN((guint32)payload->length, seglen);
    fr->dir = d;
    fr->analysis_flags = (utls_has_field(tree, hf_tcp_lost_segment) ? UTLS_TCPA_LOST : 0) |
                         (utls_has_field(tree, hf_tcp_retransmission) ? UTLS_TCPA_RETRANS : 0) |
                         (utls_has_field(tree, hf_tcp_fast_retransmission) ? UTLS_TCPA_FAST_RETRANS : 0) |
                         (utls_has_field(tree, hf_tcp_spurious_retransmission) ? UTLS_TCPA_SPURIOUS : 0) |
                         (utls_has_field(tree, hf_tcp_out_of_order) ? UTLS_TCPA_OOO : 0);
    if (d->lost) {
        fr->tracked = FALSE;
        return;
    }
    {
        /* extend the 32-bit sequence number to a 64-bit stream offset near the last one */
        gint32 delta = (gint32)(seq - d->base - (guint32)d->last_offset);
        gint64 off = (gint64)d->last_offset + delta;
        const guint8 *p;

        if (off < 0)
            return; /* before the stream's start: not data */
        d->last_offset = (guint64)off;
        p = known > 0 ? tvb_get_ptr(payload->ds_tvb, payload->start, (gint)known) : NULL;
        utls_segment(d, (guint64)off, p, (guint64)seglen, (guint64)known, fr, pinfo->num, &pinfo->abs_ts);
    }
    if (fr->fills_hole && !(fr->analysis_flags & (UTLS_TCPA_RETRANS | UTLS_TCPA_FAST_RETRANS |
                                                  UTLS_TCPA_SPURIOUS | UTLS_TCPA_OOO)))
        fr->analysis_mismatch = TRUE;
    /* Wireshark flags lost_segment on a segment that starts beyond the
     * furthest byte seen, not on the ones that continue past the hole */
    if (fr->new_gap != ((fr->analysis_flags & UTLS_TCPA_LOST) != 0))
        fr->analysis_mismatch = TRUE;
}

/* ---- display --------------------------------------------------------- */

/* |stream|: the frame's direction looks like TLS, so its stream tracking is
 * shown; otherwise only what the TLS dissector handed over (plaintext). */
static void utls_show(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, utls_frame_t *fr,
                      gboolean stream)
{
    proto_item *ti, *pi;
    proto_tree *ut;
    guint i, n;

    ti = proto_tree_add_item(tree, proto_utls, tvb, 0, 0, ENC_NA);
    proto_item_set_generated(ti);
    ut = proto_item_add_subtree(ti, ett_utls);
    if (stream && fr->tracked) {
        pi = proto_tree_add_uint64(ut, hf_utls_segment_offset, tvb, 0, 0, fr->segment_offset);
        proto_item_set_generated(pi);
        if (fr->captured_len < fr->segment_len) {
            pi = proto_tree_add_boolean(ut, hf_utls_truncated, tvb, 0, 0, TRUE);
            proto_item_set_generated(pi);
            expert_add_info_format(pinfo, pi, &ei_utls_truncated,
                                   "Segment cut by the capture's snap length: %u of its %u bytes captured; "
                                   "it is judged by TCP's sequence number and length",
                                   fr->captured_len, fr->segment_len);
            pi = proto_tree_add_uint(ut, hf_utls_captured_bytes, tvb, 0, 0, fr->captured_len);
            proto_item_set_generated(pi);
        }
        if (fr->past_hole) {
            pi = proto_tree_add_boolean(ut, hf_utls_past_hole, tvb, 0, 0, TRUE);
            proto_item_set_generated(pi);
            pi = proto_tree_add_uint64(ut, hf_utls_hole_bytes, tvb, 0, 0, fr->hole_bytes);
            proto_item_set_generated(pi);
        }
        if (fr->fills_hole) {
            pi = proto_tree_add_boolean(ut, hf_utls_fills_hole, tvb, 0, 0, TRUE);
            proto_item_set_generated(pi);
        }
        if (fr->past_hole || fr->fills_hole) {
            pi = proto_tree_add_uint(ut, hf_utls_tcp_analysis, tvb, 0, 0, fr->analysis_flags);
            proto_item_set_generated(pi);
            if (fr->analysis_mismatch)
                expert_add_info(pinfo, pi, &ei_utls_analysis_mismatch);
        }
    }
    n = stream && fr->records != NULL ? wmem_array_get_count(fr->records) : 0;
    for (i = 0; i < n; i++) {
        const utls_record_t *r = (const utls_record_t *)wmem_array_index(fr->records, i);
        proto_tree *rt;
        proto_item *ri;

        ri = proto_tree_add_none_format(ut, hf_utls_record, tvb, 0, 0,
                                        "Record at stream offset %" G_GUINT64_FORMAT ": %s, %u bytes%s",
                                        r->offset, val_to_str_const(r->content_type, utls_content_types, "?"),
                                        r->length, r->ooo ? " (out-of-order candidate)" : "");
        proto_item_set_generated(ri);
        rt = proto_item_add_subtree(ri, ett_utls_record);
        pi = proto_tree_add_uint64(rt, hf_utls_record_offset, tvb, 0, 0, r->offset);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint(rt, hf_utls_record_type, tvb, 0, 0, r->content_type);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint(rt, hf_utls_record_version, tvb, 0, 0, r->version);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint(rt, hf_utls_record_length, tvb, 0, 0, r->length);
        proto_item_set_generated(pi);
        pi = proto_tree_add_boolean(rt, hf_utls_ooo_candidate, tvb, 0, 0, r->ooo);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint(rt, hf_utls_completed_in, tvb, 0, 0, r->completed_in);
        proto_item_set_generated(pi);
        if (r->ooo) {
            expert_add_info_format(pinfo, ri, &ei_utls_ooo_candidate,
                                   "Record at stream offset %" G_GUINT64_FORMAT " was complete in frame %u, "
                                   "%" G_GUINT64_FORMAT " bytes after a hole: an unordered receiver could "
                                   "have delivered it %.3f ms earlier",
                                   r->offset, r->completed_in, r->hole_bytes, nstime_to_msec(&r->wait));
            pi = proto_tree_add_time(rt, hf_utls_ooo_wait, tvb, 0, 0, &r->wait);
            proto_item_set_generated(pi);
            pi = proto_tree_add_uint64(rt, hf_utls_record_hole_bytes, tvb, 0, 0, r->hole_bytes);
            proto_item_set_generated(pi);
        }
    }
    /* Records whose last byte arrived in this frame, past a hole: an
     * unordered receiver delivers them here, TCP only in a later frame
     * (known once the hole is filled: two passes). */
    n = stream && fr->early != NULL ? wmem_array_get_count(fr->early) : 0;
    for (i = 0; i < n; i++) {
        const utls_early_t *e = (const utls_early_t *)wmem_array_index(fr->early, i);
        proto_tree *et;
        proto_item *ei;

        if (e->inner == UTLS_INNER_CONTROL) {
            /* decrypted, and not application data: an unordered receiver
             * processes alerts and handshake messages in order only */
            pi = proto_tree_add_uint64_format_value(ut, hf_utls_ooo_control, tvb, 0, 0, e->offset,
                                                    "stream offset %" G_GUINT64_FORMAT ", %u bytes; an "
                                                    "unordered receiver processes it in order, in frame %u",
                                                    e->offset, e->length, e->delivered_in);
            proto_item_set_generated(pi);
            continue;
        }
        ei = proto_tree_add_none_format(ut, hf_utls_ooo_record, tvb, 0, 0,
                                        "Out-of-order record at stream offset %" G_GUINT64_FORMAT
                                        ": %s, %u bytes, complete here; TCP delivers it in frame %u",
                                        e->offset, val_to_str_const(e->content_type, utls_content_types, "?"),
                                        e->length, e->delivered_in);
        proto_item_set_generated(ei);
        et = proto_item_add_subtree(ei, ett_utls_ooo_record);
        pi = proto_tree_add_uint64(et, hf_utls_ooo_record_offset, tvb, 0, 0, e->offset);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint(et, hf_utls_ooo_record_type, tvb, 0, 0, e->content_type);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint(et, hf_utls_ooo_record_length, tvb, 0, 0, e->length);
        proto_item_set_generated(pi);
        if (e->inner == UTLS_INNER_APPDATA) {
            pi = proto_tree_add_uint(et, hf_utls_ooo_record_plaintext_len, tvb, 0, 0, e->plaintext_len);
            proto_item_set_generated(pi);
        }
        pi = proto_tree_add_uint(et, hf_utls_completes_record, tvb, 0, 0, e->delivered_in);
        proto_item_set_generated(pi);
        expert_add_info_format(pinfo, pi, &ei_utls_ooo_completed,
                               "Completes the record at stream offset %" G_GUINT64_FORMAT
                               " past a hole; TCP delivers it in frame %u", e->offset, e->delivered_in);
        pi = proto_tree_add_time(et, hf_utls_ooo_wait, tvb, 0, 0, &e->wait);
        proto_item_set_generated(pi);
        pi = proto_tree_add_uint64(et, hf_utls_record_hole_bytes, tvb, 0, 0, e->hole_bytes);
        proto_item_set_generated(pi);
    }
    n = fr->plaintext != NULL ? wmem_array_get_count(fr->plaintext) : 0;
    for (i = 0; i < n; i++) {
        pi = proto_tree_add_uint(ut, hf_utls_plaintext_len, tvb, 0, 0,
                                 ((const utls_plaintext_t *)wmem_array_index(fr->plaintext, i))->len);
        proto_item_set_generated(pi);
    }
    if (!stream)
        return;
    if (fr->conflict)
        expert_add_info(pinfo, ti, &ei_utls_conflict);
    if (fr->held_limit)
        expert_add_info(pinfo, ti, &ei_utls_held_limit);
    if (fr->records_unknown)
        expert_add_info_format(pinfo, ti, &ei_utls_records_unknown,
                               "The record header at stream offset %" G_GUINT64_FORMAT " was not captured "
                               "(snap length): record tracking stops for this direction, hole tracking goes on",
                               fr->records_unknown_offset);
    if (fr->bad_header)
        expert_add_info_format(pinfo, ti, &ei_utls_bad_header,
                               "No TLS record header at stream offset %" G_GUINT64_FORMAT
                               ": record tracking stops for this direction",
                               fr->bad_header_offset);
}

static int dissect_utls_post(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data _U_)
{
    utls_frame_t *fr;
    gboolean stream;

    if (!PINFO_FD_VISITED(pinfo)) {
        fr = utls_frame_get(pinfo->num, TRUE);
        utls_track(pinfo, tree, fr);
        utls_classify(tree, fr);
    }
    fr = utls_frame_get(pinfo->num, FALSE);
    if (fr == NULL || tree == NULL)
        return 0;
    /* A direction is judged by its first record header. On one pass a frame
     * that arrives before that header (its first segment lost) is shown
     * only if the header is known by then; two passes show the verdict. */
    stream = fr->dir != NULL && fr->dir->kind == UTLS_KIND_TLS &&
             (fr->tracked || fr->records != NULL || fr->early != NULL || fr->bad_header ||
              fr->held_limit || fr->records_unknown);
    if (!stream && fr->plaintext == NULL)
        return 0;
    utls_show(tvb, pinfo, tree, fr, stream);
    return tvb_captured_length(tvb);
}

/*
 * The TLS dissector offers each decrypted application data record to the
 * "tls" heuristics. No uTLS message exists yet, so nothing is claimed: the
 * length is noted for the uTLS tree and FALSE lets TLS go on exactly as
 * without this plugin.
 */
static gboolean dissect_utls_heur(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data _U_)
{
    if (!PINFO_FD_VISITED(pinfo)) {
        utls_frame_t *fr = utls_frame_get(pinfo->num, TRUE);
        utls_plaintext_t p;
        GPtrArray *recs = hf_tls_record_length >= 0 && tree != NULL
                              ? proto_get_finfo_ptr_array(tree, hf_tls_record_length) : NULL;

        p.len = tvb_reported_length(tvb);
        /* TLS added this record's tls.record.length before handing on its
         * plaintext: it is the last one so far */
        p.tls_index = recs != NULL ? recs->len : 0;
        if (fr->plaintext == NULL)
            fr->plaintext = wmem_array_new(wmem_file_scope(), sizeof(utls_plaintext_t));
        wmem_array_append_one(fr->plaintext, p);
    }
    return FALSE;
}

static const value_string utls_tcpa_names[] = {
    { UTLS_TCPA_LOST, "previous segment not captured" },
    { UTLS_TCPA_RETRANS, "retransmission" },
    { UTLS_TCPA_FAST_RETRANS, "fast retransmission" },
    { UTLS_TCPA_SPURIOUS, "spurious retransmission" },
    { UTLS_TCPA_OOO, "out-of-order" },
    { 0, NULL }
};

void proto_register_utls(void)
{
    static hf_register_info hf[] = {
        { &hf_utls_segment_offset,
          { "Segment stream offset", "utls.segment_offset", FT_UINT64, BASE_DEC, NULL, 0x0,
            "Offset of this segment's first byte in its direction's byte stream", HFILL } },
        { &hf_utls_past_hole,
          { "Segment past a hole", "utls.past_hole", FT_BOOLEAN, BASE_NONE, NULL, 0x0,
            "Arrived while an earlier byte of the stream was missing", HFILL } },
        { &hf_utls_hole_bytes,
          { "Missing bytes before this segment", "utls.hole_bytes", FT_UINT64, BASE_DEC, NULL, 0x0,
            NULL, HFILL } },
        { &hf_utls_fills_hole,
          { "Segment fills a hole", "utls.fills_hole", FT_BOOLEAN, BASE_NONE, NULL, 0x0,
            "Advanced the in-order point over bytes that arrived earlier", HFILL } },
        { &hf_utls_tcp_analysis,
          { "Wireshark TCP analysis flags", "utls.tcp_analysis", FT_UINT32, BASE_HEX, NULL, 0x0,
            "tcp.analysis flags of this segment: 0x01 lost_segment, 0x02 retransmission, "
            "0x04 fast_retransmission, 0x08 spurious_retransmission, 0x10 out_of_order", HFILL } },
        { &hf_utls_record,
          { "Record", "utls.record", FT_NONE, BASE_NONE, NULL, 0x0,
            "A TLS record that became part of the in-order stream in this frame", HFILL } },
        { &hf_utls_record_offset,
          { "Record stream offset", "utls.record_offset", FT_UINT64, BASE_DEC, NULL, 0x0,
            "Offset of the record header in its direction's byte stream", HFILL } },
        { &hf_utls_record_type,
          { "Record content type", "utls.record.content_type", FT_UINT8, BASE_DEC,
            VALS(utls_content_types), 0x0, "Outer content type on the wire", HFILL } },
        { &hf_utls_record_version,
          { "Record version", "utls.record.version", FT_UINT16, BASE_HEX, NULL, 0x0, NULL, HFILL } },
        { &hf_utls_record_length,
          { "Record wire length", "utls.record.length", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Header and body", HFILL } },
        { &hf_utls_ooo_candidate,
          { "Out-of-order candidate", "utls.ooo_candidate", FT_BOOLEAN, BASE_NONE, NULL, 0x0,
            "All of the record's bytes had arrived while an earlier byte was missing: "
            "a receiver with SSL_MODE_UNORDERED could have delivered it before TCP did", HFILL } },
        { &hf_utls_completed_in,
          { "Record complete in frame", "utls.completed_in", FT_FRAMENUM, BASE_NONE,
            NULL, 0x0, "Frame that brought the record's last missing byte", HFILL } },
        { &hf_utls_ooo_wait,
          { "Wait for the hole", "utls.ooo_wait", FT_RELATIVE_TIME, BASE_NONE, NULL, 0x0,
            "Time between the record's completion and its in-order delivery by TCP", HFILL } },
        { &hf_utls_record_hole_bytes,
          { "Missing bytes before the record at completion", "utls.record.hole_bytes", FT_UINT64,
            BASE_DEC, NULL, 0x0, NULL, HFILL } },
        { &hf_utls_completes_record,
          { "Completes an out-of-order record delivered in order in frame", "utls.completes_ooo_record",
            FT_FRAMENUM, BASE_NONE, NULL, 0x0, NULL, HFILL } },
        { &hf_utls_truncated,
          { "Segment truncated in the capture", "utls.truncated", FT_BOOLEAN, BASE_NONE, NULL, 0x0,
            "The capture's snap length cut this segment: it is judged by TCP's sequence number and "
            "length (tcp.len), not by the bytes captured", HFILL } },
        { &hf_utls_captured_bytes,
          { "Segment bytes captured", "utls.captured_bytes", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Bytes of a truncated segment that are in the capture (tcp.len has its length)", HFILL } },
        { &hf_utls_ooo_record,
          { "Out-of-order record", "utls.ooo_record", FT_NONE, BASE_NONE, NULL, 0x0,
            "A TLS record whose last byte arrived in this frame while an earlier byte was missing: "
            "a receiver with SSL_MODE_UNORDERED delivers it here, TCP in the frame that fills the hole "
            "(needs two passes)", HFILL } },
        { &hf_utls_ooo_record_offset,
          { "Out-of-order record stream offset", "utls.ooo_record.offset", FT_UINT64, BASE_DEC, NULL, 0x0,
            "Offset of the record header in its direction's byte stream", HFILL } },
        { &hf_utls_ooo_record_type,
          { "Out-of-order record content type", "utls.ooo_record.content_type", FT_UINT8, BASE_DEC,
            VALS(utls_content_types), 0x0, "Outer content type on the wire", HFILL } },
        { &hf_utls_ooo_record_length,
          { "Out-of-order record wire length", "utls.ooo_record.length", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Header and body", HFILL } },
        { &hf_utls_ooo_record_plaintext_len,
          { "Out-of-order record plaintext length", "utls.ooo_record.plaintext_len", FT_UINT32, BASE_DEC,
            NULL, 0x0, "The record decrypted (key log) to application data of this length", HFILL } },
        { &hf_utls_ooo_control,
          { "Record past a hole, not application data", "utls.ooo_control", FT_UINT64, BASE_DEC, NULL, 0x0,
            "Stream offset of a record that completed here past a hole and decrypted (key log) to an alert, "
            "handshake or change_cipher_spec message: an unordered receiver processes it in order only", HFILL } },
        { &hf_utls_plaintext_len,
          { "Decrypted application data length", "utls.plaintext_len", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Plaintext of a decrypted application data record (needs a key log)", HFILL } },
    };
    static gint *ett[] = { &ett_utls, &ett_utls_record, &ett_utls_ooo_record };
    static ei_register_info ei[] = {
        { &ei_utls_ooo_candidate,
          { "utls.ooo_candidate.expert", PI_SEQUENCE, PI_NOTE,
            "Record could have been delivered out of order", EXPFILL } },
        { &ei_utls_ooo_completed,
          { "utls.completes_ooo_record.expert", PI_SEQUENCE, PI_CHAT,
            "Completes a record past a hole", EXPFILL } },
        { &ei_utls_conflict,
          { "utls.conflict", PI_SECURITY, PI_WARN,
            "Overlapping segments carry different bytes (the first copy counts, as in TCP)", EXPFILL } },
        { &ei_utls_bad_header,
          { "utls.bad_header", PI_PROTOCOL, PI_WARN,
            "Not a TLS record header: record tracking stops for this direction", EXPFILL } },
        { &ei_utls_held_limit,
          { "utls.held_limit", PI_SEQUENCE, PI_WARN,
            "More than 64 MiB past a hole: record tracking stops for this direction", EXPFILL } },
        { &ei_utls_truncated,
          { "utls.truncated.expert", PI_UNDECODED, PI_NOTE,
            "Segment cut by the capture's snap length: judged by TCP's sequence number and length", EXPFILL } },
        { &ei_utls_records_unknown,
          { "utls.records_unknown", PI_UNDECODED, PI_WARN,
            "A record header was not captured (snap length): record tracking stops for this direction",
            EXPFILL } },
        { &ei_utls_analysis_mismatch,
          { "utls.analysis_mismatch", PI_SEQUENCE, PI_WARN,
            "uTLS hole tracking and Wireshark's TCP analysis disagree on this segment", EXPFILL } },
    };
    expert_module_t *expert_utls;

    (void)utls_tcpa_names;
    proto_utls = proto_register_protocol("uTLS (out-of-order TLS record delivery)", "uTLS", "utls");
    proto_register_field_array(proto_utls, hf, array_length(hf));
    proto_register_subtree_array(ett, array_length(ett));
    expert_utls = expert_register_protocol(proto_utls);
    expert_register_field_array(expert_utls, ei, array_length(ei));
    register_init_routine(utls_init);
    utls_post_handle = register_dissector("utls", dissect_utls_post, proto_utls);
}

void proto_reg_handoff_utls(void)
{
    static const char *wanted[] = {
        "tcp.stream", "tcp.seq_raw", "tcp.flags", "tcp.payload", "tcp.len", "tcp.analysis.lost_segment",
        "tcp.analysis.retransmission", "tcp.analysis.fast_retransmission",
        "tcp.analysis.spurious_retransmission", "tcp.analysis.out_of_order",
        "tls.record.length", "tls.alert_message", "tls.handshake", "tls.change_cipher_spec",
    };
    int *ids[] = {
        &hf_tcp_stream, &hf_tcp_seq_raw, &hf_tcp_flags, &hf_tcp_payload, &hf_tcp_len, &hf_tcp_lost_segment,
        &hf_tcp_retransmission, &hf_tcp_fast_retransmission, &hf_tcp_spurious_retransmission,
        &hf_tcp_out_of_order,
        &hf_tls_record_length, &hf_tls_alert_message, &hf_tls_handshake,
        &hf_tls_change_cipher_spec,
    };
    GArray *hfids = g_array_new(FALSE, FALSE, (guint)sizeof(int));
    guint i;

    for (i = 0; i < G_N_ELEMENTS(wanted); i++) {
        *ids[i] = proto_registrar_get_id_byname(wanted[i]);
        if (*ids[i] >= 0)
            g_array_append_val(hfids, *ids[i]);
    }
    register_postdissector(utls_post_handle);
    set_postdissector_wanted_hfids(utls_post_handle, hfids);
    heur_dissector_add("tls", dissect_utls_heur, "uTLS messages in decrypted records", "utls_tls",
                       proto_utls, HEURISTIC_ENABLE);
}
