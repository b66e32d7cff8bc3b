/*
 * Captured-segment validation: the checks the kernel's TCP applies to a
 * segment before it takes its data, applied by the tap to what it captured
 * (see tap_validate.h for why). A segment that fails is not stored: it
 * cannot hide a hole or take the place of the genuine copy.
 */
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked (glibc's lacks it) */
#include <netinet/in.h>

#include "bio/tap_validate.h"

static uint16_t v_get16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t v_get32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/*
 * csum_add adds |len| bytes at |p| (starting on a 16-bit word of the sum) to
 * the ones' complement sum |sum| of 16-bit words in the host's byte order.
 * The ones' complement sum does not depend on byte order (RFC 1071 2.B): a
 * sum over host-order words is the byte-swapped sum over network-order ones,
 * and the only test made of it, that it folds to all ones, reads the same in
 * both. Words are loaded 32 bits at a time into a 64-bit accumulator: no
 * carry is lost below 2^32 words, far beyond any packet.
 */
static uint64_t csum_add(uint64_t sum, const unsigned char *p, size_t len)
{
    uint32_t w;
    uint16_t h;

    while (len >= 16) {
        uint32_t a, b, c, d;

        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
        memcpy(&c, p + 8, 4);
        memcpy(&d, p + 12, 4);
        sum += ((uint64_t)a + b) + ((uint64_t)c + d);
        p += 16;
        len -= 16;
    }
    while (len >= 4) {
        memcpy(&w, p, 4);
        sum += w;
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        memcpy(&h, p, 2);
        sum += h;
        p += 2;
        len -= 2;
    }
    if (len == 1) {
        unsigned char last[2] = {p[0], 0}; /* the odd byte, padded with a zero */

        memcpy(&h, last, 2);
        sum += h;
    }
    return sum;
}

static uint16_t csum_fold(uint64_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

/* tcp_header locates the TCP header of a packet utls_tap_parse_segment
 * accepted, and its length (TCP header + payload). */
static int tcp_header(const unsigned char *pkt, size_t len, size_t *out_off, size_t *out_tcp_len)
{
    size_t iphl, total;

    if (len < 1)
        return 0;
    if (pkt[0] >> 4 == 4) {
        if (len < 20)
            return 0;
        iphl = (size_t)(pkt[0] & 0x0f) * 4;
        total = v_get16(pkt + 2);
    } else if (pkt[0] >> 4 == 6) {
        if (len < 40)
            return 0;
        iphl = 40;
        total = iphl + v_get16(pkt + 4);
    } else {
        return 0;
    }
    if (total > len || total < iphl + 20)
        return 0;
    *out_off = iphl;
    *out_tcp_len = total - iphl;
    return 1;
}

int utls_tap_tcp_checksum_ok_pkt(const unsigned char *pkt, size_t len)
{
    size_t off, tcp_len;
    uint64_t sum;

    if (!tcp_header(pkt, len, &off, &tcp_len))
        return 0;
    if (pkt[0] >> 4 == 4) {
        /* RFC 9293 3.1: source, destination, zero, protocol, TCP length. */
        sum = csum_add(0, pkt + 12, 8);
    } else {
        /* RFC 8200 8.1: source, destination, upper-layer length, next header. */
        sum = csum_add(0, pkt + 8, 32);
    }
    /* Words of the pseudo-header, as they lie in memory: network order. */
    sum += htons(IPPROTO_TCP);
    sum += htons((uint16_t)(tcp_len >> 16)); /* IPv6: a 32-bit length */
    sum += htons((uint16_t)tcp_len);
    sum = csum_add(sum, pkt + off, tcp_len);
    return csum_fold(sum) == 0xffff;
}

/* tcp_timestamp finds the TSval of the TCP options at |t| (|thl| bytes of
 * header); returns 1 if there is one. Options are walked with their
 * lengths checked: a malformed list simply has no timestamp. */
static int tcp_timestamp(const unsigned char *t, size_t thl, uint32_t *out_tsval)
{
    size_t i = 20;

    while (i < thl) {
        unsigned char kind = t[i];
        size_t olen;

        if (kind == 0) /* end of option list */
            return 0;
        if (kind == 1) { /* no-operation */
            i++;
            continue;
        }
        if (i + 1 >= thl || (olen = t[i + 1]) < 2 || i + olen > thl)
            return 0;
        /* RFC 7323 3.2: kind 8, length 10, TSval, TSecr. */
        if (kind == 8 && olen == 10) {
            *out_tsval = v_get32(t + i + 2);
            return 1;
        }
        i += olen;
    }
    return 0;
}

int utls_tap_inspect(const unsigned char *pkt, size_t len, unsigned int tp_status,
                     uint8_t flags, utls_tap_hdr *out)
{
    size_t off, tcp_len, thl;
    const unsigned char *t;

    memset(out, 0, sizeof(*out));
    out->flags = flags;
    if (!tcp_header(pkt, len, &off, &tcp_len)) {
        out->csum = UTLS_TAP_CSUM_BAD;
        return 0;
    }
    t = pkt + off;
    thl = (size_t)(t[12] >> 4) * 4;
    if (thl < 20 || thl > tcp_len) {
        out->csum = UTLS_TAP_CSUM_BAD;
        return 0;
    }
    out->ack = v_get32(t + 8);
    out->has_ts = (uint8_t)tcp_timestamp(t, thl, &out->tsval);

    /*
     * The checksum. CHECKSUM_PARTIAL (TP_STATUS_CSUMNOTREADY): the packet
     * was made on this host or came through a virtual device from one that
     * will fill the checksum in later; the field holds only the
     * pseudo-header's sum and the kernel's TCP takes it as correct, so the
     * tap must too (no remote sender can make such a packet). The device
     * checked it already (TP_STATUS_CSUM_VALID): the kernel does not check
     * again either. Otherwise the tap checks it, as the kernel will.
     */
    if (tp_status & TP_STATUS_CSUMNOTREADY)
        out->csum = UTLS_TAP_CSUM_UNCHECKED;
    else if (tp_status & TP_STATUS_CSUM_VALID)
        out->csum = UTLS_TAP_CSUM_BY_DEVICE;
    else if (utls_tap_tcp_checksum_ok_pkt(pkt, len))
        out->csum = UTLS_TAP_CSUM_OK;
    else
        out->csum = UTLS_TAP_CSUM_BAD;
    return out->csum != UTLS_TAP_CSUM_BAD;
}

utls_tap_verdict utls_tap_validate(utls_tap_validator *v, const unsigned char *pkt, size_t len,
                                   unsigned int tp_status, const tap_segment *seg,
                                   uint64_t offset, uint64_t confirmed,
                                   const utls_tap_kernel_query *q)
{
    utls_tap_hdr h;

    utls_tap_inspect(pkt, len, tp_status, seg->flags, &h);
    return utls_tap_validate_hdr(v, &h, seg->payload_len, offset, confirmed, q);
}

void utls_tap_validator_learn(utls_tap_validator *v, const utls_tap_hdr *h)
{
    int32_t d = (int32_t)(h->ack - v->ack_max);

    if (!v->ack_known || d > 0) {
        v->ack_max = h->ack;
        v->ack_known = 1;
    }
    if (h->has_ts && (!v->ts_known || (int32_t)(h->tsval - v->ts_recent) > 0)) {
        v->ts_recent = h->tsval;
        v->ts_known = 1;
    }
}

utls_tap_verdict utls_tap_validate_hdr(utls_tap_validator *v, const utls_tap_hdr *h,
                                       size_t payload_len, uint64_t offset, uint64_t confirmed,
                                       const utls_tap_kernel_query *q)
{
    utls_tap_verdict verdict = UTLS_TAP_SEG_OK;
    uint32_t ack = h->ack, tsval = h->tsval;
    int has_ts = h->has_ts, below = offset + payload_len <= confirmed;

    switch (h->csum) {
    case UTLS_TAP_CSUM_UNCHECKED:
        v->csum_unchecked++;
        break;
    case UTLS_TAP_CSUM_BY_DEVICE:
        v->csum_by_device++;
        break;
    case UTLS_TAP_CSUM_OK:
        break;
    default:
        verdict = UTLS_TAP_SEG_BAD_CHECKSUM;
        goto done;
    }
    /* RFC 9293 3.10.7.4: in a synchronized state a segment without ACK is
     * dropped; SYN and RST never carry stream data the kernel queues. */
    if ((h->flags & TCP_FLAG_ACK) == 0 || (h->flags & (TCP_FLAG_SYN | TCP_FLAG_RST)) != 0) {
        verdict = UTLS_TAP_SEG_BAD_FLAGS;
        goto done;
    }
    /* The receive window (RFC 9293 3.10.7.4): a segment that starts past
     * it is dropped. */
    if (offset >= confirmed && offset - confirmed >= v->rcv_window) {
        if (v->rcvbuf_stale && q != NULL) {
            long b = q->rcvbuf(q->sock_ptr);

            v->rcvbuf_stale = 0;
            if (b > 0 && (uint64_t)b > v->rcv_window)
                v->rcv_window = (uint64_t)b;
        }
        if (offset - confirmed >= v->rcv_window) {
            verdict = UTLS_TAP_SEG_OUT_OF_WINDOW;
            goto done;
        }
    }
    /*
     * The ACK. The kernel drops a segment acknowledging data it never sent
     * and one whose ACK is older than SND.UNA - MAX.SND.WND. The local send
     * sequence is at most the highest ACK seen plus what the kernel still
     * holds to send (SIOCOUTQ), read only when an ACK goes past that.
     */
    if (v->snd_exact) {
        /* Exact: past SND.NXT is past what the kernel sent. */
        if ((!v->snd_known || (int32_t)(ack - v->snd_nxt) > 0) && v->snd_stale && q != NULL
            && q->snd_nxt_off != NULL) {
            uint64_t off;

            v->snd_stale = 0;
            if (q->snd_nxt_off(q->sock_ptr, &off)) {
                v->snd_nxt = v->snd_base + (uint32_t)off;
                v->snd_known = 1;
            }
        }
        if (v->snd_known && (int32_t)(ack - v->snd_nxt) > 0) {
            verdict = UTLS_TAP_SEG_BAD_ACK;
            goto done;
        }
    }
    if (v->ack_known) {
        int32_t d = (int32_t)(ack - v->ack_max);

        if (v->snd_known) {
            /* Bounded from above exactly, above; only the lower bound here. */
            if (d < 0 && (uint32_t)(-(int64_t)d) > UTLS_TAP_ACK_MAX_BEHIND) {
                verdict = UTLS_TAP_SEG_BAD_ACK;
                goto done;
            }
        } else if (d > 0 && (uint32_t)d > v->outq + UTLS_TAP_ACK_SLACK && v->outq_stale
                   && q != NULL) {
            long n = q->outq(q->sock_ptr);

            v->outq_stale = 0;
            if (n >= 0)
                v->outq = (uint32_t)n;
        }
        if (!v->snd_known
            && ((d > 0 && (uint32_t)d > v->outq + UTLS_TAP_ACK_SLACK)
                || (d < 0 && (uint32_t)(-(int64_t)d) > UTLS_TAP_ACK_MAX_BEHIND))) {
            verdict = UTLS_TAP_SEG_BAD_ACK;
            goto done;
        }
    }
    /* PAWS (RFC 7323 5.3): a timestamp older than the newest one the kernel
     * took in order means an old duplicate, and is dropped. */
    if (has_ts && v->ts_known && (int32_t)(v->ts_recent - tsval) > UTLS_TAP_PAWS_WINDOW) {
        verdict = UTLS_TAP_SEG_PAWS;
        goto done;
    }
    /*
     * Learning. Only from a segment whose bytes the kernel had taken in
     * order by the time the tap looked (the kernel updates its own
     * TS.Recent from in-order segments only): a forged copy at a hole never
     * teaches. A forger who can send valid duplicates of data already
     * received can move the ACK reference by at most the slack each time;
     * such a forger can break the kernel's TCP itself (docs/tap-threats.md).
     */
    if (below)
        utls_tap_validator_learn(v, h);

done:
    v->counts[verdict]++;
    return verdict;
}

uint64_t utls_tap_kernel_inorder(int sock, uint64_t read_off)
{
    int inq;

    /* SIOCINQ on a TCP socket: RCV.NXT minus the bytes read (a FIN not
     * counted), i.e. what the kernel took in order and still holds. */
    if (ioctl(sock, SIOCINQ, &inq) != 0 || inq < 0)
        return read_off;
    return read_off + (uint64_t)inq;
}

static long query_outq(void *sock_ptr)
{
    int n;

    return ioctl(*(const int *)sock_ptr, SIOCOUTQ, &n) == 0 && n >= 0 ? (long)n : -1;
}

static long query_rcvbuf(void *sock_ptr)
{
    int n = 0;
    socklen_t nl = sizeof(n);

    return getsockopt(*(const int *)sock_ptr, SOL_SOCKET, SO_RCVBUF, &n, &nl) == 0 ? (long)n : -1;
}

int utls_tap_kernel_snd_nxt_off(int sock, uint64_t *out)
{
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    int outq, unsent;

    /*
     * The send queue first, the acknowledged count last: SND.UNA only grows
     * between the calls, so the sum can only come out at or above SND.NXT
     * (by what was acknowledged meanwhile), never below it: a genuine
     * segment's ACK is never refused for the race.
     */
    if (ioctl(sock, SIOCOUTQNSD, &unsent) != 0 || ioctl(sock, SIOCOUTQ, &outq) != 0
        || unsent < 0 || outq < unsent)
        return 0;
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0
        || tl < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
        return 0;
    *out = ti.tcpi_bytes_acked + (uint64_t)(outq - unsent);
    return 1;
}

static int query_snd_nxt_off(void *sock_ptr, uint64_t *out)
{
    return utls_tap_kernel_snd_nxt_off(*(const int *)sock_ptr, out);
}

utls_tap_kernel_query utls_tap_socket_query(int *sock)
{
    utls_tap_kernel_query q = {query_outq, query_rcvbuf, query_snd_nxt_off, sock};

    return q;
}

void utls_tap_validator_set_send_base(utls_tap_validator *v, uint32_t local_isn,
                                      int local_connected)
{
    v->snd_base = local_connected ? local_isn : local_isn + 1;
    v->snd_exact = 1;
    v->snd_known = 0;
    v->snd_stale = 1;
}

void utls_tap_validator_drain(utls_tap_validator *v)
{
    v->outq_stale = 1;
    v->rcvbuf_stale = 1;
    v->snd_stale = 1;
}
