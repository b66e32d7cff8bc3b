/* packet-ucobs.c
 * uCOBS dissector for Wireshark 4.0: datagrams framed with COBS over TCP
 * (Minion, section 5; issue 9).
 *
 * Wire format. Each datagram D (0..65535 bytes) is written as
 * 0x00 || COBS(D) || 0x00, so consecutive datagrams look like
 * `00 enc1 00 00 enc2 00`. A datagram is a maximal non-empty run of non-zero
 * bytes with a zero on both sides; zeros between runs carry nothing. The
 * COBS decoding is the project's own codec, core/src/cobs.c, compiled into
 * the plugin (it is plain C with no dependency, so the dissector accepts
 * exactly the canonical encodings the uCOBS sender produces and rejects the
 * rest the same way the receiver does).
 *
 * Finding the protocol. A heuristic on the "tcp" list, enabled by default
 * but conservative (see ucobs_heur_looks_right): it claims a TCP payload only
 * when it starts with a delimiter and every complete frame in it decodes
 * canonically; then the whole conversation is handed to this dissector.
 * TLS, HTTP, SSH and the like never start a segment at a stream start with
 * 0x00, and a mid-stream TLS segment that happens to start with 0x00 fails
 * the canonical decoding of its frames with overwhelming probability. The
 * preference ucobs.tcp.port (and Decode As "uCOBS") force it on a port.
 *
 * Reassembly. A datagram that spans TCP segments is reassembled by asking
 * TCP for one more segment (pinfo->desegment_offset at the frame's leading
 * delimiter), so every datagram is shown whole, in the frame that completed
 * it. A run longer than the largest possible encoding is reported as
 * oversized and dropped instead of being held.
 *
 * Retransmissions. Datagrams are identified by direction and the TCP
 * sequence number of their first encoded byte; a retransmitted segment that
 * TCP hands on again is marked as a copy (ucobs.retransmission_of), so no
 * datagram is shown twice. Segments handed on past a hole (without TCP's
 * out-of-order reassembly) show their datagrams early, as uCOBS over uTCP
 * would deliver them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later (as Wireshark plugins must be)
 */

#define WS_BUILD_DLL
#include <wireshark.h>

#include <epan/packet.h>
#include <epan/expert.h>
#include <epan/proto.h>
#include <epan/conversation.h>
#include <epan/tvbuff.h>
#include <epan/dissectors/packet-tcp.h>

#include "utls/cobs.h"

#include "packet-ucobs.h"

/*
 * Limits. The capture is untrusted input.
 */
/* The largest datagram uCOBS carries (the wire format: 0..65535 bytes). */
#define UCOBS_MAX_DATAGRAM 65535u
/* The longest run of non-zero bytes a canonical encoder writes for
 * UCOBS_MAX_DATAGRAM bytes. Bounds the bytes held for reassembly: a stream
 * that never sends a delimiter (an attacker, or not uCOBS at all) would
 * otherwise make the dissector buffer the rest of the connection. */
#define UCOBS_MAX_ENCODED ((guint)UTLS_COBS_ENCODE_BOUND(UCOBS_MAX_DATAGRAM))
/* At a stream start, a payload that holds no complete frame yet (the first
 * datagram is longer than the segment) is claimed only if at least this many
 * non-zero bytes follow the delimiter: fewer prove nothing. */
#define UCOBS_HEUR_MIN_PARTIAL 16u
/* Zeros between two frames a uCOBS sender writes (the closing delimiter of
 * one and the opening one of the next); the heuristic rejects longer runs,
 * which are typical of zero-padded binary protocols. */
#define UCOBS_HEUR_MAX_ZEROS 2u

static int proto_ucobs = -1;

static int hf_ucobs_frame = -1;
static int hf_ucobs_index = -1;
static int hf_ucobs_length = -1;
static int hf_ucobs_encoded_length = -1;
static int hf_ucobs_overhead = -1;
static int hf_ucobs_datagram = -1;
static int hf_ucobs_bad_frame = -1;
static int hf_ucobs_undelimited = -1;
static int hf_ucobs_copy_of = -1;

static gint ett_ucobs = -1;
static gint ett_ucobs_frame = -1;

static expert_field ei_ucobs_non_canonical = EI_INIT;
static expert_field ei_ucobs_oversized = EI_INIT;
static expert_field ei_ucobs_undelimited = EI_INIT;
static expert_field ei_ucobs_truncated = EI_INIT;
static expert_field ei_ucobs_copy = EI_INIT;

static dissector_handle_t ucobs_handle;

/* A datagram seen on the first pass: its number in its direction and the
 * frame that showed it first. */
typedef struct {
    guint32 index;
    guint32 frame;
} ucobs_seen_t;

/* Per conversation: every datagram shown, by direction and stream position
 * (the TCP sequence number of its first encoded byte), numbered on the first
 * pass in stream order. */
typedef struct {
    wmem_map_t *seen;         /* gint64 (direction << 32 | position) -> ucobs_seen_t */
    guint32 next_index[2];
} ucobs_conv_t;

static ucobs_conv_t *ucobs_get_conv(packet_info *pinfo)
{
    conversation_t *conv = find_or_create_conversation(pinfo);
    ucobs_conv_t *uc = (ucobs_conv_t *)conversation_get_proto_data(conv, proto_ucobs);
    if (uc == NULL) {
        uc = wmem_new0(wmem_file_scope(), ucobs_conv_t);
        uc->seen = wmem_map_new(wmem_file_scope(), g_int64_hash, g_int64_equal);
        conversation_add_proto_data(conv, proto_ucobs, uc);
    }
    return uc;
}

/* The direction of this packet inside its conversation: 0 or 1. */
static guint ucobs_direction(packet_info *pinfo)
{
    int c = cmp_address(&pinfo->src, &pinfo->dst);
    if (c != 0) {
        return c < 0 ? 0u : 1u;
    }
    return pinfo->srcport < pinfo->destport ? 0u : 1u;
}

/* Looks up (or, on the first pass, records) the datagram whose encoding
 * starts at |start| in |tvb|. Returns NULL when it is unknown (no TCP
 * sequence information, or not seen on the first pass). A result whose frame
 * is not this one is a copy of a datagram already shown: a TCP
 * retransmission that the TCP dissector handed on again. */
static const ucobs_seen_t *ucobs_seen(packet_info *pinfo, struct tcpinfo *tcpinfo, gint start)
{
    if (tcpinfo == NULL) {
        return NULL;
    }
    ucobs_conv_t *uc = ucobs_get_conv(pinfo);
    guint dir = ucobs_direction(pinfo);
    guint32 pos = tcpinfo->seq + (guint32)start;
    gint64 lookup = ((gint64)dir << 32) | pos;
    const ucobs_seen_t *seen = (const ucobs_seen_t *)wmem_map_lookup(uc->seen, &lookup);
    if (seen != NULL || PINFO_FD_VISITED(pinfo)) {
        return seen;
    }
    gint64 *key = wmem_new(wmem_file_scope(), gint64);
    *key = lookup;
    ucobs_seen_t *rec = wmem_new(wmem_file_scope(), ucobs_seen_t);
    rec->index = uc->next_index[dir]++;
    rec->frame = pinfo->num;
    wmem_map_insert(uc->seen, key, rec);
    return rec;
}

/* What ucobs_add_frame made of a frame. */
typedef enum {
    UCOBS_FRAME_SHOWN, /* a datagram, decoded and shown */
    UCOBS_FRAME_COPY,  /* a retransmitted copy of a datagram shown in an earlier frame */
    UCOBS_FRAME_BAD    /* malformed: an expert item, no datagram */
} ucobs_frame_result;

/* Decodes one frame (the |enc_len| non-zero bytes at |start|; the delimiter
 * before it is at start - 1), adds it to |tree| and says what it was. */
static ucobs_frame_result ucobs_add_frame(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree,
                                          struct tcpinfo *tcpinfo, gint start, guint enc_len,
                                          gboolean closed)
{
    gint item_len = (gint)enc_len + 1 + (closed ? 1 : 0);
    if (enc_len > UCOBS_MAX_ENCODED) {
        proto_item *bi =
            proto_tree_add_item(tree, hf_ucobs_bad_frame, tvb, start - 1, item_len, ENC_NA);
        expert_add_info_format(pinfo, bi, &ei_ucobs_oversized,
                               "uCOBS frame of more than %u encoded bytes (the largest "
                               "datagram, %u bytes, encodes to %u): dropped",
                               UCOBS_MAX_ENCODED, UCOBS_MAX_DATAGRAM, UCOBS_MAX_ENCODED);
        return UCOBS_FRAME_BAD;
    }
    const guint8 *enc = tvb_get_ptr(tvb, start, (gint)enc_len);
    guint cap = MIN(enc_len - 1u, UCOBS_MAX_DATAGRAM);
    guint8 *dec = (guint8 *)wmem_alloc(pinfo->pool, cap + 1u);
    size_t dec_len = 0;
    utls_cobs_result r = utls_cobs_decode(enc, enc_len, dec, cap, &dec_len);
    if (r != UTLS_COBS_OK) {
        proto_item *bi =
            proto_tree_add_item(tree, hf_ucobs_bad_frame, tvb, start - 1, item_len, ENC_NA);
        if (r == UTLS_COBS_ERR_SPACE) {
            expert_add_info_format(pinfo, bi, &ei_ucobs_oversized,
                                   "uCOBS frame decodes to more than %u bytes: dropped",
                                   UCOBS_MAX_DATAGRAM);
        } else {
            /* The frame holds no zero, so the codec can only report a bad
             * code byte or a non-canonical ending (UTLS_COBS_ERR_CODE). */
            expert_add_info_format(pinfo, bi, &ei_ucobs_non_canonical,
                                   "uCOBS frame of %u bytes is not a canonical COBS encoding (%s): "
                                   "dropped",
                                   enc_len,
                                   r == UTLS_COBS_ERR_CODE
                                       ? "a code byte runs past the frame or an empty block "
                                         "ends it after a 255-block"
                                       : utls_cobs_result_name(r));
        }
        return UCOBS_FRAME_BAD;
    }
    const ucobs_seen_t *seen = ucobs_seen(pinfo, tcpinfo, start);
    gboolean have_idx = seen != NULL;
    guint32 idx = have_idx ? seen->index : 0;
    proto_item *fi = NULL;
    proto_tree *ft;
    if (have_idx && seen->frame != pinfo->num) {
        /* The receiver keeps the first copy; so does the display: the
         * datagram is not shown twice. */
        ft = proto_tree_add_subtree_format(tree, tvb, start - 1, item_len, ett_ucobs_frame, &fi,
                                           "Datagram %u again (TCP retransmission), shown in "
                                           "frame %u",
                                           idx, seen->frame);
        proto_tree_add_item(ft, hf_ucobs_frame, tvb, start - 1, item_len, ENC_NA);
        proto_item *ri = proto_tree_add_uint(ft, hf_ucobs_copy_of, tvb, start - 1, item_len,
                                             seen->frame);
        proto_item_set_generated(ri);
        expert_add_info_format(pinfo, ri, &ei_ucobs_copy,
                               "Datagram %u retransmitted: already shown in frame %u", idx,
                               seen->frame);
        return UCOBS_FRAME_COPY;
    }
    if (have_idx) {
        ft = proto_tree_add_subtree_format(tree, tvb, start - 1, item_len, ett_ucobs_frame, &fi,
                                           "Datagram %u: %u bytes", idx, (guint)dec_len);
    } else {
        ft = proto_tree_add_subtree_format(tree, tvb, start - 1, item_len, ett_ucobs_frame, &fi,
                                           "Datagram: %u bytes", (guint)dec_len);
    }
    proto_tree_add_item(ft, hf_ucobs_frame, tvb, start - 1, item_len, ENC_NA);
    if (have_idx) {
        proto_item *ii = proto_tree_add_uint(ft, hf_ucobs_index, tvb, start - 1, item_len, idx);
        proto_item_set_generated(ii);
    }
    proto_item *li =
        proto_tree_add_uint(ft, hf_ucobs_length, tvb, start, (gint)enc_len, (guint32)dec_len);
    proto_item_set_generated(li);
    proto_tree_add_uint(ft, hf_ucobs_encoded_length, tvb, start, (gint)enc_len, enc_len);
    proto_item *oi = proto_tree_add_uint(ft, hf_ucobs_overhead, tvb, start, (gint)enc_len,
                                         enc_len - (guint32)dec_len);
    proto_item_set_generated(oi);

    tvbuff_t *dtvb = tvb_new_child_real_data(tvb, dec, (guint)dec_len, (gint)dec_len);
    if (dec_len != 0) {
        add_new_data_source(pinfo, dtvb,
                            have_idx ? wmem_strdup_printf(pinfo->pool, "uCOBS datagram %u", idx)
                                     : "uCOBS datagram");
    }
    proto_tree_add_item(ft, hf_ucobs_datagram, dtvb, 0, (gint)dec_len, ENC_NA);
    return UCOBS_FRAME_SHOWN;
}

/* Dissects a TCP payload (possibly reassembled) of a uCOBS conversation. */
static int dissect_ucobs(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
    struct tcpinfo *tcpinfo = (struct tcpinfo *)data;
    guint len = tvb_reported_length(tvb);
    guint captured = tvb_captured_length(tvb);
    guint num_datagrams = 0;
    guint num_copies = 0;
    guint num_bad = 0;

    col_set_str(pinfo->cinfo, COL_PROTOCOL, "uCOBS");
    col_clear(pinfo->cinfo, COL_INFO);

    proto_item *ti = proto_tree_add_item(tree, proto_ucobs, tvb, 0, -1, ENC_NA);
    proto_tree *ut = proto_item_add_subtree(ti, ett_ucobs);

    if (captured < len) {
        /* A snap length cut the payload: frames past it cannot be seen. */
        len = captured;
    }
    guint off = 0;
    if (len != 0 && tvb_get_guint8(tvb, 0) != 0) {
        /* No delimiter in front: the capture began inside a datagram, or
         * an earlier frame was dropped as oversized. Up to the next zero
         * these bytes belong to no frame we can see whole. */
        gint z = tvb_find_guint8(tvb, 0, (gint)len, 0);
        guint n = z < 0 ? len : (guint)z;
        proto_item *ui = proto_tree_add_item(ut, hf_ucobs_undelimited, tvb, 0, (gint)n, ENC_NA);
        expert_add_info_format(pinfo, ui, &ei_ucobs_undelimited,
                               "%u bytes without a leading delimiter (capture began inside a "
                               "datagram, or the rest of a dropped frame): not a datagram",
                               n);
        num_bad++;
        off = n;
    }
    while (off < len) {
        /* off is at a zero: skip the delimiters. */
        while (off < len && tvb_get_guint8(tvb, off) == 0) {
            off++;
        }
        if (off == len) {
            break;
        }
        guint start = off;
        gint z = tvb_find_guint8(tvb, (gint)start, (gint)(len - start), 0);
        if (z < 0) {
            guint have = len - start;
            if (have > UCOBS_MAX_ENCODED) {
                ucobs_add_frame(tvb, pinfo, ut, tcpinfo, (gint)start, have, FALSE);
                num_bad++;
                break;
            }
            if (pinfo->can_desegment && tvb_captured_length(tvb) == tvb_reported_length(tvb)) {
                /* Keep the leading delimiter so the reassembled payload
                 * starts in sync. */
                pinfo->desegment_offset = (int)start - 1;
                pinfo->desegment_len = DESEGMENT_ONE_MORE_SEGMENT;
                if (start - 1 == 0) {
                    proto_item_append_text(ti, " (start of a datagram, reassembled later)");
                }
                break;
            }
            proto_item *bi = proto_tree_add_item(ut, hf_ucobs_bad_frame, tvb, (gint)start - 1,
                                                 (gint)have + 1, ENC_NA);
            expert_add_info_format(pinfo, bi, &ei_ucobs_truncated,
                                   "uCOBS frame without its closing delimiter (%u bytes; end of "
                                   "capture or reassembly off): not decoded",
                                   have);
            num_bad++;
            break;
        }
        switch (ucobs_add_frame(tvb, pinfo, ut, tcpinfo, (gint)start, (guint)z - start, TRUE)) {
        case UCOBS_FRAME_SHOWN:
            num_datagrams++;
            break;
        case UCOBS_FRAME_COPY:
            num_copies++;
            break;
        case UCOBS_FRAME_BAD:
        default:
            num_bad++;
            break;
        }
        off = (guint)z;
    }

    proto_item_append_text(ti, ", %u datagram%s", num_datagrams, num_datagrams == 1 ? "" : "s");
    /* A payload that only starts a datagram says nothing: TCP's "segment of
     * a reassembled PDU" stays in the Info column. */
    if (num_datagrams != 0 || num_copies != 0 || num_bad != 0) {
        col_add_fstr(pinfo->cinfo, COL_INFO, "%u datagram%s", num_datagrams,
                     num_datagrams == 1 ? "" : "s");
    }
    if (num_copies != 0) {
        col_append_fstr(pinfo->cinfo, COL_INFO, ", %u retransmitted", num_copies);
    }
    if (num_bad != 0) {
        col_append_fstr(pinfo->cinfo, COL_INFO, ", %u malformed", num_bad);
    }
    return (int)tvb_captured_length(tvb);
}

/* TRUE when |tvb| looks like the start of uCOBS traffic. Conservative: a
 * leading delimiter, a non-zero byte after it, every complete frame a
 * canonical encoding of at most UCOBS_MAX_DATAGRAM bytes, no run of more
 * than UCOBS_HEUR_MAX_ZEROS zeros, and at least one complete frame -- or, at
 * a stream start only, a first frame of at least UCOBS_HEUR_MIN_PARTIAL
 * bytes that continues past the segment. */
static gboolean ucobs_heur_looks_right(tvbuff_t *tvb, struct tcpinfo *tcpinfo)
{
    guint len = tvb_captured_length(tvb);
    if (len < 2 || tvb_get_guint8(tvb, 0) != 0 || tvb_get_guint8(tvb, 1) == 0) {
        return FALSE;
    }
    guint off = 0;
    guint frames = 0;
    while (off < len) {
        guint zeros = 0;
        while (off < len && tvb_get_guint8(tvb, off) == 0) {
            off++;
            zeros++;
        }
        if (zeros > UCOBS_HEUR_MAX_ZEROS) {
            return FALSE;
        }
        if (off == len) {
            break;
        }
        guint start = off;
        gint z = tvb_find_guint8(tvb, (gint)start, (gint)(len - start), 0);
        if (z < 0) {
            if (frames != 0) {
                break; /* the next datagram continues in a later segment */
            }
            /* The relative sequence number of a stream's first byte is 1. */
            gboolean at_stream_start = tcpinfo != NULL && tcpinfo->seq == 1;
            return at_stream_start && len - start >= UCOBS_HEUR_MIN_PARTIAL &&
                   len - start <= UCOBS_MAX_ENCODED;
        }
        guint enc_len = (guint)z - start;
        if (enc_len > UCOBS_MAX_ENCODED) {
            return FALSE;
        }
        const guint8 *enc = tvb_get_ptr(tvb, (gint)start, (gint)enc_len);
        guint8 *dec = (guint8 *)g_malloc(enc_len);
        size_t dec_len = 0;
        utls_cobs_result r =
            utls_cobs_decode(enc, enc_len, dec, MIN(enc_len - 1u, UCOBS_MAX_DATAGRAM), &dec_len);
        g_free(dec);
        if (r != UTLS_COBS_OK) {
            return FALSE;
        }
        frames++;
        off = (guint)z;
    }
    return frames != 0;
}

/* The "tcp" heuristic: claims the conversation when the payload looks like
 * uCOBS (ucobs_heur_looks_right); returns FALSE to let others try. */
static gboolean dissect_ucobs_heur(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
    struct tcpinfo *tcpinfo = (struct tcpinfo *)data;
    if (!ucobs_heur_looks_right(tvb, tcpinfo)) {
        return FALSE;
    }
    conversation_t *conv = find_or_create_conversation(pinfo);
    conversation_set_dissector(conv, ucobs_handle);
    dissect_ucobs(tvb, pinfo, tree, data);
    return TRUE;
}

void proto_register_ucobs(void)
{
    static hf_register_info hf[] = {
        { &hf_ucobs_frame,
          { "Frame", "ucobs.frame", FT_BYTES, BASE_NONE, NULL, 0x0,
            "The datagram's bytes on the wire: delimiters and COBS encoding", HFILL } },
        { &hf_ucobs_index,
          { "Index", "ucobs.index", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Datagram number in this direction of the connection, from 0 (stream order)", HFILL } },
        { &hf_ucobs_length,
          { "Length", "ucobs.length", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Decoded datagram length", HFILL } },
        { &hf_ucobs_encoded_length,
          { "Encoded length", "ucobs.encoded_length", FT_UINT32, BASE_DEC, NULL, 0x0,
            "COBS-encoded length, without the two delimiters", HFILL } },
        { &hf_ucobs_overhead,
          { "COBS overhead", "ucobs.overhead", FT_UINT32, BASE_DEC, NULL, 0x0,
            "Encoded length minus decoded length (code bytes; the delimiters add 2 more)",
            HFILL } },
        { &hf_ucobs_datagram,
          { "Datagram", "ucobs.datagram", FT_BYTES, BASE_NONE, NULL, 0x0,
            "The decoded datagram", HFILL } },
        { &hf_ucobs_bad_frame,
          { "Malformed frame", "ucobs.malformed_frame", FT_BYTES, BASE_NONE, NULL, 0x0,
            "A frame that does not decode (see the expert item); no datagram", HFILL } },
        { &hf_ucobs_undelimited,
          { "Undelimited bytes", "ucobs.undelimited", FT_BYTES, BASE_NONE, NULL, 0x0,
            "Bytes before the first delimiter of the payload: the tail of a datagram not seen "
            "whole",
            HFILL } },
        { &hf_ucobs_copy_of,
          { "Retransmission of the datagram in frame", "ucobs.retransmission_of", FT_FRAMENUM,
            BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_RETRANS_PREV), 0x0,
            "A TCP retransmission carried this datagram again; it is shown in that frame only",
            HFILL } },
    };
    static gint *ett[] = { &ett_ucobs, &ett_ucobs_frame };
    static ei_register_info ei[] = {
        { &ei_ucobs_non_canonical,
          { "ucobs.non_canonical", PI_MALFORMED, PI_ERROR,
            "Frame is not a canonical COBS encoding", EXPFILL } },
        { &ei_ucobs_oversized,
          { "ucobs.oversized", PI_MALFORMED, PI_ERROR,
            "Frame longer than the largest datagram", EXPFILL } },
        { &ei_ucobs_undelimited,
          { "ucobs.undelimited.expert", PI_SEQUENCE, PI_WARN,
            "Bytes without a leading delimiter", EXPFILL } },
        { &ei_ucobs_truncated,
          { "ucobs.truncated", PI_MALFORMED, PI_WARN,
            "Frame without its closing delimiter", EXPFILL } },
        { &ei_ucobs_copy,
          { "ucobs.retransmission", PI_SEQUENCE, PI_NOTE,
            "Datagram retransmitted: already shown in an earlier frame", EXPFILL } },
    };

    proto_ucobs = proto_register_protocol("uCOBS datagrams over TCP", "uCOBS", "ucobs");
    proto_register_field_array(proto_ucobs, hf, array_length(hf));
    proto_register_subtree_array(ett, array_length(ett));
    expert_module_t *expert_ucobs = expert_register_protocol(proto_ucobs);
    expert_register_field_array(expert_ucobs, ei, array_length(ei));
    ucobs_handle = register_dissector("ucobs", dissect_ucobs, proto_ucobs);
}

void proto_reg_handoff_ucobs(void)
{
    /* Creates the preference ucobs.tcp.port (empty by default) and the
     * Decode As entry. */
    dissector_add_uint_range_with_preference("tcp.port", "", ucobs_handle);
    heur_dissector_add("tcp", dissect_ucobs_heur, "uCOBS datagrams over TCP", "ucobs_tcp",
                       proto_ucobs, HEURISTIC_ENABLE);
}
