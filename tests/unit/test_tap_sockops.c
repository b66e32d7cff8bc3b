/* test_tap_sockops.c: the tap's record of ISNs from the kernel
 * (lib/bio/tap_sockops.c, included here for its internal state).
 *
 *  - The reader, on a slot array built here: a record is taken only when
 *    the slot's cookie is the socket's (before and after the copy) and the
 *    4-tuple is its own; a slot being written (cookie 0), reused by another
 *    socket, or holding another 4-tuple is a miss.
 *  - As root: the real program, loaded and attached to this process's
 *    cgroup, against a loopback connection made here: the ISNs it recorded
 *    for the accepted and the connecting socket are those TCP_REPAIR reads
 *    from the kernel (rcv_nxt and write_seq of a connection that has sent
 *    nothing), and each side knows which of the two it is; also for an IPv4
 *    connection a dual-stack IPv6 listener accepted. Skipped (and
 *    said so) without root.
 */
#define _GNU_SOURCE /* before any header: tap_sockops.c's secure_getenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bio/tap_sockops.c"

/* A connected IPv4 loopback pair: |*out_srv| accepted (by an IPv6
 * dual-stack listener with |dual|), |*out_cli| connecting. */
static void loopback_pair_ex(int *out_srv, int *out_cli, int dual)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    socklen_t al = sizeof(a6);
    int l = socket(dual ? AF_INET6 : AF_INET, SOCK_STREAM, 0), off = 0;

    assert_true(l >= 0);
    if (dual) {
        assert_int_equal(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)), 0);
        assert_int_equal(bind(l, (struct sockaddr *)&a6, sizeof(a6)), 0);
        assert_int_equal(getsockname(l, (struct sockaddr *)&a6, &al), 0);
        a.sin_port = a6.sin6_port;
    } else {
        al = sizeof(a);
        assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
    }
    assert_int_equal(listen(l, 1), 0);
    *out_cli = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*out_cli, (struct sockaddr *)&a, sizeof(a)), 0);
    *out_srv = accept(l, NULL, NULL);
    assert_true(*out_srv >= 0);
    close(l);
}

static void loopback_pair(int *out_srv, int *out_cli)
{
    loopback_pair_ex(out_srv, out_cli, 0);
}

/* key_of: the IPv4 4-tuple of |fd|, as the tap keys it (an IPv6 socket's
 * IPv4-mapped addresses as IPv4, as utls_tap_key_of_socket does). */
static void key_of(int fd, tap_key *k)
{
    struct sockaddr_storage l, p;
    socklen_t ll = sizeof(l), pl = sizeof(p);

    assert_int_equal(getsockname(fd, (struct sockaddr *)&l, &ll), 0);
    assert_int_equal(getpeername(fd, (struct sockaddr *)&p, &pl), 0);
    memset(k, 0, sizeof(*k));
    k->family = AF_INET;
    if (l.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)&l, *b = (const void *)&p;

        assert_true(IN6_IS_ADDR_V4MAPPED(&a->sin6_addr));
        memcpy(k->local, (const unsigned char *)&a->sin6_addr + 12, 4);
        memcpy(k->peer, (const unsigned char *)&b->sin6_addr + 12, 4);
        k->lport = ntohs(a->sin6_port);
        k->pport = ntohs(b->sin6_port);
    } else {
        const struct sockaddr_in *a = (const void *)&l, *b = (const void *)&p;

        memcpy(k->local, &a->sin_addr, 4);
        memcpy(k->peer, &b->sin_addr, 4);
        k->lport = ntohs(a->sin_port);
        k->pport = ntohs(b->sin_port);
    }
}

static uint64_t cookie_of(int fd)
{
    uint64_t c = 0;
    socklen_t len = sizeof(c);

    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len), 0);
    return c;
}

/* fill_slot writes what the program would for |fd| into |slots|. */
static sockops_slot *fill_slot(unsigned char *slots, int fd, uint32_t lisn, uint32_t pisn)
{
    tap_key k;
    uint64_t c = cookie_of(fd);
    sockops_slot *s =
        (sockops_slot *)(slots + (size_t)(c & (UTLS_TAP_SOCKOPS_SLOTS - 1)) * sizeof(*s));

    key_of(fd, &k);
    memset(s, 0, sizeof(*s));
    s->cookie = c;
    s->family = AF_INET;
    s->op = BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB;
    s->local_isn = lisn;
    s->peer_isn = pisn;
    s->remote_port = htonl(k.pport); /* the kernel's layout since 4.20 */
    s->local_port = k.lport;
    memcpy(&s->remote_ip4, k.peer, 4);
    memcpy(&s->local_ip4, k.local, 4);
    return s;
}

static void test_reader(void **state)
{
    unsigned char *fake = calloc(UTLS_TAP_SOCKOPS_SLOTS, sizeof(sockops_slot));
    int srv, cli, lconn = -1;
    uint32_t lisn = 0, pisn = 0;
    tap_key k;
    sockops_slot *s;
    int saved_active = so.active;
    unsigned char *saved_slots = so.slots;

    (void)state;
    assert_non_null(fake);
    loopback_pair(&srv, &cli);
    key_of(srv, &k);
    so.active = 1;
    so.slots = fake;

    /* no record */
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);
    /* its record */
    s = fill_slot(fake, srv, 1000, 2000);
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 1);
    assert_int_equal(lisn, 1000);
    assert_int_equal(pisn, 2000);
    assert_int_equal(lconn, 0);
    s->op = BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB;
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 1);
    assert_int_equal(lconn, 1);
    /* the raw 16-bit port of kernels before 4.20 */
    s->remote_port = htons(k.pport);
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 1);
    /* being written */
    s->cookie = 0;
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);
    /* the slot reused by a socket whose cookie has the same low bits */
    s->cookie = cookie_of(srv) + UTLS_TAP_SOCKOPS_SLOTS;
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);
    /* another 4-tuple under the right cookie: peer port, address, family */
    s = fill_slot(fake, srv, 1000, 2000);
    s->remote_port = htonl(k.pport ^ 1);
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);
    s = fill_slot(fake, srv, 1000, 2000);
    s->remote_ip4 ^= htonl(1);
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);
    /* an IPv6 socket's IPv4 connection (the kernel fills the IPv4 fields) */
    s = fill_slot(fake, srv, 1000, 2000);
    s->family = AF_INET6;
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 1);
    /* an IPv6 key never matches an IPv4 record */
    s = fill_slot(fake, srv, 1000, 2000);
    k.family = AF_INET6;
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);
    k.family = AF_INET;
    /* the other end's record is not this end's */
    fill_slot(fake, cli, 3000, 4000);
    s = fill_slot(fake, srv, 1000, 2000);
    assert_int_equal(utls_tap_sockops_isn(cli, &k, &lisn, &pisn, &lconn), 0);
    /* not active: nothing is read */
    so.active = 0;
    assert_int_equal(utls_tap_sockops_isn(srv, &k, &lisn, &pisn, &lconn), 0);

    so.active = saved_active;
    so.slots = saved_slots;
    close(srv);
    close(cli);
    free(fake);
}

/* repair_seq reads a queue's next sequence number with TCP_REPAIR (root). */
static uint32_t repair_seq(int fd, int queue)
{
    int on = 1, off = 0;
    uint32_t seq = 0;
    socklen_t len = sizeof(seq);

    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &on, sizeof(on)), 0);
    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &queue, sizeof(queue)), 0);
    assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, &len), 0);
    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &off, sizeof(off)), 0);
    return seq;
}

static void check_against_kernel(int fd, int connected)
{
    tap_key k;
    uint32_t lisn = 0, pisn = 0;
    int lconn = -1;

    key_of(fd, &k);
    assert_int_equal(utls_tap_sockops_isn(fd, &k, &lisn, &pisn, &lconn), 1);
    assert_int_equal(pisn + 1, repair_seq(fd, TCP_RECV_QUEUE));
    assert_int_equal(lisn + 1, repair_seq(fd, TCP_SEND_QUEUE));
    assert_int_equal(lconn, connected);
}

static void test_kernel_record(void **state)
{
    int srv, cli, srv2, cli2;

    (void)state;
    if (geteuid() != 0) {
        print_message("SKIP: the sock_ops program needs root (CAP_BPF, CAP_NET_ADMIN)\n");
        skip();
    }
    if (!utls_tap_sockops_start())
        fail_msg("the sock_ops program did not start: %s", utls_tap_sockops_why());
    loopback_pair(&srv, &cli);
    check_against_kernel(srv, 0);
    check_against_kernel(cli, 1);
    /* a second connection: its own record, the first one's still there */
    loopback_pair(&srv2, &cli2);
    check_against_kernel(srv2, 0);
    check_against_kernel(cli2, 1);
    check_against_kernel(srv, 0);
    close(srv);
    close(cli);
    close(srv2);
    close(cli2);
    /* an IPv4 connection accepted by a dual-stack IPv6 listener */
    loopback_pair_ex(&srv, &cli, 1);
    check_against_kernel(srv, 0);
    check_against_kernel(cli, 1);
    close(srv);
    close(cli);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader),
        cmocka_unit_test(test_kernel_record),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
