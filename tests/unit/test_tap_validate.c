/* test_tap_validate.c: unit tests for the tap's validation of captured
 * segments (lib/bio/tap_validate.c), without a network: IPv4 and IPv6 TCP
 * segments built here, with right and wrong checksums, flags, windows, ACKs
 * and timestamps, checked against the verdicts the kernel's TCP would give
 * (issue 20, point 6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bio/tap_validate.h"
#include "net_bytes.h"

/* tap_capture.c's (the parser's file) only call out of lib/bio/. */
void utls_raise(int reason, const char *fmt, ...)
{
    (void)reason;
    (void)fmt;
}

static unsigned char pkt[2048];

/* A reference checksum, written independently of the one under test: a
 * plain 32-bit ones'-complement sum, folded. */
static uint16_t ref_sum(const unsigned char *p, size_t len, uint32_t sum)
{
    size_t i;

    for (i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)((p[i] << 8) | p[i + 1]);
    if (len & 1)
        sum += (uint32_t)p[len - 1] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

typedef struct {
    int v6;
    uint32_t seq, ack;
    uint8_t flags;
    int ts;
    uint32_t tsval;
    size_t payload;
    int bad_csum;
} seg_spec;

/* build writes the packet of |sp| to pkt, parses it into |seg|, returns its
 * length. */
static size_t build(const seg_spec *sp, tap_segment *seg)
{
    size_t iphl = sp->v6 ? 40 : 20, thl = sp->ts ? 32 : 20, tcp_len = thl + sp->payload, i;
    unsigned char *t = pkt + iphl;
    uint32_t pseudo;
    uint16_t c;

    memset(pkt, 0, sizeof(pkt));
    if (sp->v6) {
        pkt[0] = 0x60;
        put16(pkt + 4, (uint16_t)tcp_len);
        pkt[6] = IPPROTO_TCP;
        pkt[7] = 64;
        for (i = 0; i < 16; i++) {
            pkt[8 + i] = (unsigned char)(0xfd + i);
            pkt[24 + i] = (unsigned char)(0x20 + 3 * i);
        }
    } else {
        pkt[0] = 0x45;
        put16(pkt + 2, (uint16_t)(iphl + tcp_len));
        pkt[6] = 0x40;
        pkt[8] = 64;
        pkt[9] = IPPROTO_TCP;
        put32(pkt + 12, 0x0a4d0102);
        put32(pkt + 16, 0x0a4d0202);
    }
    put16(t, 40000);
    put16(t + 2, 4433);
    put32(t + 4, sp->seq);
    put32(t + 8, sp->ack);
    t[12] = (unsigned char)((thl / 4) << 4);
    t[13] = sp->flags;
    put16(t + 14, 502);
    if (sp->ts) {
        t[20] = 1;
        t[21] = 1;
        t[22] = 8;
        t[23] = 10;
        put32(t + 24, sp->tsval);
        put32(t + 28, 12345);
    }
    for (i = 0; i < sp->payload; i++)
        t[thl + i] = (unsigned char)(i * 7 + 3);
    /* Pseudo-header sum, then the segment with a zero checksum field. */
    pseudo = sp->v6 ? ref_sum(pkt + 8, 32, 0) : ref_sum(pkt + 12, 8, 0);
    pseudo += IPPROTO_TCP + (uint32_t)tcp_len;
    c = (uint16_t)~ref_sum(t, tcp_len, pseudo);
    if (sp->bad_csum)
        c ^= 0x5a5a;
    put16(t + 16, c);
    assert_int_equal(utls_tap_parse_segment(pkt, iphl + tcp_len, 0, 0, seg), 1);
    return iphl + tcp_len;
}

/* validator_init: |v| as a tapped connection has it before its first
 * segment (nothing learnt), with a receive window of |rcv_window| bytes. */
static void validator_init(utls_tap_validator *v, uint64_t rcv_window)
{
    memset(v, 0, sizeof(*v));
    v->rcv_window = rcv_window;
}

static utls_tap_verdict check(utls_tap_validator *v, const seg_spec *sp, unsigned int status,
                              uint64_t offset, uint64_t confirmed)
{
    tap_segment seg;
    size_t len = build(sp, &seg);

    return utls_tap_validate(v, pkt, len, status, &seg, offset, confirmed, NULL);
}

static void test_tap_validate_checksum(void **state)
{
    utls_tap_validator v;
    seg_spec sp = {0, 1000, 5000, 0x18, 0, 0, 1448, 0};
    tap_segment seg;
    size_t len;

    (void)state;
    validator_init(&v, 1 << 20);
    for (sp.v6 = 0; sp.v6 <= 1; sp.v6++) {
        /* Every length to past four 16-byte strides, odd ones too, and
         * around a full segment: each tail the word loop can leave. */
        for (sp.payload = 0; sp.payload < 1460; sp.payload += sp.payload < 70 ? 1 : 689) {
            sp.bad_csum = 0;
            len = build(&sp, &seg);
            assert_int_equal(utls_tap_tcp_checksum_ok_pkt(pkt, len), 1);
            sp.bad_csum = 1;
            len = build(&sp, &seg);
            assert_int_equal(utls_tap_tcp_checksum_ok_pkt(pkt, len), 0);
        }
        sp.payload = 1448;
        sp.bad_csum = 1;
        assert_int_equal(check(&v, &sp, 0, 100, 0), UTLS_TAP_SEG_BAD_CHECKSUM);
        /* CHECKSUM_PARTIAL: the field is not the sum yet; the kernel takes
         * it, so does the tap. Verified by the device: not checked again. */
        assert_int_equal(check(&v, &sp, TP_STATUS_CSUMNOTREADY, 100, 0), UTLS_TAP_SEG_OK);
        assert_int_equal(check(&v, &sp, TP_STATUS_CSUM_VALID, 100, 0), UTLS_TAP_SEG_OK);
        sp.bad_csum = 0;
        assert_int_equal(check(&v, &sp, 0, 100, 0), UTLS_TAP_SEG_OK);
    }
    assert_int_equal(v.counts[UTLS_TAP_SEG_BAD_CHECKSUM], 2);
    assert_int_equal(v.csum_unchecked, 2);
    assert_int_equal(v.csum_by_device, 2);
    /* A flipped payload bit breaks it. */
    len = build(&sp, &seg);
    pkt[len - 1] ^= 1;
    assert_int_equal(utls_tap_tcp_checksum_ok_pkt(pkt, len), 0);
    assert_int_equal(utls_tap_tcp_checksum_ok_pkt(pkt, 10), 0); /* truncated */
}

static void test_tap_validate_flags_and_window(void **state)
{
    utls_tap_validator v;
    seg_spec sp = {0, 1000, 5000, 0x18, 0, 0, 100, 0};

    (void)state;
    validator_init(&v, 65536);
    sp.flags = 0x08; /* PSH without ACK */
    assert_int_equal(check(&v, &sp, 0, 100, 0), UTLS_TAP_SEG_BAD_FLAGS);
    sp.flags = 0x14; /* RST|ACK with data */
    assert_int_equal(check(&v, &sp, 0, 100, 0), UTLS_TAP_SEG_BAD_FLAGS);
    sp.flags = 0x12; /* SYN|ACK with data */
    assert_int_equal(check(&v, &sp, 0, 100, 0), UTLS_TAP_SEG_BAD_FLAGS);
    sp.flags = 0x10;
    assert_int_equal(check(&v, &sp, 0, 1000 + 65535, 1000), UTLS_TAP_SEG_OK);
    assert_int_equal(check(&v, &sp, 0, 1000 + 65536, 1000), UTLS_TAP_SEG_OUT_OF_WINDOW);
    assert_int_equal(check(&v, &sp, 0, 500, 1000), UTLS_TAP_SEG_OK); /* old: harmless */
}

static void test_tap_validate_ack(void **state)
{
    utls_tap_validator v;
    seg_spec sp = {0, 1000, 5000, 0x10, 0, 0, 100, 0};

    (void)state;
    validator_init(&v, 1 << 20);
    /* The first segment the kernel took in order teaches the ACK. */
    assert_int_equal(check(&v, &sp, 0, 0, 100), UTLS_TAP_SEG_OK);
    assert_int_equal(v.ack_known, 1);
    /* An ACK of data never sent: dropped by the kernel, and here. */
    sp.ack = 5000 + (1u << 30);
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    sp.ack = 5000 + UTLS_TAP_ACK_SLACK + 1;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    /* Within the slack (ACKs of data the tap did not see acknowledged). */
    sp.ack = 5000 + 70000;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    /* Far too old (before SND.UNA - MAX.SND.WND for any window). */
    sp.ack = 5000 - (1u << 30) - 1;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    sp.ack = 4000; /* a little old: a segment sent before the last ACK */
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    /* A forged copy past the in-order point teaches nothing. */
    sp.ack = 5000 + 900000;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    assert_int_equal(v.ack_max, 5000);
    assert_int_equal(v.counts[UTLS_TAP_SEG_BAD_ACK], 3);
}

/* A kernel that says SND.NXT is the send base plus |fake_off|. */
static uint64_t fake_off;
static int fake_calls;

static int fake_snd_nxt_off(void *sock_ptr, uint64_t *out)
{
    (void)sock_ptr;
    fake_calls++;
    *out = fake_off;
    return 1;
}

static utls_tap_verdict check_q(utls_tap_validator *v, const seg_spec *sp, uint64_t offset,
                                uint64_t confirmed)
{
    utls_tap_kernel_query q = {NULL, NULL, fake_snd_nxt_off, NULL};
    tap_segment seg;
    size_t len = build(sp, &seg);

    return utls_tap_validate(v, pkt, len, 0, &seg, offset, confirmed, &q);
}

/* With the local ISN known the ACK bound is SND.NXT itself: not one byte of
 * slack, as in the kernel (an ACK of unsent data is dropped). */
static void test_tap_validate_ack_exact(void **state)
{
    utls_tap_validator v;
    seg_spec sp = {0, 1000, 5000, 0x10, 0, 0, 100, 0};

    (void)state;
    validator_init(&v, 1 << 20);
    /* We answered the SYN: ISN 4999, SND.UNA = 5000 + bytes acked. */
    utls_tap_validator_set_send_base(&v, 4999, 0);
    fake_off = 0;
    fake_calls = 0;
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_OK);
    sp.ack = 5001; /* one byte the kernel never sent */
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    sp.ack = 5000 + 70000; /* what the slack used to let through */
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    /* The kernel was asked once this drain, however many forgeries. */
    assert_int_equal(fake_calls, 1);
    /* We sent 100 bytes: after the next drain, ACKs up to 5100 pass. */
    fake_off = 100;
    utls_tap_validator_drain(&v);
    sp.ack = 5100;
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_OK);
    sp.ack = 5101;
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    assert_int_equal(fake_calls, 2);
    /* In order, the segment teaches the ACK; far too old is still refused. */
    sp.ack = 5100;
    assert_int_equal(check_q(&v, &sp, 0, 200), UTLS_TAP_SEG_OK);
    sp.ack = 5100 - (1u << 30) - 1;
    assert_int_equal(check_q(&v, &sp, 200, 200), UTLS_TAP_SEG_BAD_ACK);
    assert_int_equal(v.counts[UTLS_TAP_SEG_BAD_ACK], 4);

    /* We sent the SYN (its acknowledgement counts in tcpi_bytes_acked), and
     * the sequence wraps. */
    validator_init(&v, 1 << 20);
    utls_tap_validator_set_send_base(&v, 0xffffff00u, 1);
    fake_off = 0x201; /* the SYN and 0x200 bytes */
    sp.ack = 0x101;
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_OK);
    sp.ack = 0x102;
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_BAD_ACK);
    sp.ack = 0xffffff80u; /* acknowledged before the wrap: fine */
    assert_int_equal(check_q(&v, &sp, 200, 100), UTLS_TAP_SEG_OK);
}

/* loopback_pair: a connected TCP pair over 127.0.0.1 (client, server). */
static void loopback_pair(int *cfd, int *sfd)
{
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
    *cfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*cfd, (struct sockaddr *)&a, sizeof(a)), 0);
    *sfd = accept(l, NULL, NULL);
    assert_true(*sfd >= 0);
    close(l);
}

/* snd_off_settled: utls_tap_kernel_snd_nxt_off once everything sent is
 * acknowledged (loopback: within milliseconds). */
static uint64_t snd_off_settled(int fd)
{
    uint64_t off = 0;
    int i, outq = 1;

    for (i = 0; i < 200 && outq != 0; i++) {
        assert_int_equal(ioctl(fd, SIOCOUTQ, &outq), 0);
        if (outq != 0)
            usleep(5000);
    }
    assert_int_equal(utls_tap_kernel_snd_nxt_off(fd, &off), 1);
    return off;
}

/* What utls_tap_validator_set_send_base relies on, asked of this kernel:
 * tcpi_bytes_acked counts the SYN on the side that sent it and not on the
 * side that answered it; SND.NXT moves by exactly the bytes sent. A kernel
 * that counted otherwise would make the exact ACK check refuse genuine
 * segments (or let one forged ACK value through), and fails here. */
static void test_tap_kernel_snd_nxt(void **state)
{
    int c, s;
    char buf[300];

    (void)state;
    loopback_pair(&c, &s);
    assert_int_equal(snd_off_settled(c), 1); /* our SYN */
    assert_int_equal(snd_off_settled(s), 0);
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(write(c, buf, 100), 100);
    assert_int_equal(snd_off_settled(c), 101);
    assert_int_equal(write(s, buf, 250), 250);
    assert_int_equal(snd_off_settled(s), 250);
    assert_int_equal(read(s, buf, sizeof(buf)), 100);
    close(c);
    close(s);
}

static void test_tap_validate_paws(void **state)
{
    utls_tap_validator v;
    seg_spec sp = {1, 1000, 5000, 0x10, 1, 700000, 100, 0};

    (void)state;
    validator_init(&v, 1 << 20);
    /* Nothing known yet: any timestamp passes. */
    sp.tsval = 5;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    assert_int_equal(v.ts_known, 0);
    /* In order: TS.Recent becomes 700000. */
    sp.tsval = 700000;
    assert_int_equal(check(&v, &sp, 0, 0, 100), UTLS_TAP_SEG_OK);
    assert_int_equal(v.ts_recent, 700000);
    sp.tsval = 700000 - (1u << 20); /* PAWS-old */
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_PAWS);
    sp.tsval = 699999; /* within TCP_PAWS_WINDOW */
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    sp.tsval = 700500;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    /* Across the 2^32 wrap. */
    v.ts_recent = 0xfffffff0u;
    sp.tsval = 0x10;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
    sp.tsval = 0xffff0000u;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_PAWS);
    /* No timestamp option: not checked (Linux accepts such segments). */
    sp.ts = 0;
    assert_int_equal(check(&v, &sp, 0, 200, 100), UTLS_TAP_SEG_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tap_validate_checksum),
        cmocka_unit_test(test_tap_validate_flags_and_window),
        cmocka_unit_test(test_tap_validate_ack),
        cmocka_unit_test(test_tap_validate_ack_exact),
        cmocka_unit_test(test_tap_kernel_snd_nxt),
        cmocka_unit_test(test_tap_validate_paws),
    };
    return cmocka_run_group_tests_name("tap_validate", tests, NULL, NULL);
}
