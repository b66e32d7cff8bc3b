/* test_tap_filter.c: the data socket's classic BPF program
 * (lib/bio/tap_capture.c, build_data), run by the kernel. As root, in a
 * network namespace of its own, the test puts the program on an AF_PACKET
 * socket bound to the loopback and sends it IPv4 and IPv6 packets through a
 * second one: a TCP segment with payload to a tapped port must arrive, and
 * everything else (another port, no payload, not TCP, an IP fragment, an
 * IPv6 extension header) must not, on each of the program's three paths
 * (IPv4 without options and IPv6, read with absolute loads; IPv4 with
 * options, read through the IP header's length) and with as many ports as
 * the hub allows. Without root it reports a skip. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bio/tap_local.h"
#include "net_bytes.h"

/* tap_capture.c's only call out of lib/bio/. */
void utls_raise(int reason, const char *fmt, ...)
{
    (void)reason;
    (void)fmt;
}

static int data_fd = -1, ctl_fd = -1, send_fd = -1, lo_index;

/* A packet to send: the IP version, the IPv4 header's option bytes (a
 * multiple of 4), the IP protocol (IPv6: next header), the IPv4 fragment
 * field, the TCP destination port and payload length; |tag| goes in the
 * sequence number, which identifies the packet if it arrives. */
typedef struct {
    int version, options, proto, frag;
    uint16_t dport;
    size_t payload;
    uint32_t tag;
} pkt_spec;

static size_t build(const pkt_spec *s, unsigned char *p)
{
    size_t iphl = s->version == 4 ? 20 + (size_t)s->options : 40, tcp = 20 + s->payload;

    memset(p, 0, iphl + tcp);
    if (s->version == 4) {
        p[0] = (unsigned char)(0x40 | (iphl / 4));
        put16(p + 2, (uint16_t)(iphl + tcp));
        put16(p + 6, (uint16_t)s->frag);
        p[8] = 64;
        p[9] = (unsigned char)s->proto;
        put32(p + 12, 0x7f000001);
        put32(p + 16, 0x7f000001);
        memset(p + 20, 1, (size_t)s->options); /* NOPs */
    } else {
        p[0] = 0x60;
        put16(p + 4, (uint16_t)tcp);
        p[6] = (unsigned char)s->proto;
        p[7] = 64;
        p[23] = 1; /* ::1 */
        p[39] = 1;
    }
    put16(p + iphl, 40000);
    put16(p + iphl + 2, s->dport);
    put32(p + iphl + 4, s->tag);
    p[iphl + 12] = 5 << 4;
    p[iphl + 13] = 0x18; /* PSH, ACK */
    memset(p + iphl + 20, 'x', s->payload);
    return iphl + tcp;
}

static void send_pkt(const pkt_spec *s)
{
    unsigned char p[1600];
    struct sockaddr_ll to;
    size_t n = build(s, p);

    memset(&to, 0, sizeof(to));
    to.sll_family = AF_PACKET;
    to.sll_ifindex = lo_index;
    to.sll_protocol = htons(s->version == 4 ? ETH_P_IP : ETH_P_IPV6);
    to.sll_halen = ETH_ALEN; /* to 00:00:00:00:00:00, the loopback's address */
    assert_int_equal(sendto(send_fd, p, n, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)n);
}

/* arrived: the tags of the packets the data socket got, until it is quiet
 * for 100 ms; returns how many (at most |max|). */
static size_t arrived(uint32_t *tags, size_t max)
{
    unsigned char p[2048];
    struct pollfd pfd = {data_fd, POLLIN, 0};
    size_t n = 0;

    while (poll(&pfd, 1, 100) > 0) {
        ssize_t k = recv(data_fd, p, sizeof(p), 0);
        size_t iphl;

        assert_true(k > 0);
        iphl = (p[0] >> 4) == 4 ? (size_t)(p[0] & 0x0f) * 4 : 40;
        assert_true((size_t)k >= iphl + 8);
        if (n < max)
            tags[n] = ((uint32_t)p[iphl + 4] << 24) | ((uint32_t)p[iphl + 5] << 16)
                      | ((uint32_t)p[iphl + 6] << 8) | p[iphl + 7];
        n++;
    }
    return n;
}

/* expect: sends each of |specs| and checks that exactly those with |want|
 * set arrived, in order. */
static void expect(const pkt_spec *specs, const int *want, size_t n)
{
    uint32_t tags[64], exp[64];
    size_t i, ne = 0, got;

    assert_true(n <= 64);
    for (i = 0; i < n; i++) {
        send_pkt(&specs[i]);
        if (want[i])
            exp[ne++] = specs[i].tag;
    }
    got = arrived(tags, 64);
    if (got != ne || memcmp(tags, exp, ne * sizeof(exp[0])) != 0) {
        for (i = 0; i < got && i < 64; i++)
            fprintf(stderr, "arrived: tag %u\n", tags[i]);
        for (i = 0; i < ne; i++)
            fprintf(stderr, "expected: tag %u\n", exp[i]);
        fail_msg("the filter let %zu packets through, expected %zu", got, ne);
    }
}

static void set_ports(const uint16_t *data, size_t n)
{
    tap_ports p;
    static const uint16_t none[1] = {0};

    memset(&p, 0, sizeof(p));
    p.data = data;
    p.num_data = n;
    p.ctl = none;
    p.hs = none;
    assert_int_equal(utls_tap_set_filters(data_fd, ctl_fd, &p), 1);
}

static int setup(void **state)
{
    struct sockaddr_ll sll;
    struct ifreq ifr;
    int one = 1, s;

    (void)state;
    if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
        fprintf(stderr, "SKIP: needs root (a network namespace, AF_PACKET): %s\n",
                geteuid() != 0 ? "not root" : strerror(errno));
        return 0;
    }
    s = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    assert_int_equal(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
    ifr.ifr_flags |= IFF_UP;
    assert_int_equal(ioctl(s, SIOCSIFFLAGS, &ifr), 0);
    close(s);
    lo_index = (int)if_nametoindex("lo");
    data_fd = socket(AF_PACKET, SOCK_DGRAM, 0);
    ctl_fd = socket(AF_PACKET, SOCK_DGRAM, 0);
    send_fd = socket(AF_PACKET, SOCK_DGRAM, 0);
    assert_true(data_fd >= 0 && ctl_fd >= 0 && send_fd >= 0);
    set_ports(NULL, 0);
    assert_int_equal(setsockopt(data_fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)),
                     0);
    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = lo_index;
    assert_int_equal(bind(data_fd, (struct sockaddr *)&sll, sizeof(sll)), 0);
    return 0;
}

#define SKIP_UNLESS_ROOT()                                                                        \
    do {                                                                                          \
        if (data_fd < 0)                                                                          \
            skip();                                                                               \
    } while (0)

static void test_tap_filter_paths(void **state)
{
    static const uint16_t ports[] = {443, 4433};
    /* version, options, protocol, fragment, port, payload, tag */
    static const pkt_spec specs[] = {
        {4, 0, IPPROTO_TCP, 0, 443, 10, 1},      /* IPv4 */
        {4, 0, IPPROTO_TCP, 0, 4433, 1, 2},
        {4, 0, IPPROTO_TCP, 0, 444, 10, 3},      /* another port */
        {4, 0, IPPROTO_TCP, 0, 443, 0, 4},       /* no payload */
        {4, 0, IPPROTO_UDP, 0, 443, 10, 5},      /* not TCP */
        {4, 0, IPPROTO_TCP, 0x2000, 443, 10, 6}, /* more fragments */
        {4, 0, IPPROTO_TCP, 0x0010, 443, 10, 7}, /* a fragment's offset */
        {4, 0, IPPROTO_TCP, 0x4000, 443, 10, 8}, /* don't fragment: whole */
        {4, 4, IPPROTO_TCP, 0, 443, 10, 9},      /* IPv4 with options */
        {4, 8, IPPROTO_TCP, 0, 4433, 10, 10},
        {4, 4, IPPROTO_TCP, 0, 444, 10, 11},
        {4, 4, IPPROTO_TCP, 0, 443, 0, 12},
        {4, 4, IPPROTO_TCP, 0x2000, 443, 10, 13},
        {4, 4, IPPROTO_UDP, 0, 443, 10, 14},
        {6, 0, IPPROTO_TCP, 0, 443, 10, 15},     /* IPv6 */
        {6, 0, IPPROTO_TCP, 0, 4433, 1, 16},
        {6, 0, IPPROTO_TCP, 0, 444, 10, 17},
        {6, 0, IPPROTO_TCP, 0, 443, 0, 18},
        {6, 0, 0, 0, 443, 10, 19},               /* hop-by-hop options first */
        {6, 0, IPPROTO_UDP, 0, 443, 10, 20},
    };
    static const int want[] = {1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0};

    (void)state;
    SKIP_UNLESS_ROOT();
    set_ports(ports, 2);
    expect(specs, want, sizeof(want) / sizeof(want[0]));
    /* No port tapped: nothing. */
    set_ports(NULL, 0);
    expect(specs, (const int[20]){0}, sizeof(want) / sizeof(want[0]));
}

/* The most ports the hub taps (UTLS_TAP_MAX_PORTS): the program still fits,
 * and its search, longer than a conditional jump reaches, finds the first,
 * a middle and the last port on each path and none between them. */
static void test_tap_filter_many_ports(void **state)
{
    static uint16_t ports[UTLS_TAP_MAX_PORTS];
    pkt_spec specs[3 * 6];
    int want[3 * 6];
    size_t i, v;

    (void)state;
    SKIP_UNLESS_ROOT();
    for (i = 0; i < UTLS_TAP_MAX_PORTS; i++)
        ports[i] = (uint16_t)(1000 + 3 * i);
    set_ports(ports, UTLS_TAP_MAX_PORTS);
    for (v = 0; v < 3; v++) {
        static const uint16_t probe[6] = {1000, 1001, 1000 + 3 * 256, 1000 + 3 * 256 + 2,
                                          1000 + 3 * (UTLS_TAP_MAX_PORTS - 1),
                                          1000 + 3 * UTLS_TAP_MAX_PORTS};

        for (i = 0; i < 6; i++) {
            pkt_spec *s = &specs[v * 6 + i];

            memset(s, 0, sizeof(*s));
            s->version = v == 2 ? 6 : 4;
            s->options = v == 1 ? 4 : 0;
            s->proto = IPPROTO_TCP;
            s->dport = probe[i];
            s->payload = 5;
            s->tag = (uint32_t)(100 + v * 6 + i);
            want[v * 6 + i] = (i % 2) == 0;
        }
    }
    expect(specs, want, 3 * 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tap_filter_paths),
        cmocka_unit_test(test_tap_filter_many_ports),
    };
    return cmocka_run_group_tests_name("tap_filter", tests, setup, NULL);
}
