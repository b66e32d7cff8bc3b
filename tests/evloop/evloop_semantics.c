/*
 * evloop_semantics: the companion library's promises (docs/evloop.md), checked
 * in an ordinary TLS server linked with the system libssl (no uTLS header)
 * that runs with the fork and libutls-evloop.so preloaded and
 * UTLS_MODE=unordered,tap,port=4433, over the lossy testbed (run.sh).
 *
 *   evloop_semantics CASE --listen ADDR:PORT --count N --size S --ready FILE
 *
 * CASE is the wait the server uses before SSL_read: epoll_lt, epoll_et,
 * epoll_oneshot_threads (two threads on one EPOLLONESHOT epoll set), poll,
 * ppoll, select, pselect, or dup (epoll on a dup() of the socket: not the
 * tapped descriptor, so it must behave exactly as before). For every case:
 *
 *   - every message arrives exactly once and intact;
 *   - every failed non-blocking SSL_read fails with SSL_ERROR_WANT_READ (or
 *     the peer's close_notify);
 *   - except for dup, some records were delivered while the kernel had
 *     nothing readable on the socket (FIONREAD 0): woken for a record past a
 *     hole; spurious wake-ups (UTLS_evloop_get_wakeups, found with dlsym) are
 *     reported and must not exceed the wake-ups;
 *   - afterwards: a fork()ed child waits on the same epoll set and on a pipe
 *     and exits normally; the socket is closed and its number reused by a
 *     pipe, which is not reported readable; the epoll set that outlived the
 *     connection reports nothing.
 *
 * Prints one line of counts; exit 0 when all holds, 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "example_util.h"

#define MAGIC 0x6d727473u
#define HDR_LEN 24

static const char *mode_;
static long count_, size_;
static SSL *ssl_;
static int fd_, ep_ = -1, wait_fd_;
static unsigned char *seen_;
static pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
static long ok_, dup_, bad_, early_, other_errors_;
static int done_;

static int fail(const char *what)
{
    fprintf(stderr, "evloop_semantics %s: FAIL: %s\n", mode_, what);
    return 1;
}

static void deliver(const unsigned char *p, size_t len)
{
    uint32_t idx;
    size_t j;

    if (len != (size_t)size_ || get32(p) != MAGIC || (idx = get32(p + 4)) >= count_) {
        bad_++;
        return;
    }
    for (j = HDR_LEN; j < len; j++) {
        if (p[j] != (unsigned char)(idx * 131u + j * 7u + (j >> 8))) {
            bad_++;
            return;
        }
    }
    if (seen_[idx]++)
        dup_++;
    else
        ok_++;
}

/* read_all: SSL_read until the library has nothing now (lock held). */
static void read_all(void)
{
    static unsigned char buf[1 << 15];

    for (;;) {
        size_t n = 0;
        int avail = 0;

        (void)ioctl(fd_, FIONREAD, &avail);
        if (!SSL_is_init_finished(ssl_)) {
            int r = SSL_accept(ssl_), e = SSL_get_error(ssl_, r);

            if (r == 1)
                continue;
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                other_errors_++, done_ = 1;
            return;
        }
        if (SSL_read_ex(ssl_, buf, sizeof(buf), &n)) {
            /* Nothing readable in the kernel and nothing buffered before:
             * this record came from past a hole. */
            if (avail == 0)
                early_++;
            deliver(buf, n);
            if (ok_ == count_)
                done_ = 1;
            continue;
        }
        switch (SSL_get_error(ssl_, 0)) {
        case SSL_ERROR_WANT_READ:
            return;
        case SSL_ERROR_ZERO_RETURN:
            done_ = 1;
            return;
        default:
            ERR_print_errors_fp(stderr);
            other_errors_++;
            done_ = 1;
            return;
        }
    }
}

/* wait_once: one wait of the case's kind, 100 ms at most; 1 if it reported
 * the socket. */
static int wait_once(void)
{
    int r;

    if (strncmp(mode_, "epoll", 5) == 0 || strcmp(mode_, "dup") == 0) {
        struct epoll_event ev;

        r = epoll_wait(ep_, &ev, 1, 100);
    } else if (strcmp(mode_, "poll") == 0 || strcmp(mode_, "ppoll") == 0) {
        struct pollfd p = {.fd = fd_, .events = POLLIN};
        struct timespec ts = {0, 100000000};

        r = mode_[0] == 'p' && mode_[1] == 'p' ? ppoll(&p, 1, &ts, NULL) : poll(&p, 1, 100);
        r = r > 0 && (p.revents & POLLIN);
    } else {
        fd_set rf;
        struct timeval tv = {0, 100000};
        struct timespec ts = {0, 100000000};

        FD_ZERO(&rf);
        FD_SET(fd_, &rf);
        r = strcmp(mode_, "select") == 0 ? select(fd_ + 1, &rf, NULL, NULL, &tv)
                                         : pselect(fd_ + 1, &rf, NULL, NULL, &ts, NULL);
        r = r > 0 && FD_ISSET(fd_, &rf);
    }
    if (r < 0 && errno != EINTR)
        die("wait: %s", strerror(errno));
    return r > 0;
}

/* The EPOLLONESHOT threads: each takes the descriptor when reported, reads
 * everything, and re-arms it. */
static void *oneshot_thread(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&done_, __ATOMIC_ACQUIRE)) {
        struct epoll_event ev, re = {.events = EPOLLIN | EPOLLONESHOT, .data.fd = fd_};

        if (epoll_wait(ep_, &ev, 1, 100) <= 0)
            continue;
        if (pthread_mutex_trylock(&mu_) != 0) {
            /* The other thread holds the descriptor: ONESHOT must prevent
             * this. */
            __atomic_add_fetch(&other_errors_, 1000, __ATOMIC_RELAXED);
            continue;
        }
        read_all();
        pthread_mutex_unlock(&mu_);
        (void)epoll_ctl(ep_, EPOLL_CTL_MOD, fd_, &re);
    }
    return NULL;
}

static void usage(void)
{
    die("usage: evloop_semantics CASE --listen ADDR:PORT --count N --size S --ready FILE");
}

int main(int argc, char **argv)
{
    const char *addr = NULL, *ready = NULL;
    SSL_CTX *ctx;
    int lfd, i, rc = 0, (*wakeups)(int, uint64_t *, uint64_t *);
    uint64_t nwake = 0, nspur = 0, start;

    example_name = "evloop_semantics";
    if (argc < 2)
        usage();
    mode_ = argv[1];
    parse_receiver_options(argc, argv, 2, &addr, &ready, &count_, &size_, usage);
    if (addr == NULL || count_ <= 0 || size_ < HDR_LEN || (seen_ = calloc(count_, 1)) == NULL)
        die("bad arguments");
    if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
        die("SSL_CTX_new");
    make_cert(ctx, "evloop-semantics");
    lfd = listen_tcp(addr);
    touch_ready(ready, lfd);
    if (!wait_readable(lfd, 30000))
        die("no connection");
    fd_ = accept_tcp(lfd);
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
    ssl_ = SSL_new(ctx);
    SSL_set_fd(ssl_, fd_);
    wait_fd_ = fd_;
    if (strncmp(mode_, "epoll", 5) == 0 || strcmp(mode_, "dup") == 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd_};

        if (strcmp(mode_, "epoll_et") == 0)
            ev.events |= EPOLLET;
        if (strcmp(mode_, "epoll_oneshot_threads") == 0)
            ev.events |= EPOLLONESHOT;
        if (strcmp(mode_, "dup") == 0)
            wait_fd_ = dup(fd_);
        ep_ = epoll_create1(0);
        if (ep_ < 0 || epoll_ctl(ep_, EPOLL_CTL_ADD, wait_fd_, &ev) != 0)
            die("epoll: %s", strerror(errno));
    }
    start = now_ns();
    if (strcmp(mode_, "epoll_oneshot_threads") == 0) {
        pthread_t t[2];

        for (i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, oneshot_thread, NULL);
        while (!__atomic_load_n(&done_, __ATOMIC_ACQUIRE) && now_ns() - start < 60000000000ull)
            usleep(50000);
        __atomic_store_n(&done_, 1, __ATOMIC_RELEASE);
        for (i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    } else {
        while (!done_ && now_ns() - start < 60000000000ull) {
            int reported = wait_once();

            /* Level- and edge-triggered alike: read after a report. An
             * edge-triggered loop that missed an edge would stall here
             * until the timeout, and the count below fails. */
            if (reported || strcmp(mode_, "epoll_et") != 0)
                read_all();
        }
    }
    wakeups = (int (*)(int, uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "UTLS_evloop_get_wakeups");
    if (wakeups != NULL)
        (void)wakeups(fd_, &nwake, &nspur);
    printf("%s: %ld of %ld messages, %ld duplicates, %ld bad, %ld early, %ld other errors, "
           "%llu wake-ups for captured bytes, %llu spurious\n",
           mode_, ok_, count_, dup_, bad_, early_, other_errors_, (unsigned long long)nwake,
           (unsigned long long)nspur);
    if (ok_ != count_ || dup_ != 0 || bad_ != 0)
        rc |= fail("not every message exactly once and intact");
    if (other_errors_ != 0)
        rc |= fail("a non-blocking SSL_read failed other than with WANT_READ, or ONESHOT "
                   "gave the descriptor to two threads");
    if (strcmp(mode_, "dup") != 0 && early_ == 0)
        rc |= fail("no record was delivered while the socket was not readable");
    if (wakeups == NULL)
        rc |= fail("UTLS_evloop_get_wakeups not found: the fork is not loaded");
    if (nspur > nwake)
        rc |= fail("more spurious wake-ups than wake-ups");

    /* fork(): the child uses the same epoll set and waits on a pipe. */
    {
        int pp[2], st = 0;
        pid_t pid;

        if (pipe(pp) != 0)
            die("pipe");
        if ((pid = fork()) == 0) {
            struct pollfd p = {.fd = pp[0], .events = POLLIN};
            struct epoll_event ev;

            if (ep_ >= 0)
                (void)epoll_wait(ep_, &ev, 1, 10);
            _exit(poll(&p, 1, 20) == 0 ? 0 : 3);
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc |= fail("a fork()ed child did not wait normally");
        close(pp[0]);
        close(pp[1]);
    }
    /* close() and reuse of the number; the epoll set outlives the
     * connection. */
    (void)SSL_shutdown(ssl_);
    SSL_free(ssl_);
    close(fd_);
    if (wait_fd_ != fd_)
        close(wait_fd_);
    {
        int pp[2], reused = -1;
        struct pollfd p;

        if (pipe(pp) != 0)
            die("pipe");
        reused = pp[0] == fd_ ? pp[0] : pp[1] == fd_ ? pp[1] : -1;
        if (reused == pp[0]) {
            p.fd = reused;
            p.events = POLLIN;
            if (poll(&p, 1, 50) != 0)
                rc |= fail("a pipe on the closed socket's number was reported readable");
        }
        if (ep_ >= 0) {
            struct epoll_event ev;

            if (epoll_wait(ep_, &ev, 1, 50) != 0)
                rc |= fail("the epoll set that outlived the connection reported an event");
        }
        close(pp[0]);
        close(pp[1]);
    }
    if (ep_ >= 0)
        close(ep_);
    SSL_CTX_free(ctx);
    close(lfd);
    return rc;
}
