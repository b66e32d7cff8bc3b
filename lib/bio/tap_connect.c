/*
 * Setting up taps: the listeners and connecting sockets whose handshakes
 * the process-wide tap (tap_hub.c) watches, so that it reads the peer's ISN
 * from what the local kernel sends (the SYN-ACK of a listener, the ACK that
 * completes a connecting socket's handshake). The tap BIO (tap.c) then
 * attaches to the connection by its 4-tuple.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/tap_local.h"

struct utls_tap_listener_st {
    uint16_t port;
};

int utls_tap_key_of_socket(int fd, tap_key *k)
{
    struct sockaddr_storage l, p;
    socklen_t ll = sizeof(l), pl = sizeof(p);

    memset(k, 0, sizeof(*k));
    if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0
        || getpeername(fd, (struct sockaddr *)&p, &pl) != 0 || l.ss_family != p.ss_family)
        return 0;
    k->family = l.ss_family;
    if (k->family == AF_INET) {
        const struct sockaddr_in *a = (const void *)&l, *b = (const void *)&p;

        memcpy(k->local, &a->sin_addr, 4);
        memcpy(k->peer, &b->sin_addr, 4);
        k->lport = ntohs(a->sin_port);
        k->pport = ntohs(b->sin_port);
    } else if (k->family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)&l, *b = (const void *)&p;

        k->lport = ntohs(a->sin6_port);
        k->pport = ntohs(b->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && IN6_IS_ADDR_V4MAPPED(&b->sin6_addr)) {
            /* an IPv4 connection of a dual-stack socket: its packets are
             * IPv4, and so is its key */
            k->family = AF_INET;
            memcpy(k->local, (const unsigned char *)&a->sin6_addr + 12, 4);
            memcpy(k->peer, (const unsigned char *)&b->sin6_addr + 12, 4);
        } else {
            memcpy(k->local, &a->sin6_addr, 16);
            memcpy(k->peer, &b->sin6_addr, 16);
        }
    } else {
        return 0;
    }
    return 1;
}

/* local_port returns the port |fd| is bound to (host order), or 0. */
static uint16_t local_port(int fd)
{
    struct sockaddr_storage a;
    socklen_t al = sizeof(a);

    if (getsockname(fd, (struct sockaddr *)&a, &al) != 0)
        return 0;
    if (a.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&a)->sin_port);
    if (a.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return 0;
}

/* --- Listeners and connecting sockets -------------------------------------- */

UTLS_TAP_LISTENER *UTLS_tap_listen(int listen_fd)
{
    UTLS_TAP_LISTENER *l;
    uint16_t port = local_port(listen_fd);

    if (port == 0) {
        utls_raise(UTLS_R_TAP_SYSCALL, "fd %d is not a bound TCP/IP socket", listen_fd);
        return NULL;
    }
    if (!utls_tap_hub_open())
        return NULL;
    if ((l = OPENSSL_zalloc(sizeof(*l))) == NULL)
        return NULL;
    /* Our kernel's SYN-ACKs from the port, and what arrives to it. */
    if (!utls_tap_hub_listen(port, 1)) {
        OPENSSL_free(l);
        return NULL;
    }
    l->port = port;
    return l;
}

void UTLS_tap_listener_free(UTLS_TAP_LISTENER *l)
{
    if (l == NULL)
        return;
    (void)utls_tap_hub_listen(l->port, 0);
    OPENSSL_free(l);
}

/*
 * utls_tap_start_syn_watch opens the process-wide tap, if it is not open,
 * and has it watch the handshakes of every port in this network namespace
 * (IPv4 and IPv6), so that connections set up afterwards by a program that
 * knows nothing of uTLS can get a tap through SSL_set_fd. Returns 1 if it
 * runs.
 */
int utls_tap_start_syn_watch(void)
{
    return utls_tap_hub_open() && utls_tap_hub_set_watch();
}

int UTLS_tap_connect(int fd, const void *addr, unsigned int addrlen)
{
    struct sockaddr_storage l;
    socklen_t ll = sizeof(l);
    const struct sockaddr *sa = addr;
    uint16_t port;
    int tapped, r;

    if (getsockname(fd, (struct sockaddr *)&l, &ll) != 0)
        return 0;
    if (l.ss_family == AF_INET && ((struct sockaddr_in *)&l)->sin_port == 0) {
        struct sockaddr_in any = {.sin_family = AF_INET};

        if (bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0)
            return 0;
    } else if (l.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&l)->sin6_port == 0) {
        struct sockaddr_in6 any = {.sin6_family = AF_INET6};

        if (bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0)
            return 0;
    }
    port = local_port(fd);
    /*
     * Every segment our kernel sends from the port during the handshake:
     * the ACK that completes it carries the peer's ISN + 1. Without the tap
     * (no CAP_NET_RAW) the connection is still made and runs in order: that
     * is a success, so the tap's error does not stay on the queue
     * (UTLS_BIO_new_tap reports it when the tap is asked for).
     */
    ERR_set_mark();
    tapped = port != 0 && utls_tap_hub_open() && utls_tap_hub_handshake(port, 1);
    ERR_pop_to_mark();
    r = connect(fd, sa, addrlen);
    if (r != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof(err);

        while ((r = poll(&p, 1, -1)) < 0 && errno == EINTR)
            continue;
        if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            if (err != 0)
                errno = err;
            r = -1;
        } else {
            r = 0;
        }
    }
    if (tapped) {
        tap_key conn;
        int saved = errno;

        if (r == 0 && utls_tap_key_of_socket(fd, &conn))
            (void)utls_tap_hub_wait_isn(&conn, UTLS_TAP_ISN_WAIT_MS);
        ERR_set_mark();
        (void)utls_tap_hub_handshake(port, 0);
        ERR_pop_to_mark();
        errno = saved;
    }
    return r == 0;
}
