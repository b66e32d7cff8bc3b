/*
 * evloop-epoll: a uTLS server on plain epoll(7) that reads records past a
 * TCP hole as soon as they are verified (docs/evloop.md, "DRIVING uTLS FROM
 * YOUR OWN EVENT LOOP").
 *
 *   evloop-epoll --listen ADDR:PORT --count N --size S [--ready FILE]
 *
 * The epoll set holds the TCP socket and, once the connection has a tap, the
 * descriptor UTLS_evloop_get_fd() names. The socket readable: read. The
 * capture descriptor readable: read if UTLS_evloop_ready() says a record can
 * be delivered. Setup and reading: evloop_example.h.
 */
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "evloop_example.h"

#define TAG_SOCKET 0
#define TAG_CAPTURE 1

int main(int argc, char **argv)
{
    evx_server s;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = TAG_SOCKET};
    int ep, capfd = -1;
    uint64_t last;

    example_name = "evloop-epoll";
    evx_accept(&s, argc, argv);
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &ev) != 0)
        die("epoll: %s", strerror(errno));
    last = now_ns();
    while (!s.done && now_ns() - last < 5000000000ull) {
        struct epoll_event evs[2];
        int n = epoll_wait(ep, evs, 2, 100), i, go = 0;

        for (i = 0; i < n; i++)
            go |= evs[i].data.u32 == TAG_SOCKET || UTLS_evloop_ready(s.ssl);
        if (!go)
            continue;
        last = now_ns();
        evx_read_all(&s);
        /* The tap comes with the first read after the handshake. */
        if (capfd < 0 && (capfd = UTLS_evloop_get_fd(s.ssl)) >= 0) {
            struct epoll_event cev = {.events = EPOLLIN, .data.u32 = TAG_CAPTURE};

            if (epoll_ctl(ep, EPOLL_CTL_ADD, capfd, &cev) != 0)
                die("epoll_ctl: %s", strerror(errno));
        }
    }
    if (capfd >= 0)
        (void)epoll_ctl(ep, EPOLL_CTL_DEL, capfd, NULL); /* before SSL_free closes it */
    close(ep);
    return evx_finish(&s);
}
