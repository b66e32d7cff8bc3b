/*
 * libutls-evloop.so: the companion preload library that wakes unmodified
 * event loops for records past a TCP hole (docs/evloop.md).
 *
 *   LD_PRELOAD="$B/lib/libssl.so.3 $B/lib/libutls-evloop.so" UTLS_MODE=unordered,tap prog
 *
 * The kernel never reports a socket readable for bytes it holds behind a
 * hole, so a program that waits in poll/select/epoll before SSL_read() would
 * see a record that arrived complete past the hole only after the
 * retransmission. This library interposes poll, ppoll, select, pselect,
 * epoll_wait, epoll_pwait and epoll_pwait2 (and keeps track of epoll_ctl,
 * close, dup2 and dup3): when a descriptor the program waits on for reading
 * is a TCP socket that the uTLS fork reads through a tap, it also waits on
 * the tap's capture descriptor and reports the socket readable when the fork
 * says a record can be delivered (UTLS_evloop_fd_ready).
 *
 * It interposes libc calls, which the fork itself must never do: the fork's
 * exported symbol set stays that of the system libssl plus the UTLS nodes.
 * It finds the fork's UTLS_evloop_* calls with dlsym(); without the fork, or
 * while no socket of the process is tapped (UTLS_evloop_generation() == 0),
 * every call goes straight to libc after one atomic load.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/*
 * Capture descriptors one wait adds beside the program's own. With one ring
 * per connection that many tapped connections get early wake-ups in one wait
 * (the others read in order); with one process-wide ring it is never reached.
 */
#define EVL_MAX_CAPTURE_FDS 256

/* Descriptors of one poll/select the interposed path handles; larger calls
 * go to libc unchanged (they still work, in order). */
#define EVL_MAX_POLL_FDS 65536

typedef uint64_t (*gen_fn)(void);
typedef int (*capfd_fn)(int);
typedef int (*ready_fn)(int, uint64_t *);

static struct {
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
    int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
                        const sigset_t *);
    int (*epoll_ctl)(int, int, int, struct epoll_event *);
    int (*close)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    gen_fn generation;
    capfd_fn capture_fd;
    ready_fn fd_ready;
} real;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* --- epoll bookkeeping ------------------------------------------------------ */

typedef struct {
    int fd;
    uint32_t events;     /* as the program registered them */
    epoll_data_t data;
    int armed;           /* EPOLLONESHOT: not yet reported since the last MOD */
    int capfd;           /* the tap's capture descriptor, or -1 (not tapped) */
    uint64_t token;      /* EPOLLET: the fork's token last reported */
} evl_reg;

typedef struct evl_set {
    int epfd;
    evl_reg *regs;
    size_t num, cap;
    size_t num_tapped;
    uint64_t gen_seen;
    struct evl_set *next;
} evl_set;

static pthread_mutex_t evl_mu = PTHREAD_MUTEX_INITIALIZER;

static evl_set *sets = NULL;

static size_t num_sets = 0; /* read without the lock by close() */

static void *next_sym(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

static void atfork_prepare(void)
{
    pthread_mutex_lock(&evl_mu);
}

static void atfork_release(void)
{
    pthread_mutex_unlock(&evl_mu);
}

static void evl_init(void)
{
    real.poll = next_sym("poll");
    real.ppoll = next_sym("ppoll");
    real.select = next_sym("select");
    real.pselect = next_sym("pselect");
    real.epoll_wait = next_sym("epoll_wait");
    real.epoll_pwait = next_sym("epoll_pwait");
    real.epoll_pwait2 = next_sym("epoll_pwait2");
    real.epoll_ctl = next_sym("epoll_ctl");
    real.close = next_sym("close");
    real.dup2 = next_sym("dup2");
    real.dup3 = next_sym("dup3");
    real.generation = (gen_fn)dlsym(RTLD_DEFAULT, "UTLS_evloop_generation");
    real.capture_fd = (capfd_fn)dlsym(RTLD_DEFAULT, "UTLS_evloop_fd_get_capture_fd");
    real.fd_ready = (ready_fn)dlsym(RTLD_DEFAULT, "UTLS_evloop_fd_ready");
    if (real.capture_fd == NULL || real.fd_ready == NULL)
        real.generation = NULL; /* not the fork: pass everything through */
    /* A child of fork() must not inherit the lock held by another thread. */
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

__attribute__((constructor)) static void evl_ctor(void)
{
    pthread_once(&init_once, evl_init);
}

/* evl_generation: 0 when the interposed path has nothing to do. */
static inline uint64_t evl_generation(void)
{
    pthread_once(&init_once, evl_init);
    return real.generation != NULL ? real.generation() : 0;
}

static evl_set *set_find(int epfd, int create)
{
    evl_set *s;

    for (s = sets; s != NULL; s = s->next)
        if (s->epfd == epfd)
            return s;
    if (!create || (s = calloc(1, sizeof(*s))) == NULL)
        return NULL;
    s->epfd = epfd;
    s->next = sets;
    sets = s;
    __atomic_store_n(&num_sets, num_sets + 1, __ATOMIC_RELEASE);
    return s;
}

static void set_free(int epfd)
{
    evl_set **p, *s;

    for (p = &sets; *p != NULL; p = &(*p)->next) {
        if ((*p)->epfd == epfd) {
            s = *p;
            *p = s->next;
            free(s->regs);
            free(s);
            __atomic_store_n(&num_sets, num_sets - 1, __ATOMIC_RELEASE);
            return;
        }
    }
}

static evl_reg *reg_find(evl_set *s, int fd)
{
    size_t i;

    for (i = 0; i < s->num; i++)
        if (s->regs[i].fd == fd)
            return &s->regs[i];
    return NULL;
}

static void reg_remove(evl_set *s, int fd)
{
    evl_reg *r = reg_find(s, fd);

    if (r != NULL) {
        if (r->capfd >= 0)
            s->num_tapped--;
        *r = s->regs[--s->num];
    }
}

/* forget_fd: |fd| was closed (or replaced by dup2): it leaves every set. */
static void forget_fd(int fd)
{
    evl_set *s;

    if (__atomic_load_n(&num_sets, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&evl_mu);
    set_free(fd);
    for (s = sets; s != NULL; s = s->next)
        reg_remove(s, fd);
    pthread_mutex_unlock(&evl_mu);
}

/* set_refresh: which registered descriptors are tapped now (lock held). */
static void set_refresh(evl_set *s, uint64_t gen)
{
    size_t i;

    if (s->gen_seen == gen)
        return;
    s->num_tapped = 0;
    for (i = 0; i < s->num; i++) {
        s->regs[i].capfd = real.capture_fd(s->regs[i].fd);
        if (s->regs[i].capfd >= 0)
            s->num_tapped++;
    }
    s->gen_seen = gen;
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    int r;
    evl_set *s;
    evl_reg *reg;

    pthread_once(&init_once, evl_init);
    r = real.epoll_ctl(epfd, op, fd, ev);
    if (r != 0 || real.generation == NULL)
        return r;
    /* Every registration is noted (a socket is usually tapped only after it
     * was added, at the end of its handshake); this costs nothing in
     * epoll_wait while no socket is tapped. */
    pthread_mutex_lock(&evl_mu);
    s = set_find(epfd, op != EPOLL_CTL_DEL);
    if (s != NULL) {
        reg = reg_find(s, fd);
        if (op == EPOLL_CTL_DEL) {
            reg_remove(s, fd);
        } else if (ev != NULL) {
            if (reg == NULL && s->num == s->cap) {
                size_t n = s->cap == 0 ? 16 : s->cap * 2;
                evl_reg *grown = realloc(s->regs, n * sizeof(*grown));

                if (grown == NULL)
                    goto end; /* this descriptor just gets no early wake-ups */
                s->regs = grown;
                s->cap = n;
            }
            if (reg == NULL) {
                reg = &s->regs[s->num++];
                memset(reg, 0, sizeof(*reg));
                reg->fd = fd;
                reg->capfd = -1;
                s->gen_seen = 0; /* look whether it is tapped */
            }
            reg->events = ev->events;
            reg->data = ev->data;
            reg->armed = 1;
        }
    }
end:
    pthread_mutex_unlock(&evl_mu);
    return r;
}

/* --- waiting ---------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* remaining: the timeout left before |deadline| (0: wait for ever) as a
 * timespec for ppoll, or NULL. */
static const struct timespec *remaining(uint64_t deadline, int forever, struct timespec *ts)
{
    uint64_t now, left;

    if (forever)
        return NULL;
    now = now_ns();
    left = deadline > now ? deadline - now : 0;
    ts->tv_sec = (time_t)(left / 1000000000u);
    ts->tv_nsec = (long)(left % 1000000000u);
    return ts;
}

/*
 * epoll_synth reports, into |evs| (at most |max|), the tapped descriptors of
 * set |s| that have a record ready: level-triggered while it is ready,
 * edge-triggered when the fork's token moved, EPOLLONESHOT once until the next
 * EPOLL_CTL_MOD (the kernel's registration is disarmed too, so no other thread
 * gets the descriptor meanwhile). Collects the capture descriptors of the
 * others into |capfds|. Lock held.
 */
static int epoll_synth(evl_set *s, struct epoll_event *evs, int max, int *capfds,
                       size_t *num_capfds)
{
    size_t i, j;
    int n = 0;

    *num_capfds = 0;
    for (i = 0; i < s->num && n < max; i++) {
        evl_reg *r = &s->regs[i];
        uint64_t token = 0;

        if (r->capfd < 0 || !r->armed || (r->events & EPOLLIN) == 0)
            continue;
        if (real.fd_ready(r->fd, &token)
            && ((r->events & EPOLLET) == 0 || token != r->token)) {
            r->token = token;
            evs[n].events = EPOLLIN;
            evs[n].data = r->data;
            n++;
            if (r->events & EPOLLONESHOT) {
                struct epoll_event off = {.events = EPOLLONESHOT, .data = r->data};

                r->armed = 0;
                (void)real.epoll_ctl(s->epfd, EPOLL_CTL_MOD, r->fd, &off);
            }
            continue;
        }
        for (j = 0; j < *num_capfds && capfds[j] != r->capfd; j++)
            continue;
        if (j == *num_capfds && *num_capfds < EVL_MAX_CAPTURE_FDS)
            capfds[(*num_capfds)++] = r->capfd;
    }
    return n;
}

/*
 * kernel_reported: the kernel's epoll returned |evs| (|m| of them) of set
 * |epfd|; an EPOLLONESHOT registration among them is disarmed in the kernel
 * now, so it is disarmed here too, at once: another thread's epoll_synth
 * must not hand the same descriptor out again before the program re-arms it
 * with EPOLL_CTL_MOD. A registration is known by its data, as the program
 * knows it; two registrations with the same data are both disarmed (they
 * miss early wake-ups until re-armed, never get one too many).
 */
static int kernel_reported(int epfd, const struct epoll_event *evs, int m)
{
    evl_set *s;
    size_t i;
    int k;

    if (m <= 0)
        return m;
    pthread_mutex_lock(&evl_mu);
    if ((s = set_find(epfd, 0)) != NULL)
        for (i = 0; i < s->num; i++) {
            evl_reg *r = &s->regs[i];

            /* Only a tapped registration is ever reported by epoll_synth. */
            if ((r->events & EPOLLONESHOT) == 0 || !r->armed || r->capfd < 0)
                continue;
            for (k = 0; k < m; k++)
                if (evs[k].data.u64 == r->data.u64) {
                    r->armed = 0;
                    break;
                }
        }
    pthread_mutex_unlock(&evl_mu);
    return m;
}

static int epoll_common(int epfd, struct epoll_event *evs, int max, uint64_t timeout_ns,
                        int forever, const sigset_t *sigmask)
{
    uint64_t deadline = forever ? 0 : now_ns() + timeout_ns;
    int capfds[EVL_MAX_CAPTURE_FDS];

    for (;;) {
        struct pollfd p[EVL_MAX_CAPTURE_FDS + 1];
        struct timespec ts;
        size_t ncap = 0, i;
        int n, m, r;
        evl_set *s;

        pthread_mutex_lock(&evl_mu);
        s = set_find(epfd, 0);
        n = s != NULL && s->num_tapped > 0 ? epoll_synth(s, evs, max, capfds, &ncap) : 0;
        pthread_mutex_unlock(&evl_mu);
        if (n > 0) {
            m = kernel_reported(epfd, evs + n, real.epoll_wait(epfd, evs + n, max - n, 0));
            return n + (m > 0 ? m : 0);
        }
        p[0].fd = epfd;
        p[0].events = POLLIN;
        for (i = 0; i < ncap; i++) {
            p[i + 1].fd = capfds[i];
            p[i + 1].events = POLLIN;
        }
        r = real.ppoll(p, ncap + 1, remaining(deadline, forever, &ts), sigmask);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        if (p[0].revents != 0) {
            m = kernel_reported(epfd, evs, real.epoll_wait(epfd, evs, max, 0));
            if (m != 0)
                return m;
        }
        /* A capture descriptor: the next pass drains it and asks again. */
    }
}

/* epoll_prologue: 1 if |epfd| has tapped descriptors to watch. */
static int epoll_prologue(int epfd)
{
    uint64_t gen = evl_generation();
    evl_set *s;
    int tapped = 0;

    if (gen == 0)
        return 0;
    pthread_mutex_lock(&evl_mu);
    if ((s = set_find(epfd, 0)) != NULL) {
        set_refresh(s, gen);
        tapped = s->num_tapped > 0;
    }
    pthread_mutex_unlock(&evl_mu);
    return tapped;
}

EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    if (max <= 0 || !epoll_prologue(epfd))
        return real.epoll_wait(epfd, evs, max, timeout);
    return epoll_common(epfd, evs, max, timeout < 0 ? 0 : (uint64_t)timeout * 1000000u,
                        timeout < 0, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                       const sigset_t *sigmask)
{
    if (max <= 0 || !epoll_prologue(epfd))
        return real.epoll_pwait(epfd, evs, max, timeout, sigmask);
    return epoll_common(epfd, evs, max, timeout < 0 ? 0 : (uint64_t)timeout * 1000000u,
                        timeout < 0, sigmask);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *t,
                        const sigset_t *sigmask)
{
    if (max <= 0 || real.epoll_pwait2 == NULL || !epoll_prologue(epfd)) {
        if (real.epoll_pwait2 == NULL) {
            errno = ENOSYS;
            return -1;
        }
        return real.epoll_pwait2(epfd, evs, max, t, sigmask);
    }
    return epoll_common(epfd, evs, max,
                        t == NULL ? 0 : (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec,
                        t == NULL, sigmask);
}

/*
 * poll_common: poll(2) over |fds| where the tapped sockets waited on for
 * reading are also reported readable when the fork has a record for them.
 * Returns -2 when none of |fds| is tapped (the caller goes to libc).
 */
static int poll_common(struct pollfd *fds, nfds_t n, uint64_t timeout_ns, int forever,
                       const sigset_t *sigmask)
{
    uint64_t deadline = forever ? 0 : now_ns() + timeout_ns;
    struct pollfd *all;
    int capfd[EVL_MAX_CAPTURE_FDS];
    nfds_t tapped[EVL_MAX_CAPTURE_FDS];
    size_t ntap = 0, i;
    int ret;

    if (n > EVL_MAX_POLL_FDS)
        return -2;
    for (i = 0; i < n && ntap < EVL_MAX_CAPTURE_FDS; i++) {
        int c;

        if (fds[i].fd < 0 || (fds[i].events & POLLIN) == 0)
            continue;
        if ((c = real.capture_fd(fds[i].fd)) >= 0) {
            capfd[ntap] = c;
            tapped[ntap++] = i;
        }
    }
    if (ntap == 0)
        return -2;
    if ((all = malloc((n + ntap) * sizeof(*all))) == NULL)
        return -2;
    for (;;) {
        struct timespec ts;
        int ready[EVL_MAX_CAPTURE_FDS], any = 0, r;

        for (i = 0; i < ntap; i++)
            any |= ready[i] = real.fd_ready(fds[tapped[i]].fd, NULL);
        memcpy(all, fds, n * sizeof(*all));
        for (i = 0; i < ntap; i++) {
            all[n + i].fd = capfd[i];
            all[n + i].events = POLLIN;
            all[n + i].revents = 0;
        }
        r = real.ppoll(all, any ? n : n + ntap,
                       any ? &(struct timespec){0, 0} : remaining(deadline, forever, &ts),
                       sigmask);
        if (r < 0) {
            ret = -1;
            break;
        }
        for (i = 0; i < n; i++)
            fds[i].revents = all[i].revents;
        for (i = 0; i < ntap; i++)
            if (ready[i])
                fds[tapped[i]].revents |= POLLIN;
        ret = 0;
        for (i = 0; i < n; i++)
            ret += fds[i].revents != 0;
        if (ret > 0 || r == 0)
            break;
        /* Only capture descriptors: drain them (the next pass) and ask again. */
    }
    free(all);
    return ret;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    int r;

    if (evl_generation() == 0
        || (r = poll_common(fds, n, timeout < 0 ? 0 : (uint64_t)timeout * 1000000u, timeout < 0,
                            NULL))
               == -2)
        return real.poll(fds, n, timeout);
    return r;
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *sigmask)
{
    int r;

    if (evl_generation() == 0
        || (r = poll_common(fds, n,
                            t == NULL ? 0
                                      : (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec,
                            t == NULL, sigmask))
               == -2)
        return real.ppoll(fds, n, t, sigmask);
    return r;
}

/*
 * select_common: select(2) through poll_common, when a descriptor of
 * |rfds| is tapped; -2 otherwise (the caller goes to libc).
 */
static int select_common(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, uint64_t timeout_ns,
                         int forever, const sigset_t *sigmask)
{
    struct pollfd *p;
    nfds_t n = 0;
    int fd, r, any = 0;

    if (nfds <= 0 || nfds > FD_SETSIZE || rfds == NULL)
        return -2;
    for (fd = 0; fd < nfds && !any; fd++)
        any = FD_ISSET(fd, rfds) && real.capture_fd(fd) >= 0;
    if (!any || (p = calloc((size_t)nfds, sizeof(*p))) == NULL)
        return -2;
    for (fd = 0; fd < nfds; fd++) {
        short ev = 0;

        if (FD_ISSET(fd, rfds))
            ev |= POLLIN;
        if (wfds != NULL && FD_ISSET(fd, wfds))
            ev |= POLLOUT;
        if (efds != NULL && FD_ISSET(fd, efds))
            ev |= POLLPRI;
        if (ev != 0) {
            p[n].fd = fd;
            p[n++].events = ev;
        }
    }
    r = poll_common(p, n, timeout_ns, forever, sigmask);
    if (r >= 0) {
        nfds_t i;

        FD_ZERO(rfds);
        if (wfds != NULL)
            FD_ZERO(wfds);
        if (efds != NULL)
            FD_ZERO(efds);
        r = 0;
        for (i = 0; i < n; i++) {
            short re = p[i].revents;

            if ((p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
                FD_SET(p[i].fd, rfds);
                r++;
            }
            if ((p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
                FD_SET(p[i].fd, wfds);
                r++;
            }
            if ((p[i].events & POLLPRI) && (re & POLLPRI)) {
                FD_SET(p[i].fd, efds);
                r++;
            }
            if (re & POLLNVAL) {
                errno = EBADF;
                r = -1;
                break;
            }
        }
    }
    free(p);
    return r;
}

EXPORT int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *tv)
{
    uint64_t t0, tns;
    int r;

    if (evl_generation() == 0)
        return real.select(nfds, rfds, wfds, efds, tv);
    t0 = now_ns();
    tns = tv == NULL ? 0 : (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
    r = select_common(nfds, rfds, wfds, efds, tns, tv == NULL, NULL);
    if (r == -2)
        return real.select(nfds, rfds, wfds, efds, tv);
    if (tv != NULL) {
        /* Linux's select() leaves the time not slept in |tv|. */
        uint64_t spent = now_ns() - t0, left = spent < tns ? tns - spent : 0;

        tv->tv_sec = (time_t)(left / 1000000000u);
        tv->tv_usec = (suseconds_t)(left % 1000000000u / 1000u);
    }
    return r;
}

EXPORT int pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, const struct timespec *t,
                   const sigset_t *sigmask)
{
    int r;

    if (evl_generation() == 0)
        return real.pselect(nfds, rfds, wfds, efds, t, sigmask);
    r = select_common(nfds, rfds, wfds, efds,
                      t == NULL ? 0 : (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec,
                      t == NULL, sigmask);
    if (r == -2)
        return real.pselect(nfds, rfds, wfds, efds, t, sigmask);
    return r;
}

/* --- descriptors going away ------------------------------------------------ */

EXPORT int close(int fd)
{
    pthread_once(&init_once, evl_init);
    forget_fd(fd);
    return real.close(fd);
}

EXPORT int dup2(int oldfd, int newfd)
{
    int r;

    pthread_once(&init_once, evl_init);
    r = real.dup2(oldfd, newfd);
    if (r >= 0 && oldfd != newfd)
        forget_fd(newfd); /* the old |newfd| was closed */
    return r;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
    int r;

    pthread_once(&init_once, evl_init);
    r = real.dup3(oldfd, newfd, flags);
    if (r >= 0)
        forget_fd(newfd);
    return r;
}
