/*
 * The tap's capture socket: an AF_PACKET socket with a TPACKET_V3 ring and
 * a classic BPF filter on one connection's 4-tuple (or a listener's SYNs),
 * and the bounds-checked parser of what it captures. Everything captured is
 * untrusted.
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

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* utls_tap_parse_segment reads an IPv4 or IPv6 TCP segment (network header first). */
int utls_tap_parse_segment(const unsigned char *p, size_t len, tap_segment *out)
{
    size_t iphl, total, thl;
    const unsigned char *t;

    memset(out, 0, sizeof(*out));
    if (len < 1)
        return 0;
    switch (p[0] >> 4) {
    case 4:
        if (len < 20 || (iphl = (size_t)(p[0] & 0x0f) * 4) < 20 || p[9] != IPPROTO_TCP)
            return 0;
        total = get16(p + 2);
        if (total < iphl || total > len || (get16(p + 6) & 0x3fff) != 0)
            return 0; /* truncated, or an IP fragment */
        out->key.family = AF_INET;
        memcpy(out->key.peer, p + 12, 4);
        memcpy(out->key.local, p + 16, 4);
        break;
    case 6:
        iphl = 40;
        if (len < iphl || p[6] != IPPROTO_TCP)
            return 0; /* extension headers are not followed */
        total = iphl + get16(p + 4);
        if (total > len)
            return 0;
        out->key.family = AF_INET6;
        memcpy(out->key.peer, p + 8, 16);
        memcpy(out->key.local, p + 24, 16);
        break;
    default:
        return 0;
    }
    t = p + iphl;
    if (total - iphl < 20 || (thl = (size_t)(t[12] >> 4) * 4) < 20 || thl > total - iphl)
        return 0;
    out->key.pport = get16(t);
    out->key.lport = get16(t + 2);
    out->seq = get32(t + 4);
    out->flags = t[13];
    out->payload = t + thl;
    out->payload_len = total - iphl - thl;
    return 1;
}

/* --- BPF filters ---------------------------------------------------------- */

/*
 * A classic BPF program over the network header (SOCK_DGRAM packet socket)
 * that accepts TCP segments to |k|'s local port (and, with |match_peer|, from
 * its peer address and port to its local address), with the TCP flags
 * (masked by |flag_mask|) equal to |flags|. IPv4 with any header length, and
 * IPv6 without extension headers. Checks are a chain that jumps to "reject".
 */
typedef struct {
    struct sock_filter ins[96];
    size_t n;
    size_t reject_jumps[64];
    size_t num_rj;
} bpf_prog;

static void bpf_op(bpf_prog *b, uint16_t code, uint32_t k)
{
    b->ins[b->n++] = (struct sock_filter)BPF_STMT(code, k);
}

/* bpf_require: continue if A == k, else reject. */
static void bpf_require(bpf_prog *b, uint32_t k)
{
    b->reject_jumps[b->num_rj++] = b->n;
    b->ins[b->n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0);
}

static void bpf_tcp_checks(bpf_prog *b, const tap_key *k, int match_peer, uint8_t flag_mask,
                           uint8_t flags)
{
    /* X holds the offset of the TCP header. Port 0: any port. */
    if (k->lport != 0) {
        bpf_op(b, BPF_LD | BPF_H | BPF_IND, 2);
        bpf_require(b, k->lport);
    }
    if (match_peer) {
        bpf_op(b, BPF_LD | BPF_H | BPF_IND, 0);
        bpf_require(b, k->pport);
    }
    bpf_op(b, BPF_LD | BPF_B | BPF_IND, 13);
    bpf_op(b, BPF_ALU | BPF_AND | BPF_K, flag_mask);
    bpf_require(b, flags);
    bpf_op(b, BPF_RET | BPF_K, 0x40000); /* accept the whole packet */
}

static void bpf_build(bpf_prog *b, const tap_key *k, int match_peer, uint8_t flag_mask,
                      uint8_t flags)
{
    size_t i, v6_start_jump;

    memset(b, 0, sizeof(*b));
    /* Version nibble: 4 or 6. */
    bpf_op(b, BPF_LD | BPF_B | BPF_ABS, 0);
    bpf_op(b, BPF_ALU | BPF_RSH | BPF_K, 4);
    v6_start_jump = b->n;
    b->ins[b->n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 0);
    if (k->family == AF_INET6) {
        /* An IPv6 connection: IPv4 packets are rejected. */
        b->reject_jumps[b->num_rj++] = b->n;
        b->ins[b->n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
    } else {
        bpf_op(b, BPF_LD | BPF_B | BPF_ABS, 0);
        bpf_op(b, BPF_ALU | BPF_RSH | BPF_K, 4);
        bpf_require(b, 4);
        bpf_op(b, BPF_LD | BPF_B | BPF_ABS, 9);
        bpf_require(b, IPPROTO_TCP);
        bpf_op(b, BPF_LD | BPF_H | BPF_ABS, 6);
        bpf_op(b, BPF_ALU | BPF_AND | BPF_K, 0x3fff);
        bpf_require(b, 0); /* no IP fragments */
        if (match_peer) {
            bpf_op(b, BPF_LD | BPF_W | BPF_ABS, 12);
            bpf_require(b, get32(k->peer));
            bpf_op(b, BPF_LD | BPF_W | BPF_ABS, 16);
            bpf_require(b, get32(k->local));
        }
        bpf_op(b, BPF_LDX | BPF_B | BPF_MSH, 0); /* X = 4 * IHL */
        bpf_tcp_checks(b, k, match_peer, flag_mask, flags);
    }
    /* IPv6 starts here. */
    b->ins[v6_start_jump].jt = (uint8_t)(b->n - v6_start_jump - 1);
    if (k->family == AF_INET) {
        b->reject_jumps[b->num_rj++] = b->n;
        b->ins[b->n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
    } else {
        bpf_op(b, BPF_LD | BPF_B | BPF_ABS, 6);
        bpf_require(b, IPPROTO_TCP);
        if (match_peer) {
            for (i = 0; i < 4; i++) {
                bpf_op(b, BPF_LD | BPF_W | BPF_ABS, (uint32_t)(8 + 4 * i));
                bpf_require(b, get32(k->peer + 4 * i));
                bpf_op(b, BPF_LD | BPF_W | BPF_ABS, (uint32_t)(24 + 4 * i));
                bpf_require(b, get32(k->local + 4 * i));
            }
        }
        bpf_op(b, BPF_LDX | BPF_IMM, 40);
        bpf_tcp_checks(b, k, match_peer, flag_mask, flags);
    }
    /* reject */
    for (i = 0; i < b->num_rj; i++) {
        struct sock_filter *f = &b->ins[b->reject_jumps[i]];
        uint8_t dist = (uint8_t)(b->n - b->reject_jumps[i] - 1);

        if (BPF_OP(f->code) == BPF_JA)
            f->k = dist;
        else
            f->jf = dist;
    }
    bpf_op(b, BPF_RET | BPF_K, 0);
}

/*
 * utls_tap_open_socket returns a non-blocking packet socket that sees, on every
 * interface of this network namespace, the incoming segments the filter for
 * |k| accepts; with |ring| a TPACKET_V3 ring is mapped into |*out_ring|.
 * Returns -1 with a uTLS error raised on failure.
 */
int utls_tap_open_socket(const tap_key *k, int match_peer, uint8_t flag_mask, uint8_t flags,
                         void **out_ring)
{
    struct sock_fprog prog;
    struct sockaddr_ll sll;
    bpf_prog b;
    int fd, one = 1;

    /* Protocol 0: nothing is captured until the filter is on and bind() runs. */
    fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == EPERM || errno == EACCES)
            utls_raise(UTLS_R_TAP_PERMISSION, "AF_PACKET socket: %s (needs CAP_NET_RAW)",
                       strerror(errno));
        else
            utls_raise(UTLS_R_TAP_SYSCALL, "AF_PACKET socket: %s", strerror(errno));
        return -1;
    }
    bpf_build(&b, k, match_peer, flag_mask, flags);
    prog.len = (unsigned short)b.n;
    prog.filter = b.ins;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0)
        goto syscall_err;
    /* Loopback shows each packet twice; only the arriving copy counts. */
    (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    if (out_ring != NULL) {
        struct tpacket_req3 req;
        int v = TPACKET_V3;

        memset(&req, 0, sizeof(req));
        req.tp_block_size = UTLS_TAP_BLOCK_SIZE;
        req.tp_block_nr = UTLS_TAP_BLOCK_NR;
        req.tp_frame_size = UTLS_TAP_FRAME_SIZE;
        req.tp_frame_nr = (UTLS_TAP_BLOCK_SIZE / UTLS_TAP_FRAME_SIZE) * UTLS_TAP_BLOCK_NR;
        req.tp_retire_blk_tov = UTLS_TAP_BLOCK_TIMEOUT_MS;
        if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) != 0
            || setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) != 0)
            goto syscall_err;
        *out_ring = mmap(NULL, (size_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR,
                         PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (*out_ring == MAP_FAILED) {
            *out_ring = NULL;
            goto syscall_err;
        }
    }
    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = 0; /* every interface */
    if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) != 0)
        goto syscall_err;
    return fd;

syscall_err:
    utls_raise(errno == EPERM ? UTLS_R_TAP_PERMISSION : UTLS_R_TAP_SYSCALL, "tap setup: %s",
               strerror(errno));
    if (out_ring != NULL && *out_ring != NULL) {
        munmap(*out_ring, (size_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR);
        *out_ring = NULL;
    }
    close(fd);
    return -1;
}
