/*
 * evloop-libevent: a uTLS server on libevent that reads records past a TCP
 * hole as soon as they are verified (docs/evloop.md, "DRIVING uTLS FROM YOUR
 * OWN EVENT LOOP").
 *
 *   evloop-libevent --listen ADDR:PORT --count N --size S [--ready FILE]
 *
 * Two persistent read events: the TCP socket, and, once the connection has a
 * tap, the descriptor UTLS_evloop_get_fd() names, whose callback reads only
 * when UTLS_evloop_ready() says a record can be delivered. Setup and reading:
 * evloop_example.h.
 */
#include <stdio.h>
#include <unistd.h>

#include <event2/event.h>

#include "evloop_example.h"

static evx_server s;
static struct event_base *base;
static struct event *capture_ev;
static uint64_t last;

static void after_read(void);

static void on_capture(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    if (UTLS_evloop_ready(s.ssl)) {
        evx_read_all(&s);
        after_read();
    }
}

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    evx_read_all(&s);
    after_read();
}

static void after_read(void)
{
    int capfd;

    last = now_ns();
    /* The tap comes with the first read after the handshake. */
    if (capture_ev == NULL && (capfd = UTLS_evloop_get_fd(s.ssl)) >= 0) {
        capture_ev = event_new(base, capfd, EV_READ | EV_PERSIST, on_capture, NULL);
        if (capture_ev == NULL || event_add(capture_ev, NULL) != 0)
            die("event_add");
    }
    if (s.done)
        event_base_loopbreak(base);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    if (now_ns() - last > 5000000000ull)
        event_base_loopbreak(base); /* idle: the peer is gone */
}

int main(int argc, char **argv)
{
    struct event *sock_ev, *tick;
    struct timeval second = {1, 0};

    example_name = "evloop-libevent";
    evx_accept(&s, argc, argv);
    if ((base = event_base_new()) == NULL)
        die("event_base_new");
    sock_ev = event_new(base, s.fd, EV_READ | EV_PERSIST, on_socket, NULL);
    tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    if (sock_ev == NULL || tick == NULL || event_add(sock_ev, NULL) != 0
        || event_add(tick, &second) != 0)
        die("event_new");
    last = now_ns();
    event_base_dispatch(base);
    event_free(sock_ev);
    event_free(tick);
    if (capture_ev != NULL)
        event_free(capture_ev); /* before SSL_free closes its descriptor */
    event_base_free(base);
    return evx_finish(&s);
}
