/*
 * uCOBS on real sockets (include/openssl/utls.h, docs/ucobs.md): the sender
 * writes one frame per datagram; the receiver feeds the core deframer
 * (core/include/utls/ucobs.h) from the tap BIO when there is one and from
 * plain socket reads otherwise.
 *
 * The tap is reused through its BIO, exactly as the SSL uses it: BIO_read()
 * on the tap BIO returns the socket's in-order bytes (and keeps the tap's
 * in-order point up to date), and UTLS_BIO_CTRL_NEXT_FRAGMENT hands out the
 * captured bytes past a hole. In-order reads go on whatever the tap holds:
 * the kernel's stream is the authority, and a datagram the tap missed or that
 * a limit dropped is still delivered in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>

#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "utls/ucobs.h"

/*
 * Bytes read from the socket per call: one 64 KiB GRO packet. It also bounds
 * what one in-order feed adds to the receiver's queue.
 */
#define UTLS_UCOBS_READ_CHUNK 65536
/* Frames up to this size are built on the stack by UTLS_ucobs_send. */
#define UTLS_UCOBS_STACK_FRAME 2048

struct utls_ucobs_st {
    int fd;
    BIO *bio;     /* the tap BIO (its next is the socket BIO), or a socket BIO */
    int tapped;
    int eof;
    int epfd;     /* UTLS_ucobs_get_poll_fd with the tap; -1 until asked */
    uint64_t read_off; /* stream offset of the next byte from the socket */
    utls_ucobs_rx *rx;
    unsigned char *buf;
    UTLS_UCOBS_STATS stats;
};

/* send_all writes |len| bytes of |p| to |fd|; see UTLS_ucobs_send. */
static int send_all(int fd, const unsigned char *p, size_t len)
{
    size_t off = 0;
    int is_socket = 1;

    while (off < len) {
        ssize_t n = is_socket ? send(fd, p + off, len - off, MSG_NOSIGNAL)
                              : write(fd, p + off, len - off);

        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == ENOTSOCK && is_socket) {
            is_socket = 0;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};

            if (off == 0)
                return 0; /* nothing sent: the caller retries later */
            /* A cut frame would corrupt the stream: finish it. */
            if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                return 0;
            continue;
        }
        if (n == 0)
            errno = EPIPE;
        return 0;
    }
    return 1;
}

int UTLS_ucobs_send(int fd, const void *dgram, size_t len)
{
    unsigned char stack_frame[UTLS_UCOBS_STACK_FRAME], *frame = stack_frame;
    size_t bound, frame_len = 0;
    int ok, saved;

    if (len > UTLS_UCOBS_MAX_DATAGRAM) {
        utls_raise(UTLS_R_UCOBS_TOO_LARGE, "%zu bytes", len);
        errno = EMSGSIZE;
        return 0;
    }
    if (dgram == NULL && len != 0) {
        ERR_raise(ERR_LIB_SSL, ERR_R_PASSED_NULL_PARAMETER);
        errno = EINVAL;
        return 0;
    }
    bound = utls_ucobs_frame_bound(len);
    if (bound > sizeof(stack_frame) && (frame = OPENSSL_malloc(bound)) == NULL) {
        ERR_raise(ERR_LIB_SSL, ERR_R_MALLOC_FAILURE);
        errno = ENOMEM;
        return 0;
    }
    ok = utls_ucobs_frame(frame, bound, &frame_len, dgram, len) && send_all(fd, frame, frame_len);
    saved = errno;
    if (!ok && saved != EAGAIN && saved != EWOULDBLOCK)
        utls_raise(UTLS_R_UCOBS_SYSCALL, "send: %s", strerror(saved));
    if (frame != stack_frame)
        OPENSSL_free(frame);
    errno = saved;
    return ok;
}

UTLS_UCOBS *UTLS_ucobs_new(int fd, unsigned int flags)
{
    UTLS_UCOBS *u;

    if ((flags & UTLS_UCOBS_NO_TAP) != 0 && (flags & UTLS_UCOBS_REQUIRE_TAP) != 0) {
        ERR_raise(ERR_LIB_SSL, ERR_R_PASSED_INVALID_ARGUMENT);
        return NULL;
    }
    if ((u = OPENSSL_zalloc(sizeof(*u))) == NULL)
        return NULL;
    u->fd = fd;
    u->epfd = -1;
    if ((flags & UTLS_UCOBS_NO_TAP) == 0) {
        ERR_set_mark();
        u->bio = UTLS_BIO_new_tap(fd, BIO_NOCLOSE);
        if (u->bio != NULL) {
            ERR_clear_last_mark();
            u->tapped = 1;
        } else if ((flags & UTLS_UCOBS_REQUIRE_TAP) != 0) {
            ERR_clear_last_mark(); /* keep the tap's reason */
            goto err;
        } else {
            ERR_pop_to_mark(); /* no tap: in order, as documented */
        }
    }
    if (u->bio == NULL && (u->bio = BIO_new_socket(fd, BIO_NOCLOSE)) == NULL)
        goto err;
    u->rx = utls_ucobs_rx_new(NULL, 0);
    u->buf = OPENSSL_malloc(UTLS_UCOBS_READ_CHUNK);
    if (u->rx == NULL || u->buf == NULL)
        goto err;
    u->stats.tapped = u->tapped;
    return u;

err:
    UTLS_ucobs_free(u);
    return NULL;
}

void UTLS_ucobs_free(UTLS_UCOBS *u)
{
    if (u == NULL)
        return;
    BIO_free_all(u->bio);
    utls_ucobs_rx_free(u->rx);
    OPENSSL_free(u->buf);
    if (u->epfd >= 0)
        close(u->epfd);
    OPENSSL_free(u);
}

/* take_fragments feeds every fragment the tap has captured past a hole.
 * Returns 1, or 0 if the receiver ran out of memory. */
static int take_fragments(UTLS_UCOBS *u)
{
    utls_bio_fragment f;

    if (!u->tapped)
        return 1;
    while (BIO_ctrl(u->bio, UTLS_BIO_CTRL_NEXT_FRAGMENT, 0, &f) == 1) {
        u->stats.fragment_bytes += f.len;
        if (!utls_ucobs_rx_feed(u->rx, f.offset, f.data, f.len, f.arrival_ns))
            return 0;
    }
    return 1;
}

UTLS_UCOBS_RESULT UTLS_ucobs_recv(UTLS_UCOBS *u, void *buf, size_t len, size_t *out_len,
                                  UTLS_UCOBS_INFO *out_info)
{
    utls_ucobs_datagram dg;
    int r;

    if (u == NULL || out_len == NULL || (buf == NULL && len != 0)) {
        ERR_raise(ERR_LIB_SSL, ERR_R_PASSED_NULL_PARAMETER);
        errno = EINVAL;
        return UTLS_UCOBS_ERROR;
    }
    *out_len = 0;
    for (;;) {
        if (utls_ucobs_rx_peek(u->rx, &dg)) {
            if (dg.len > len) {
                *out_len = dg.len;
                utls_raise(UTLS_R_UCOBS_BUFFER_TOO_SMALL, "need %zu bytes, have %zu", dg.len,
                           len);
                return UTLS_UCOBS_BUFFER_TOO_SMALL;
            }
            if (dg.len != 0)
                memcpy(buf, dg.data, dg.len);
            *out_len = dg.len;
            if (out_info != NULL) {
                out_info->offset = dg.offset;
                out_info->len = dg.len;
                out_info->out_of_order = dg.out_of_order;
                out_info->arrival_ns = dg.arrival_ns;
            }
            utls_ucobs_rx_pop(u->rx);
            return UTLS_UCOBS_OK;
        }
        if (!take_fragments(u))
            goto nomem;
        if (utls_ucobs_rx_num_ready(u->rx) != 0)
            continue;
        if (u->eof)
            return UTLS_UCOBS_EOF;
        /* Through the tap BIO on a blocking socket this waits for in-order
         * bytes or captured segments, whichever comes first. */
        r = BIO_read(u->bio, u->buf, UTLS_UCOBS_READ_CHUNK);
        if (r > 0) {
            u->stats.bytes_read += (uint64_t)r;
            if (!utls_ucobs_rx_feed(u->rx, u->read_off, u->buf, (size_t)r, utls_now_ns()))
                goto nomem;
            u->read_off += (uint64_t)r;
            continue;
        }
        if (r == 0) {
            u->eof = 1; /* what the receiver holds is done; frames cut by
                         * the close are never complete */
            continue;
        }
        if (BIO_should_retry(u->bio)) {
            if (u->tapped && BIO_ctrl(u->bio, UTLS_BIO_CTRL_TAKE_WAKEUP, 0, NULL) == 1)
                continue; /* segments arrived past a hole */
            if ((fcntl(u->fd, F_GETFL) & O_NONBLOCK) == 0)
                continue; /* a blocking socket interrupted by a signal */
            return UTLS_UCOBS_WANT_READ;
        }
        utls_raise(UTLS_R_UCOBS_SYSCALL, "read: %s", strerror(errno));
        return UTLS_UCOBS_ERROR;
    }

nomem:
    ERR_raise(ERR_LIB_SSL, ERR_R_MALLOC_FAILURE);
    errno = ENOMEM;
    return UTLS_UCOBS_ERROR;
}

int UTLS_ucobs_get_poll_fd(UTLS_UCOBS *u)
{
    struct epoll_event ev;
    int cap;

    if (u == NULL)
        return -1;
    if (!u->tapped)
        return u->fd;
    if (u->epfd >= 0)
        return u->epfd;
    cap = (int)BIO_ctrl(u->bio, UTLS_BIO_CTRL_GET_CAPTURE_FD, 0, NULL);
    if (cap < 0 || (u->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        utls_raise(UTLS_R_UCOBS_SYSCALL, "epoll: %s", strerror(errno));
        return -1;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = u->fd;
    if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->fd, &ev) != 0)
        goto err;
    ev.events = EPOLLIN;
    ev.data.fd = cap;
    if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, cap, &ev) != 0)
        goto err;
    return u->epfd;

err:
    utls_raise(UTLS_R_UCOBS_SYSCALL, "epoll_ctl: %s", strerror(errno));
    close(u->epfd);
    u->epfd = -1;
    return -1;
}

int UTLS_ucobs_get_stats(const UTLS_UCOBS *u, UTLS_UCOBS_STATS *out_stats)
{
    utls_ucobs_stats st;

    if (u == NULL || out_stats == NULL)
        return 0;
    utls_ucobs_rx_get_stats(u->rx, &st);
    *out_stats = u->stats;
    out_stats->datagrams_in_order = st.datagrams_in_order;
    out_stats->datagrams_out_of_order = st.datagrams_out_of_order;
    out_stats->framing_errors = st.framing_errors;
    out_stats->junk_bytes = st.junk_bytes;
    out_stats->held_back = st.held_back;
    if (u->tapped)
        (void)UTLS_BIO_tap_get_stats(u->bio, &out_stats->tap);
    return 1;
}
