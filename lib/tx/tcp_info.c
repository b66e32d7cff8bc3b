/*
 * TCP information and safe control (icTCP's "information"): TCP_INFO and
 * TCP_CC_INFO read into UTLS_TCP_INFO, and the controls that are never more
 * aggressive than TCP (window clamp, pacing cap): UTLS_tcp_*.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"
#include "tx/utls_tx.h"


/*
 * The kernel's struct tcp_info (include/uapi/linux/tcp.h), up to the fields
 * used here. glibc's netinet/tcp.h, which libssl's headers pull in, stops at
 * tcpi_total_retrans, and linux/tcp.h cannot be included next to it. The
 * layout is kernel ABI: fields are only ever appended, and a kernel that has
 * fewer returns a shorter length, which leaves the rest zero.
 */
struct utls_kernel_tcp_info {
    uint8_t tcpi_state, tcpi_ca_state, tcpi_retransmits, tcpi_probes, tcpi_backoff, tcpi_options;
    uint8_t tcpi_wscale;       /* snd:4, rcv:4 */
    uint8_t tcpi_app_limited;  /* delivery_rate_app_limited:1, fastopen_client_fail:2 */
    uint32_t tcpi_rto, tcpi_ato, tcpi_snd_mss, tcpi_rcv_mss;
    uint32_t tcpi_unacked, tcpi_sacked, tcpi_lost, tcpi_retrans, tcpi_fackets;
    uint32_t tcpi_last_data_sent, tcpi_last_ack_sent, tcpi_last_data_recv, tcpi_last_ack_recv;
    uint32_t tcpi_pmtu, tcpi_rcv_ssthresh, tcpi_rtt, tcpi_rttvar, tcpi_snd_ssthresh;
    uint32_t tcpi_snd_cwnd, tcpi_advmss, tcpi_reordering, tcpi_rcv_rtt, tcpi_rcv_space;
    uint32_t tcpi_total_retrans;
    uint64_t tcpi_pacing_rate, tcpi_max_pacing_rate, tcpi_bytes_acked, tcpi_bytes_received;
    uint32_t tcpi_segs_out, tcpi_segs_in;
    uint32_t tcpi_notsent_bytes, tcpi_min_rtt, tcpi_data_segs_in, tcpi_data_segs_out;
    uint64_t tcpi_delivery_rate;
    uint64_t tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited;
    uint32_t tcpi_delivered, tcpi_delivered_ce;
    uint64_t tcpi_bytes_sent, tcpi_bytes_retrans;
};

/* The kernel's struct tcp_bbr_info (include/uapi/linux/inet_diag.h), what
 * TCP_CC_INFO returns for BBR. Vegas and DCTCP return 16 bytes, BBR 20. */
struct utls_kernel_bbr_info {
    uint32_t bbr_bw_lo, bbr_bw_hi, bbr_min_rtt, bbr_pacing_gain, bbr_cwnd_gain;
};

/* --- TCP information and safe control -------------------------------- */

/* tcp_get_cc reads the congestion control's name and, for BBR, its state. */
static void tcp_get_cc(int fd, UTLS_TCP_INFO *out)
{
    struct utls_kernel_bbr_info bi;
    socklen_t len = sizeof(out->congestion_control) - 1;

    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, out->congestion_control, &len) != 0) {
        memset(out->congestion_control, 0, sizeof(out->congestion_control));
        return;
    }
    if (strcmp(out->congestion_control, "bbr") != 0) {
        return;
    }
    memset(&bi, 0, sizeof(bi));
    len = sizeof(bi);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &bi, &len) != 0 || len != sizeof(bi)) {
        return;
    }
    out->cc_is_bbr = 1;
    out->bbr_min_rtt_us = bi.bbr_min_rtt;
    out->bbr_bw = (uint64_t)bi.bbr_bw_hi << 32 | bi.bbr_bw_lo;
}

/* utls_tx_tcp_info is UTLS_tcp_get_info; |want_cc| 0 leaves out the congestion
 * control's name and state (two more system calls per flush, which the
 * scheduler makes only when its ProbeRTT drain can use them). */
int utls_tx_tcp_info(int fd, UTLS_TCP_INFO *out_info, int want_cc)
{
    struct utls_kernel_tcp_info ti;
    socklen_t len = sizeof(ti);
    uint64_t segs;

    if (out_info == NULL) {
        return 0;
    }
    memset(out_info, 0, sizeof(*out_info));
    memset(&ti, 0, sizeof(ti));
    if (fd < 0) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "getsockopt(TCP_INFO) on fd %d: bad descriptor", fd);
        return 0;
    }
    /* The congestion control's state first, TCP_INFO second: an ACK between
     * the two calls that starts ProbeRTT then shows as the window dropping
     * with the old min_rtt, never as a min_rtt refresh without the window
     * dropping (which would cancel a drain just before it pays off). */
    if (want_cc) {
        tcp_get_cc(fd, out_info);
    }
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "getsockopt(TCP_INFO) on fd %d: %s", fd,
                   strerror(errno));
        memset(out_info, 0, sizeof(*out_info));
        return 0;
    }
    out_info->ca_state = ti.tcpi_ca_state;
    out_info->srtt_us = ti.tcpi_rtt;
    out_info->rttvar_us = ti.tcpi_rttvar;
    out_info->min_rtt_us = ti.tcpi_min_rtt;
    out_info->mss = ti.tcpi_snd_mss;
    out_info->cwnd_segs = ti.tcpi_snd_cwnd;
    out_info->ssthresh_segs = ti.tcpi_snd_ssthresh;
    out_info->unacked_segs = ti.tcpi_unacked;
    out_info->lost_segs = ti.tcpi_lost;
    /* Linux's tcp_packets_in_flight(): packets_out - (sacked_out + lost_out)
     * + retrans_out, in segments. */
    segs = (uint64_t)ti.tcpi_unacked + ti.tcpi_retrans;
    segs = segs > (uint64_t)ti.tcpi_sacked + ti.tcpi_lost
               ? segs - ti.tcpi_sacked - ti.tcpi_lost
               : 0;
    out_info->bytes_in_flight = segs * ti.tcpi_snd_mss;
    out_info->notsent_bytes = ti.tcpi_notsent_bytes;
    out_info->total_retrans = ti.tcpi_total_retrans;
    out_info->bytes_retrans = ti.tcpi_bytes_retrans;
    out_info->delivery_rate = ti.tcpi_delivery_rate;
    out_info->delivery_rate_app_limited = ti.tcpi_app_limited & 1;
    out_info->pacing_rate = ti.tcpi_pacing_rate;
    out_info->max_pacing_rate = ti.tcpi_max_pacing_rate;
    return 1;
}

int UTLS_tcp_get_info(int fd, UTLS_TCP_INFO *out_info)
{
    return utls_tx_tcp_info(fd, out_info, 1);
}

int UTLS_tcp_set_window_clamp(int fd, uint32_t bytes)
{
    int v;

    /* A clamp only lowers the window we advertise, so the peer can only send
     * less; 0 would close the window entirely, which is not "restraint" but a
     * stall, so it is refused. */
    if (bytes == 0 || bytes > INT32_MAX) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "window clamp %u out of range", bytes);
        return 0;
    }
    v = (int)bytes;
    if (setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &v, sizeof(v)) != 0) {
        utls_raise(UTLS_R_SCHED_TCP_INFO, "setsockopt(TCP_WINDOW_CLAMP) on fd %d: %s", fd,
                   strerror(errno));
        return 0;
    }
    return 1;
}

int UTLS_tcp_set_max_pacing_rate(int fd, uint64_t bytes_per_sec)
{
    unsigned long v64 = (unsigned long)bytes_per_sec;
    uint32_t v32;

    /* The cap is an upper bound on top of TCP's own pacing: it can only slow
     * the sender. 4.20+ takes 64 bits; older kernels 32 (~0U = no cap). */
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v64, sizeof(v64)) == 0) {
        return 1;
    }
    v32 = bytes_per_sec >= UINT32_MAX ? UINT32_MAX : (uint32_t)bytes_per_sec;
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v32, sizeof(v32)) == 0) {
        return 1;
    }
    utls_raise(UTLS_R_SCHED_TCP_INFO, "setsockopt(SO_MAX_PACING_RATE) on fd %d: %s", fd,
               strerror(errno));
    return 0;
}
