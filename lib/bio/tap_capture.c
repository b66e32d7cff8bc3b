/*
 * The tap's capture sockets: the data socket (an AF_PACKET socket with a
 * TPACKET_V2 ring that sees incoming segments to the tapped local ports), the
 * control socket (a plain AF_PACKET socket that sees the handshakes and
 * teardowns the local kernel sends), their classic BPF filters, and the
 * bounds-checked parser of what they capture. Everything captured is
 * untrusted, except that a packet the kernel marks PACKET_OUTGOING was sent
 * by this host.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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

int utls_tap_parse_segment(const unsigned char *p, size_t len, int outgoing, int headers_only,
                           tap_segment *out)
{
    size_t iphl, total, thl;
    const unsigned char *t, *src, *dst;
    size_t alen;

    memset(out, 0, sizeof(*out));
    if (len < 1)
        return 0;
    switch (p[0] >> 4) {
    case 4:
        if (len < 20 || (iphl = (size_t)(p[0] & 0x0f) * 4) < 20 || p[9] != IPPROTO_TCP)
            return 0;
        total = get16(p + 2);
        if (total < iphl || (get16(p + 6) & 0x3fff) != 0)
            return 0; /* an IP fragment */
        out->key.family = AF_INET;
        src = p + 12;
        dst = p + 16;
        alen = 4;
        break;
    case 6:
        iphl = 40;
        if (len < iphl || p[6] != IPPROTO_TCP)
            return 0; /* extension headers are not followed */
        total = iphl + get16(p + 4);
        out->key.family = AF_INET6;
        src = p + 8;
        dst = p + 24;
        alen = 16;
        break;
    default:
        return 0;
    }
    if (total > len) {
        if (!headers_only)
            return 0; /* truncated */
    } else {
        len = total;
    }
    if (len < iphl + 20)
        return 0;
    t = p + iphl;
    if ((thl = (size_t)(t[12] >> 4) * 4) < 20 || thl > len - iphl || thl > total - iphl)
        return 0;
    memcpy(out->key.local, outgoing ? src : dst, alen);
    memcpy(out->key.peer, outgoing ? dst : src, alen);
    out->key.pport = get16(outgoing ? t + 2 : t);
    out->key.lport = get16(outgoing ? t : t + 2);
    out->seq = get32(t + 4);
    out->ack = get32(t + 8);
    out->flags = t[13];
    out->payload_len = total - iphl - thl;
    out->payload = total <= len ? t + thl : NULL;
    out->ip = p;
    out->ip_len = len;
    return 1;
}

/* ones_sum adds |len| bytes to the one's complement sum |s| (RFC 1071). */
static uint32_t ones_sum(uint32_t s, const unsigned char *p, size_t len)
{
    size_t i;

    for (i = 0; i + 1 < len; i += 2)
        s += get16(p + i);
    if ((len & 1) != 0)
        s += (uint32_t)p[len - 1] << 8;
    return s;
}

int utls_tap_tcp_checksum_ok(const tap_segment *s)
{
    const unsigned char *p = s->ip;
    size_t iphl, tcplen;
    uint32_t sum;

    if (p == NULL || s->payload == NULL)
        return 0;
    if (s->key.family == AF_INET) {
        iphl = (size_t)(p[0] & 0x0f) * 4;
        tcplen = get16(p + 2) - iphl;
        sum = ones_sum(0, p + 12, 8); /* source and destination */
    } else {
        iphl = 40;
        tcplen = get16(p + 4);
        sum = ones_sum(0, p + 8, 32);
        sum += (uint32_t)(tcplen >> 16);
    }
    if (iphl + tcplen > s->ip_len)
        return 0;
    sum += IPPROTO_TCP + (uint32_t)(tcplen & 0xffff);
    sum = ones_sum(sum, p + iphl, tcplen);
    while ((sum >> 16) != 0)
        sum = (sum & 0xffff) + (sum >> 16);
    return sum == 0xffff;
}

/* --- A small classic BPF assembler ---------------------------------------- */

/*
 * Programs are a few fixed checks and one or two binary searches over sorted
 * ports. Conditional jumps reach 255 instructions at most, so a search
 * emits, where its right half is farther, a BPF_JA (32-bit offset) to it.
 * Labels are resolved when the program is finished.
 */
#define BPF_MAX_INS 4096 /* BPF_MAXINSNS */

#define BPF_MAX_LABELS 32

typedef struct {
    struct sock_filter ins[BPF_MAX_INS];
    size_t n;
    int overflow;
    /* fixups: instruction, label, which field (0 jt, 1 jf, 2 ja) */
    struct {
        size_t at;
        int label, field;
    } fix[64];
    size_t num_fix;
    long label_at[BPF_MAX_LABELS];
} bpf_asm;

enum { L_REJECT = 0, L_ACCEPT_RING, L_ACCEPT_CTL, L_V4, L_V6, L_TCP, L_OUT, L_OUT_ACK,
       L_IN_SYNACK, L_FAST4, L_FAST6, L_V4_OPTIONS, L_PORT, L_NUM };

static void asm_init(bpf_asm *a)
{
    size_t i;

    memset(a, 0, sizeof(*a));
    for (i = 0; i < BPF_MAX_LABELS; i++)
        a->label_at[i] = -1;
}

static size_t emit(bpf_asm *a, uint16_t code, uint32_t k, uint8_t jt, uint8_t jf)
{
    if (a->n >= BPF_MAX_INS) {
        a->overflow = 1;
        return a->n - 1;
    }
    a->ins[a->n] = (struct sock_filter){code, jt, jf, k};
    return a->n++;
}

static void fix(bpf_asm *a, size_t at, int label, int field)
{
    if (a->num_fix >= sizeof(a->fix) / sizeof(a->fix[0])) {
        a->overflow = 1;
        return;
    }
    a->fix[a->num_fix].at = at;
    a->fix[a->num_fix].label = label;
    a->fix[a->num_fix].field = field;
    a->num_fix++;
}

static void label(bpf_asm *a, int l)
{
    a->label_at[l] = (long)a->n;
}

/* jeq_or: continue if A == k, else go to |l|. */
static void jeq_or(bpf_asm *a, uint32_t k, int l)
{
    fix(a, emit(a, BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0), l, 1);
}

static void ja(bpf_asm *a, int l)
{
    fix(a, emit(a, BPF_JMP | BPF_JA, 0, 0, 0), l, 2);
}

static int asm_finish(bpf_asm *a)
{
    size_t i;

    for (i = 0; i < a->num_fix && !a->overflow; i++) {
        long to = a->label_at[a->fix[i].label];
        long d = to - (long)a->fix[i].at - 1;
        struct sock_filter *f = &a->ins[a->fix[i].at];

        if (to < 0 || d < 0 || (a->fix[i].field != 2 && d > 255))
            return 0;
        if (a->fix[i].field == 0)
            f->jt = (uint8_t)d;
        else if (a->fix[i].field == 1)
            f->jf = (uint8_t)d;
        else
            f->k = (uint32_t)d;
    }
    return !a->overflow;
}

/*
 * port_search emits a binary search for A among |ports[0..n)| (sorted):
 * "RET accept" on a match, "RET 0" otherwise. Each leaf returns itself, so
 * no jump leaves the search and none is longer than its left half.
 */
static void port_search(bpf_asm *a, const uint16_t *ports, size_t n, uint32_t accept)
{
    size_t mid, at;

    if (n == 0) {
        emit(a, BPF_RET | BPF_K, 0, 0, 0);
        return;
    }
    if (n == 1) {
        emit(a, BPF_JMP | BPF_JEQ | BPF_K, ports[0], 0, 1);
        emit(a, BPF_RET | BPF_K, accept, 0, 0);
        emit(a, BPF_RET | BPF_K, 0, 0, 0);
        return;
    }
    mid = n / 2; /* left: ports[0..mid), right: ports[mid..n) */
    /* A >= ports[mid]: the right half; else fall through to the left one. A
     * search over m ports takes fewer than 5m instructions; a BPF_JA
     * bridges a left half longer than a conditional jump reaches. */
    at = emit(a, BPF_JMP | BPF_JGE | BPF_K, ports[mid], 0, 0);
    if (5 * mid + 1 > 255) {
        size_t jump_at;

        a->ins[at].jt = 0;
        a->ins[at].jf = 1;
        jump_at = emit(a, BPF_JMP | BPF_JA, 0, 0, 0);
        port_search(a, ports, mid, accept);
        a->ins[jump_at].k = (uint32_t)(a->n - jump_at - 1);
    } else {
        port_search(a, ports, mid, accept);
        a->ins[at].jt = (uint8_t)(a->n - at - 1);
    }
    port_search(a, ports + mid, n - mid, accept);
}

/* ip_tcp_prologue: version 4 or 6, TCP, no IP fragment; X = offset of the
 * TCP header; anything else goes to L_REJECT. Ends at L_TCP. */
static void ip_tcp_prologue(bpf_asm *a)
{
    emit(a, BPF_LD | BPF_B | BPF_ABS, 0, 0, 0);
    emit(a, BPF_ALU | BPF_RSH | BPF_K, 4, 0, 0);
    fix(a, emit(a, BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 0), L_V4, 0);
    fix(a, emit(a, BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 0), L_V6, 0);
    ja(a, L_REJECT);
    label(a, L_V4);
    emit(a, BPF_LD | BPF_B | BPF_ABS, 9, 0, 0);
    jeq_or(a, IPPROTO_TCP, L_REJECT);
    emit(a, BPF_LD | BPF_H | BPF_ABS, 6, 0, 0);
    emit(a, BPF_ALU | BPF_AND | BPF_K, 0x3fff, 0, 0);
    jeq_or(a, 0, L_REJECT);
    emit(a, BPF_LDX | BPF_B | BPF_MSH, 0, 0, 0); /* X = 4 * IHL */
    ja(a, L_TCP);
    label(a, L_V6);
    emit(a, BPF_LD | BPF_B | BPF_ABS, 6, 0, 0);
    jeq_or(a, IPPROTO_TCP, L_REJECT);
    emit(a, BPF_LDX | BPF_IMM, 40, 0, 0);
    ja(a, L_TCP);
    label(a, L_REJECT);
    emit(a, BPF_RET | BPF_K, 0, 0, 0);
    label(a, L_TCP);
}

/* payload_check: with X the offset of the TCP header and A the IP packet's
 * total length, continue if the TCP segment carries payload (total > X +
 * data offset), else reject; X is restored. */
static void payload_check(bpf_asm *a)
{
    emit(a, BPF_ST, 1, 0, 0);                        /* M[1] = total */
    emit(a, BPF_MISC | BPF_TXA, 0, 0, 0);            /* A = X */
    emit(a, BPF_ST, 2, 0, 0);                        /* M[2] = X */
    emit(a, BPF_LD | BPF_B | BPF_IND, 12, 0, 0);     /* data offset << 4 */
    emit(a, BPF_ALU | BPF_RSH | BPF_K, 4, 0, 0);
    emit(a, BPF_ALU | BPF_LSH | BPF_K, 2, 0, 0);
    emit(a, BPF_ALU | BPF_ADD | BPF_X, 0, 0, 0);     /* A = X + TCP header length */
    emit(a, BPF_MISC | BPF_TAX, 0, 0, 0);
    emit(a, BPF_LD | BPF_MEM, 1, 0, 0);              /* A = total */
    emit(a, BPF_JMP | BPF_JGT | BPF_X, 0, 1, 0);
    emit(a, BPF_RET | BPF_K, 0, 0, 0);
    emit(a, BPF_LDX | BPF_MEM, 2, 0, 0);             /* X = TCP header offset */
}

/*
 * fast_path emits the checks for the common layout, whose TCP header is at a
 * fixed offset |thoff| (IPv4 without options: 20; IPv6 with no extension
 * header: 40), with absolute loads only: the kernel runs an absolute load
 * inline, and an indirect one (the general path's, X + k) through a helper
 * call. Every packet this host receives passes the data filter, so its
 * reject must be cheap. The protocol is the byte at |proto_off|; the length
 * at |len_off| (IPv4: total; IPv6: payload) counts from |len_base| (0 or
 * 40). Ends with A = the destination port, at L_PORT.
 */
static void fast_path(bpf_asm *a, uint32_t proto_off, uint32_t len_off, uint32_t len_base,
                      uint32_t thoff)
{
    emit(a, BPF_LD | BPF_B | BPF_ABS, proto_off, 0, 0);
    emit(a, BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 1, 0);
    emit(a, BPF_RET | BPF_K, 0, 0, 0);
    if (thoff == 20) { /* no IP fragment */
        emit(a, BPF_LD | BPF_H | BPF_ABS, 6, 0, 0);
        emit(a, BPF_JMP | BPF_JSET | BPF_K, 0x3fff, 0, 1);
        emit(a, BPF_RET | BPF_K, 0, 0, 0);
    }
    /* payload: the IP packet's length > TCP header offset + its length */
    emit(a, BPF_LD | BPF_B | BPF_ABS, thoff + 12, 0, 0);
    emit(a, BPF_ALU | BPF_RSH | BPF_K, 4, 0, 0);
    emit(a, BPF_ALU | BPF_LSH | BPF_K, 2, 0, 0);
    emit(a, BPF_ALU | BPF_ADD | BPF_K, thoff - len_base, 0, 0);
    emit(a, BPF_MISC | BPF_TAX, 0, 0, 0);
    emit(a, BPF_LD | BPF_H | BPF_ABS, len_off, 0, 0);
    emit(a, BPF_JMP | BPF_JGT | BPF_X, 0, 1, 0);
    emit(a, BPF_RET | BPF_K, 0, 0, 0);
    emit(a, BPF_LD | BPF_H | BPF_ABS, thoff + 2, 0, 0); /* destination port */
    ja(a, L_PORT);
}

/*
 * The data socket's program: incoming TCP segments with payload to a port
 * of |p->data| (segments without payload carry nothing the tap uses: they
 * take no ring space). IPv4 without options and IPv6 take the fast path;
 * IPv4 with options the general one, which finds the TCP header with X.
 * The three share one port search (a program holds 4,096 instructions, a
 * search over UTLS_TAP_MAX_PORTS about 2,600).
 */
static int build_data(bpf_asm *a, const tap_ports *p)
{
    asm_init(a);
    /* Each case is a BPF_JA away, as is the port search from each. */
    emit(a, BPF_LD | BPF_B | BPF_ABS, 0, 0, 0);
    emit(a, BPF_JMP | BPF_JEQ | BPF_K, 0x45, 0, 1);
    ja(a, L_FAST4);
    emit(a, BPF_ALU | BPF_RSH | BPF_K, 4, 0, 0);
    emit(a, BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 1);
    ja(a, L_FAST6);
    emit(a, BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 1);
    ja(a, L_V4_OPTIONS);
    emit(a, BPF_RET | BPF_K, 0, 0, 0);
    label(a, L_FAST4);
    fast_path(a, 9, 2, 0, 20);
    label(a, L_FAST6);
    fast_path(a, 6, 4, 40, 40);
    label(a, L_V4_OPTIONS);
    ip_tcp_prologue(a);
    emit(a, BPF_LD | BPF_H | BPF_ABS, 2, 0, 0);      /* IPv4: total length */
    payload_check(a);
    emit(a, BPF_LD | BPF_H | BPF_IND, 2, 0, 0); /* destination port */
    label(a, L_PORT);
    port_search(a, p->data, p->num_data, 0x40000);
    return asm_finish(a);
}

/*
 * The control socket's program: outgoing SYN, FIN or RST from a port of
 * |p->ctl| (any port when watching), every outgoing segment from a port of
 * |p->hs|, and, when watching, incoming SYN-ACKs (for connections whose
 * SYN this host sent). Only the headers are kept.
 */
static int build_ctl(bpf_asm *a, const tap_ports *p)
{
    asm_init(a);
    ip_tcp_prologue(a);
    emit(a, BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_PKTTYPE), 0, 0);
    fix(a, emit(a, BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 0, 0), L_OUT, 0);
    /* incoming */
    if (!p->watch) {
        emit(a, BPF_RET | BPF_K, 0, 0, 0);
    } else {
        emit(a, BPF_LD | BPF_B | BPF_IND, 13, 0, 0);
        emit(a, BPF_ALU | BPF_AND | BPF_K, TCP_FLAG_SYN | TCP_FLAG_ACK | TCP_FLAG_RST, 0, 0);
        emit(a, BPF_JMP | BPF_JEQ | BPF_K, TCP_FLAG_SYN | TCP_FLAG_ACK, 0, 1);
        emit(a, BPF_RET | BPF_K, UTLS_TAP_CTL_SNAPLEN, 0, 0);
        emit(a, BPF_RET | BPF_K, 0, 0, 0);
    }
    label(a, L_OUT);
    emit(a, BPF_LD | BPF_B | BPF_IND, 13, 0, 0);
    emit(a, BPF_ALU | BPF_AND | BPF_K, TCP_FLAG_SYN | TCP_FLAG_FIN | TCP_FLAG_RST, 0, 0);
    fix(a, emit(a, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0), L_OUT_ACK, 0);
    emit(a, BPF_LD | BPF_H | BPF_IND, 0, 0, 0); /* source port */
    if (p->watch) {
        emit(a, BPF_RET | BPF_K, UTLS_TAP_CTL_SNAPLEN, 0, 0);
    } else {
        /* a port of ctl or hs: search the handshake ports when ctl misses */
        if (p->num_hs == 0) {
            port_search(a, p->ctl, p->num_ctl, UTLS_TAP_CTL_SNAPLEN);
        } else {
            size_t i;

            for (i = 0; i < p->num_hs; i++) {
                emit(a, BPF_JMP | BPF_JEQ | BPF_K, p->hs[i], 0, 1);
                emit(a, BPF_RET | BPF_K, UTLS_TAP_CTL_SNAPLEN, 0, 0);
            }
            port_search(a, p->ctl, p->num_ctl, UTLS_TAP_CTL_SNAPLEN);
        }
    }
    label(a, L_OUT_ACK);
    emit(a, BPF_LD | BPF_H | BPF_IND, 0, 0, 0); /* source port */
    port_search(a, p->hs, p->num_hs, UTLS_TAP_CTL_SNAPLEN);
    return asm_finish(a);
}

static int attach_prog(int fd, bpf_asm *a)
{
    struct sock_fprog prog;

    prog.len = (unsigned short)a->n;
    prog.filter = a->ins;
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == 0;
}

int utls_tap_set_filters(int data_fd, int ctl_fd, const tap_ports *p)
{
    bpf_asm *a = OPENSSL_malloc(sizeof(*a));
    int ok = 0;

    if (a == NULL)
        return 0;
    if (!build_data(a, p) || !attach_prog(data_fd, a))
        goto end;
    if (!build_ctl(a, p) || !attach_prog(ctl_fd, a))
        goto end;
    ok = 1;

end:
    if (!ok)
        utls_raise(UTLS_R_TAP_SYSCALL, "tap filter (%zu ports): %s", p->num_data + p->num_ctl,
                   a->overflow ? "too long" : strerror(errno));
    OPENSSL_free(a);
    return ok;
}

/* open_packet_socket: a packet socket that captures nothing until bound. */
static int open_packet_socket(void)
{
    /* Protocol 0: nothing is captured until the filter is on and bind() runs. */
    int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        if (errno == EPERM || errno == EACCES)
            utls_raise(UTLS_R_TAP_PERMISSION, "AF_PACKET socket: %s (needs CAP_NET_RAW)",
                       strerror(errno));
        else
            utls_raise(UTLS_R_TAP_SYSCALL, "AF_PACKET socket: %s", strerror(errno));
    }
    return fd;
}

static int bind_all(int fd)
{
    struct sockaddr_ll sll;

    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = 0; /* every interface */
    return bind(fd, (struct sockaddr *)&sll, sizeof(sll)) == 0;
}

int utls_tap_open_sockets(int *out_data_fd, int *out_ctl_fd, void **out_ring, int bind_ctl)
{
    static const uint16_t none[1] = {0};
    tap_ports nothing = {none, 0, none, 0, none, 0, 0};
    struct tpacket_req req;
    void *ring = MAP_FAILED;
    int dfd = -1, cfd = -1, one = 1, v = TPACKET_V2, rcvbuf = UTLS_TAP_CTL_RCVBUF,
        copybuf = UTLS_TAP_COPY_RCVBUF;

    if ((dfd = open_packet_socket()) < 0 || (cfd = open_packet_socket()) < 0)
        goto err;
    if (!utls_tap_set_filters(dfd, cfd, &nothing))
        goto err;
    /* The ring sees arriving segments only: loopback shows each packet twice,
     * and what this host sends is the control socket's business. */
    (void)setsockopt(dfd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    (void)setsockopt(cfd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one));
    (void)setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    /* A segment larger than a frame: its whole copy on the data socket. The
     * buffer past net.core.rmem_max needs CAP_NET_ADMIN; without it the
     * kernel's limit stands (fewer large segments in flight at once). */
    if (setsockopt(dfd, SOL_SOCKET, SO_RCVBUFFORCE, &copybuf, sizeof(copybuf)) != 0)
        (void)setsockopt(dfd, SOL_SOCKET, SO_RCVBUF, &copybuf, sizeof(copybuf));
    memset(&req, 0, sizeof(req));
    req.tp_block_size = UTLS_TAP_BLOCK_SIZE;
    req.tp_block_nr = UTLS_TAP_BLOCK_NR;
    req.tp_frame_size = UTLS_TAP_FRAME_SIZE;
    req.tp_frame_nr = UTLS_TAP_FRAME_NR;
    if (setsockopt(dfd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) != 0
        || setsockopt(dfd, SOL_PACKET, PACKET_COPY_THRESH, &one, sizeof(one)) != 0
        || setsockopt(dfd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) != 0)
        goto syscall_err;
    ring = mmap(NULL, (size_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR, PROT_READ | PROT_WRITE,
                MAP_SHARED, dfd, 0);
    if (ring == MAP_FAILED)
        goto syscall_err;
    if (!bind_all(dfd) || (bind_ctl && !bind_all(cfd)))
        goto syscall_err;
    *out_data_fd = dfd;
    *out_ctl_fd = cfd;
    *out_ring = ring;
    return 1;

syscall_err:
    utls_raise(errno == EPERM ? UTLS_R_TAP_PERMISSION : UTLS_R_TAP_SYSCALL, "tap setup: %s",
               strerror(errno));
err:
    if (ring != MAP_FAILED)
        munmap(ring, (size_t)UTLS_TAP_BLOCK_SIZE * UTLS_TAP_BLOCK_NR);
    if (dfd >= 0)
        close(dfd);
    if (cfd >= 0)
        close(cfd);
    return 0;
}
