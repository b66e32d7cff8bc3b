/*
 * bench_epoll: what the companion library costs a program with nothing
 * tapped (issue 19, point 3: <= 1.05x). A 1000-descriptor epoll set (pipes),
 * 10 of them readable (level-triggered), and a loop of epoll_wait(timeout 0)
 * that reports those 10 each time; and the same with poll() over the 1000.
 *
 *   bench_epoll --out FILE --fork LIBSSL --evloop LIBEVLOOP [--calls N] [--rounds R]
 *
 * The parent runs itself (--child) alternately plain and with
 * LD_PRELOAD="LIBSSL LIBEVLOOP" (the one documented line), R rounds each,
 * and writes the median ns per call of each and their ratio as JSON.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NUM_FDS 1000
#define NUM_READY 10

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* child: prints "epoll_ns poll_ns" per call. */
static int child(long calls)
{
    static struct pollfd pf[NUM_FDS];
    struct epoll_event evs[64];
    struct rlimit rl = {4096, 4096};
    int ep, i, p[2];
    long k;
    uint64_t t0, t1, t2;

    (void)setrlimit(RLIMIT_NOFILE, &rl);
    if ((ep = epoll_create1(0)) < 0)
        return 2;
    for (i = 0; i < NUM_FDS; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};

        if (pipe(p) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0) {
            fprintf(stderr, "bench_epoll: %s\n", strerror(errno));
            return 2;
        }
        if (i % (NUM_FDS / NUM_READY) == 0 && write(p[1], "x", 1) != 1)
            return 2;
        pf[i].fd = p[0];
        pf[i].events = POLLIN;
    }
    for (k = 0; k < calls / 10; k++) /* warm up */
        (void)epoll_wait(ep, evs, 64, 0);
    t0 = now_ns();
    for (k = 0; k < calls; k++)
        if (epoll_wait(ep, evs, 64, 0) != NUM_READY)
            return 3;
    t1 = now_ns();
    for (k = 0; k < calls / 10; k++)
        if (poll(pf, NUM_FDS, 0) != NUM_READY)
            return 3;
    t2 = now_ns();
    printf("%.1f %.1f\n", (double)(t1 - t0) / calls, (double)(t2 - t1) / (calls / 10));
    return 0;
}

static int run_child(const char *self, long calls, const char *preload, double *out_e,
                     double *out_p)
{
    char cmd[4096];
    FILE *f;
    int ok;

    snprintf(cmd, sizeof(cmd), "%s%s%s%s --child --calls %ld", preload ? "env LD_PRELOAD='" : "",
             preload ? preload : "", preload ? "' " : "", self, calls);
    if ((f = popen(cmd, "r")) == NULL)
        return 0;
    ok = fscanf(f, "%lf %lf", out_e, out_p) == 2;
    return pclose(f) == 0 && ok;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *libssl = NULL, *libevl = NULL;
    long calls = 200000, rounds = 7, r;
    double e0[64], e1[64], p0[64], p1[64];
    char preload[2048], self[1024];
    FILE *f;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--child") == 0)
            continue;
        if (i + 1 >= argc)
            break;
        if (strcmp(argv[i], "--out") == 0)
            out = argv[++i];
        else if (strcmp(argv[i], "--fork") == 0)
            libssl = argv[++i];
        else if (strcmp(argv[i], "--evloop") == 0)
            libevl = argv[++i];
        else if (strcmp(argv[i], "--calls") == 0)
            calls = atol(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atol(argv[++i]);
    }
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--child") == 0)
            return child(calls);
    if (out == NULL || libssl == NULL || libevl == NULL || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: bench_epoll --out FILE --fork LIBSSL --evloop LIBEVLOOP "
                        "[--calls N] [--rounds R]\n");
        return 2;
    }
    snprintf(preload, sizeof(preload), "%s %s", libssl, libevl);
    {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

        if (n <= 0)
            return 2;
        self[n] = '\0';
    }
    for (r = 0; r < rounds; r++) {
        if (!run_child(self, calls, NULL, &e0[r], &p0[r])
            || !run_child(self, calls, preload, &e1[r], &p1[r])) {
            fprintf(stderr, "bench_epoll: a child failed\n");
            return 1;
        }
    }
    qsort(e0, rounds, sizeof(double), cmp);
    qsort(e1, rounds, sizeof(double), cmp);
    qsort(p0, rounds, sizeof(double), cmp);
    qsort(p1, rounds, sizeof(double), cmp);
    if ((f = fopen(out, "w")) == NULL)
        return 2;
    fprintf(f,
            "{\n \"what\": \"epoll_wait(timeout 0) on a %d-descriptor set with %d readable "
            "(level-triggered), and poll() over the same %d; nothing tapped\",\n"
            " \"preload\": \"%s\",\n \"calls\": %ld,\n \"rounds\": %ld,\n"
            " \"epoll_wait_ns\": {\"plain\": %.1f, \"preloaded\": %.1f, \"ratio\": %.4f},\n"
            " \"poll_ns\": {\"plain\": %.1f, \"preloaded\": %.1f, \"ratio\": %.4f},\n"
            " \"targets\": {\"epoll_wait preloaded/plain <= 1.05\": %s}\n}\n",
            NUM_FDS, NUM_READY, NUM_FDS, preload, calls, rounds, e0[rounds / 2],
            e1[rounds / 2], e1[rounds / 2] / e0[rounds / 2], p0[rounds / 2], p1[rounds / 2],
            p1[rounds / 2] / p0[rounds / 2],
            e1[rounds / 2] / e0[rounds / 2] <= 1.05 ? "true" : "false");
    fclose(f);
    return 0;
}
