/* test_ucobs_api.c: the fork's uCOBS API (include/openssl/utls.h,
 * docs/ucobs.md) on real loopback TCP sockets: framing on the wire, every
 * result of UTLS_ucobs_recv, the poll descriptor, errors that lose nothing,
 * and the receiver on the tap. One ctest per group (argv[1]). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/utls.h>

#include "test_case.h"

typedef struct {
    int lfd, cfd, sfd; /* listener, client (sender), accepted (receiver) */
    UTLS_TAP_LISTENER *tl;
} conn;

static void conn_open(conn *c, int tap)
{
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int one = 1;

    memset(c, 0, sizeof(*c));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->lfd >= 0);
    assert_int_equal(bind(c->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(c->lfd, 4), 0);
    assert_int_equal(getsockname(c->lfd, (struct sockaddr *)&a, &al), 0);
    if (tap) {
        c->tl = UTLS_tap_listen(c->lfd);
        assert_non_null(c->tl);
    }
    c->cfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->cfd >= 0);
    setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    assert_int_equal(connect(c->cfd, (struct sockaddr *)&a, sizeof(a)), 0);
    c->sfd = accept(c->lfd, NULL, NULL);
    assert_true(c->sfd >= 0);
}

static void conn_close(conn *c)
{
    if (c->cfd >= 0)
        close(c->cfd);
    close(c->sfd);
    close(c->lfd);
    UTLS_tap_listener_free(c->tl);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 37 + seed) % 7 == 0 ? 0 : (i * 131 + seed));
}

static void write_all(int fd, const void *p, size_t n)
{
    assert_int_equal(write(fd, p, n), (ssize_t)n);
}

/* frame_len: the frame size of |p| by the COBS rules (docs/ucobs.md), computed
 * independently of the library: one code byte per block, a block ending at a
 * zero or after 254 data bytes, no empty block after a final 255-block. */
static size_t frame_len(const unsigned char *p, size_t n)
{
    size_t enc = 0, run = 0;
    int last_full = 0;

    for (size_t i = 0; i < n; i++) {
        if (p[i] == 0) {
            enc += run + 1;
            run = 0;
            last_full = 0;
        } else if (++run == 254) {
            enc += 255;
            run = 0;
            last_full = 1;
        } else {
            last_full = 0;
        }
    }
    if (run > 0 || !last_full)
        enc += run + 1;
    return enc + 2;
}

/* In order without the tap: sizes 0..65535, offsets, exact bytes. */
static void test_inorder_sizes(void **state)
{
    static const size_t sizes[] = {0, 1, 253, 254, 255, 1440, 4096, 65535};
    static unsigned char out[65535], in[65535];
    conn c;
    UTLS_UCOBS *u;
    UTLS_UCOBS_STATS st;
    uint64_t off = 0;

    (void)state;
    conn_open(&c, 0);
    u = UTLS_ucobs_new(c.sfd, UTLS_UCOBS_NO_TAP);
    assert_non_null(u);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        fill(out, sizes[k], (unsigned)k);
        assert_int_equal(UTLS_ucobs_send(c.cfd, out, sizes[k]), 1);
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        UTLS_UCOBS_INFO info;
        size_t n = 12345;

        fill(out, sizes[k], (unsigned)k);
        assert_int_equal(UTLS_ucobs_recv(u, in, sizeof(in), &n, &info), UTLS_UCOBS_OK);
        assert_int_equal(n, sizes[k]);
        assert_int_equal(info.len, sizes[k]);
        assert_int_equal(info.offset, off);
        assert_int_equal(info.out_of_order, 0);
        assert_true(info.arrival_ns > 0);
        if (n)
            assert_memory_equal(in, out, n);
        off += frame_len(out, sizes[k]);
    }
    /* and the stream held exactly the frames */
    assert_int_equal(UTLS_ucobs_get_stats(u, &st), 1);
    assert_int_equal(st.bytes_read, off);
    assert_int_equal(st.datagrams_in_order, 8);
    assert_int_equal(st.tapped, 0);
    assert_int_equal(UTLS_ucobs_get_poll_fd(u), c.sfd);
    UTLS_ucobs_free(u);
    conn_close(&c);
}

/* The frame on the wire is exactly 00 COBS(D) 00 (read with a plain recv). */
static void test_wire_format(void **state)
{
    conn c;
    unsigned char buf[64];
    static const unsigned char d[] = {0x11, 0x00, 0x22};
    static const unsigned char want[] = {0x00, 0x01, 0x00, /* empty */
                                         0x00, 0x02, 0x11, 0x02, 0x22, 0x00};

    (void)state;
    conn_open(&c, 0);
    assert_int_equal(UTLS_ucobs_send(c.cfd, NULL, 0), 1);
    assert_int_equal(UTLS_ucobs_send(c.cfd, d, sizeof(d)), 1);
    size_t got = 0;
    while (got < sizeof(want)) {
        ssize_t n = read(c.sfd, buf + got, sizeof(buf) - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_int_equal(got, sizeof(want));
    assert_memory_equal(buf, want, sizeof(want));
    conn_close(&c);
}

/* Too small a buffer loses nothing; too large a datagram is refused and
 * sends nothing; NULL data is refused. */
static void test_errors_lose_nothing(void **state)
{
    static unsigned char big[65536], in[200];
    conn c;
    UTLS_UCOBS *u;
    UTLS_UCOBS_INFO info;
    size_t n = 0;

    (void)state;
    conn_open(&c, 0);
    u = UTLS_ucobs_new(c.sfd, UTLS_UCOBS_NO_TAP);
    assert_non_null(u);
    ERR_clear_error();
    errno = 0;
    assert_int_equal(UTLS_ucobs_send(c.cfd, big, sizeof(big)), 0);
    assert_int_equal(errno, EMSGSIZE);
    assert_int_equal(ERR_GET_REASON(ERR_peek_error()), UTLS_R_UCOBS_TOO_LARGE);
    ERR_clear_error();
    assert_int_equal(UTLS_ucobs_send(c.cfd, NULL, 5), 0);
    assert_int_equal(errno, EINVAL);
    ERR_clear_error();
    fill(big, 100, 3);
    assert_int_equal(UTLS_ucobs_send(c.cfd, big, 100), 1);
    assert_int_equal(UTLS_ucobs_recv(u, in, 99, &n, &info), UTLS_UCOBS_BUFFER_TOO_SMALL);
    assert_int_equal(n, 100);
    assert_int_equal(ERR_GET_LIB(ERR_peek_error()), UTLS_get_lib());
    assert_int_equal(ERR_GET_REASON(ERR_peek_error()), UTLS_R_UCOBS_BUFFER_TOO_SMALL);
    ERR_clear_error();
    assert_int_equal(UTLS_ucobs_recv(u, in, 100, &n, &info), UTLS_UCOBS_OK);
    assert_int_equal(n, 100);
    assert_int_equal(info.offset, 0); /* the refused datagram sent nothing */
    assert_memory_equal(in, big, 100);
    assert_null(UTLS_ucobs_new(c.sfd, UTLS_UCOBS_NO_TAP | UTLS_UCOBS_REQUIRE_TAP));
    ERR_clear_error();
    assert_int_equal(UTLS_ucobs_get_stats(NULL, NULL), 0);
    assert_int_equal(UTLS_ucobs_recv(NULL, in, sizeof(in), &n, NULL), UTLS_UCOBS_ERROR);
    assert_int_equal(UTLS_ucobs_recv(u, NULL, 5, &n, NULL), UTLS_UCOBS_ERROR);
    ERR_clear_error();
    UTLS_ucobs_free(u);
    UTLS_ucobs_free(NULL);
    conn_close(&c);
}

/* Malformed frames, junk and a frame cut by the close: counted, skipped;
 * the good datagrams arrive, then EOF. */
static void test_malformed_and_eof(void **state)
{
    static const unsigned char junk[] = {0x17, 0x03, 0x00};           /* before any marker */
    static const unsigned char bad[] = {0x00, 0x05, 0x41, 0x00};      /* block past the end */
    static const unsigned char cut[] = {0x00, 0x05, 0x41, 0x42};      /* no closing marker */
    unsigned char in[64];
    conn c;
    UTLS_UCOBS *u;
    UTLS_UCOBS_STATS st;
    size_t n;

    (void)state;
    conn_open(&c, 0);
    u = UTLS_ucobs_new(c.sfd, UTLS_UCOBS_NO_TAP);
    assert_non_null(u);
    write_all(c.cfd, junk, sizeof(junk));
    write_all(c.cfd, bad, sizeof(bad));
    assert_int_equal(UTLS_ucobs_send(c.cfd, "ok", 2), 1);
    write_all(c.cfd, cut, sizeof(cut));
    close(c.cfd);
    c.cfd = -1;
    assert_int_equal(UTLS_ucobs_recv(u, in, sizeof(in), &n, NULL), UTLS_UCOBS_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(in, "ok", 2);
    assert_int_equal(UTLS_ucobs_recv(u, in, sizeof(in), &n, NULL), UTLS_UCOBS_EOF);
    assert_int_equal(UTLS_ucobs_recv(u, in, sizeof(in), &n, NULL), UTLS_UCOBS_EOF);
    assert_int_equal(UTLS_ucobs_get_stats(u, &st), 1);
    assert_int_equal(st.framing_errors, 1);
    assert_int_equal(st.junk_bytes, 2);
    assert_int_equal(st.datagrams_in_order, 1);
    assert_int_equal(st.bytes_read, sizeof(junk) + sizeof(bad) + 5 + sizeof(cut));
    UTLS_ucobs_free(u);
    conn_close(&c);
}

/* Non-blocking: WANT_READ, then the poll descriptor wakes up. */
static void nonblocking(void **state)
{
    const int tap = test_case_param(state);
    unsigned char in[2000], out[1440];
    conn c;
    UTLS_UCOBS *u;
    size_t n;
    int pfd;

    conn_open(&c, tap);
    u = UTLS_ucobs_new(c.sfd, tap ? UTLS_UCOBS_REQUIRE_TAP : UTLS_UCOBS_NO_TAP);
    assert_non_null(u);
    assert_int_equal(fcntl(c.sfd, F_SETFL, fcntl(c.sfd, F_GETFL) | O_NONBLOCK), 0);
    pfd = UTLS_ucobs_get_poll_fd(u);
    assert_true(pfd >= 0);
    assert_int_equal(pfd == c.sfd, !tap);
    assert_int_equal(UTLS_ucobs_get_poll_fd(u), pfd); /* the same one again */
    assert_int_equal(UTLS_ucobs_recv(u, in, sizeof(in), &n, NULL), UTLS_UCOBS_WANT_READ);
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 50), 0);
    for (unsigned k = 0; k < 200; k++) {
        UTLS_UCOBS_INFO info;
        UTLS_UCOBS_RESULT r;

        fill(out, sizeof(out), k);
        assert_int_equal(UTLS_ucobs_send(c.cfd, out, sizeof(out)), 1);
        while ((r = UTLS_ucobs_recv(u, in, sizeof(in), &n, &info)) == UTLS_UCOBS_WANT_READ) {
            p.revents = 0;
            assert_int_equal(poll(&p, 1, 2000), 1);
        }
        assert_int_equal(r, UTLS_UCOBS_OK);
        assert_int_equal(n, sizeof(out));
        assert_memory_equal(in, out, n);
        assert_int_equal(info.out_of_order, 0); /* loopback loses nothing */
    }
    UTLS_UCOBS_STATS st;
    assert_int_equal(UTLS_ucobs_get_stats(u, &st), 1);
    assert_int_equal(st.tapped, tap);
    assert_int_equal(st.datagrams_in_order, 200);
    if (tap)
        assert_true(st.tap.packets > 0);
    UTLS_ucobs_free(u);
    conn_close(&c);
}

/* The tap: required and available after UTLS_tap_listen; without the SYN,
 * REQUIRE_TAP fails with UTLS_R_TAP_NO_ISN and the default reads in order. */
static void test_tap_selection(void **state)
{
    conn c;
    UTLS_UCOBS *u;
    UTLS_UCOBS_STATS st;

    (void)state;
    conn_open(&c, 0);
    ERR_clear_error();
    assert_null(UTLS_ucobs_new(c.sfd, UTLS_UCOBS_REQUIRE_TAP));
    assert_int_equal(ERR_GET_REASON(ERR_peek_error()), UTLS_R_TAP_NO_ISN);
    ERR_clear_error();
    u = UTLS_ucobs_new(c.sfd, 0);
    assert_non_null(u);
    assert_int_equal(ERR_peek_error(), 0); /* the tap's failure is not left behind */
    assert_int_equal(UTLS_ucobs_get_stats(u, &st), 1);
    assert_int_equal(st.tapped, 0);
    UTLS_ucobs_free(u);
    conn_close(&c);

    conn_open(&c, 1);
    u = UTLS_ucobs_new(c.sfd, 0);
    assert_non_null(u);
    assert_int_equal(UTLS_ucobs_get_stats(u, &st), 1);
    assert_int_equal(st.tapped, 1);
    UTLS_ucobs_free(u);
    conn_close(&c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest api[] = {
        cmocka_unit_test(test_inorder_sizes),     cmocka_unit_test(test_wire_format),
        cmocka_unit_test(test_errors_lose_nothing), cmocka_unit_test(test_malformed_and_eof),
        TEST_CASE(test_nonblocking, nonblocking, &test_case_no),
    };
    const struct CMUnitTest tap[] = {
        cmocka_unit_test(test_tap_selection),
        TEST_CASE(test_tap_nonblocking, nonblocking, &test_case_yes),
    };

    if (argc > 1 && strcmp(argv[1], "tap") == 0) {
        if (geteuid() != 0) {
            fprintf(stderr, "SKIP: the tap needs CAP_NET_RAW (root)\n");
            return 77;
        }
        return cmocka_run_group_tests_name("ucobs_api_tap", tap, NULL, NULL);
    }
    return cmocka_run_group_tests_name("ucobs_api", api, NULL, NULL);
}
