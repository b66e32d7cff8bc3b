/*
 * tap_churn: the process-wide tap under many connections, on loopback in a
 * network namespace of its own (tests/net/in_netns.sh runs it under
 * `unshare -n`). Real kernel TCP, the real capture; no TLS (the tap BIO is
 * read directly).
 *
 *   tap_churn CONCURRENT CHURN [--json FILE]
 *
 * 1. CONCURRENT connections open at once, each accepted and given a tap
 *    (UTLS_BIO_new_tap): every one must find its ISN (the registry holds
 *    them all), its byte must come through the tap BIO, and the table must
 *    count them all attached; then all are closed and the table must be
 *    empty again.
 * 2. CHURN connections opened, tapped, read and closed one after the other
 *    (the client closes with RST: no TIME_WAIT to run out of ports). After
 *    the first tenth (warm-up) the descriptors, the process's RSS, the
 *    kernel's TCP socket memory and the tap's table and filter are noted;
 *    at the end each must be back: the same descriptors, no flow, one port
 *    in the filter (the listener), RSS within 5% + 1 MiB of the warm-up,
 *    the capture's kernel memory unchanged, this namespace's TCP sockets
 *    back to the warm-up count.
 * Prints one JSON line; exits 0 if every check holds, 1 otherwise, 77 if it
 * cannot run (not root).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/utls.h>

#include "tap_check.h"

#include "example_util.h"

/* tcp_sockets: "TCP: inuse N orphan N tw N alloc N mem PAGES" of this
 * namespace (/proc/net/sockstat); alloc and mem into the out_ params. */
static void tcp_sockets(long *out_alloc, long *out_mem)
{
    FILE *f = fopen("/proc/net/sockstat", "r");
    char line[256];

    *out_alloc = *out_mem = -1;
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p;

        if (strncmp(line, "TCP:", 4) != 0)
            continue;
        if ((p = strstr(line, "alloc ")) != NULL)
            *out_alloc = strtol(p + 6, NULL, 10);
        if ((p = strstr(line, "mem ")) != NULL)
            *out_mem = strtol(p + 4, NULL, 10);
    }
    fclose(f);
}

static int client_connect(const struct sockaddr_in *to)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0) {
        perror("connect");
        exit(1);
    }
    return fd;
}

/* close_rst closes |fd| with a reset, so that no TIME_WAIT is left. */
static void close_rst(int fd)
{
    struct linger lg = {1, 0};

    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

/* tap_one gives the accepted |sfd| a tap, sends one byte from |cfd| and
 * reads it through the tap BIO. Returns the BIO (NULL if no tap). */
static BIO *tap_one(int sfd, int cfd, unsigned char byte, int *out_read_ok)
{
    BIO *b = UTLS_BIO_new_tap(sfd, BIO_NOCLOSE);
    unsigned char got = 0;

    *out_read_ok = 0;
    if (b == NULL) {
        ERR_clear_error();
        return NULL;
    }
    if (write(cfd, &byte, 1) != 1)
        return b;
    *out_read_ok = BIO_read(b, &got, 1) == 1 && got == byte;
    return b;
}

int main(int argc, char **argv)
{
    long concurrent, churn, i, fds0, fds1, rss0, rss1, alloc0, alloc1, mem0, mem1;
    struct sockaddr_in addr;
    UTLS_TAP_LISTENER *tl;
    UTLS_TAP_GLOBAL_STATS st0, st;
    int lfd, *cfds = NULL, *sfds, go[2], done[2];
    pid_t child;
    char cmd;
    long tapped = 0, read_ok = 0, churn_tapped = 0, churn_read = 0;
    BIO **bios;
    struct timespec t0, t1, t2;
    const char *json = NULL;
    FILE *jf;
    char summary[2048];

    if (argc < 3) {
        fprintf(stderr, "usage: tap_churn CONCURRENT CHURN [--json FILE]\n");
        return 2;
    }
    concurrent = strtol(argv[1], NULL, 10);
    churn = strtol(argv[2], NULL, 10);
    if (argc >= 5 && strcmp(argv[3], "--json") == 0)
        json = argv[4];
    if (geteuid() != 0) {
        printf("SKIP: needs root (AF_PACKET)\n");
        return 77;
    }
    if ((lfd = tap_loopback_listener(65535, &addr)) < 0)
        return 1;
    /*
     * The clients of phase 1 live in a child process: a process may hold
     * fewer descriptors than both ends of 10,000 connections (RLIMIT_NOFILE
     * here is 20,000 and cannot be raised). It is forked before the tap is
     * opened and connects when told to.
     */
    if (pipe(go) != 0 || pipe(done) != 0)
        return 1;
    if ((child = fork()) == 0) {
        char cmd;

        cfds = calloc((size_t)concurrent + 1, sizeof(int));
        if (cfds == NULL || read(go[0], &cmd, 1) != 1)
            _exit(1);
        for (i = 0; i < concurrent; i++) {
            unsigned char byte = (unsigned char)i;

            cfds[i] = client_connect(&addr);
            if (write(cfds[i], &byte, 1) != 1)
                _exit(1);
        }
        if (read(go[0], &cmd, 1) != 1)
            _exit(1);
        for (i = 0; i < concurrent; i++)
            close_rst(cfds[i]);
        (void)!write(done[1], "x", 1);
        _exit(0);
    }
    if ((tl = UTLS_tap_listen(lfd)) == NULL) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    sfds = calloc((size_t)concurrent + 1, sizeof(int));
    bios = calloc((size_t)concurrent + 1, sizeof(BIO *));
    if (sfds == NULL || bios == NULL)
        return 1;

    /* 1. CONCURRENT at once. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    (void)!write(go[1], "g", 1);
    for (i = 0; i < concurrent; i++) {
        unsigned char got = 0;

        if ((sfds[i] = accept(lfd, NULL, NULL)) < 0) {
            perror("accept");
            return 1;
        }
        if ((bios[i] = UTLS_BIO_new_tap(sfds[i], BIO_NOCLOSE)) == NULL) {
            ERR_clear_error();
            continue;
        }
        tapped++;
        read_ok += BIO_read(bios[i], &got, 1) == 1;
    }
    st = tap_global_stats();
    printf("concurrent: %ld connections, %ld tapped, %ld read through the tap; table: %zu flows, "
           "%zu attached, %llu ring drops\n", concurrent, tapped, read_ok, st.flows, st.attached, (unsigned long long)st.ring_drops);
    tap_check(tapped == concurrent, "every concurrent connection found its ISN and got a tap");
    tap_check(read_ok == concurrent, "every concurrent connection's byte came through its tap");
    (void)!write(go[1], "c", 1);
    if (read(done[0], &cmd, 1) != 1 || waitpid(child, NULL, 0) != child)
        tap_check(0, "the client process closed its connections");
    tap_check(st.attached == (size_t)concurrent, "the table holds every concurrent connection");
    for (i = 0; i < concurrent; i++) {
        BIO_free_all(bios[i]); /* the tap and its socket BIO */
        close(sfds[i]);
    }
    st = tap_global_stats();
    tap_check(st.flows == 0 && st.attached == 0, "closing them all empties the table");

    /* 2. CHURN one after the other; the first tenth warms up. */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fds0 = rss0 = alloc0 = mem0 = -1;
    memset(&st0, 0, sizeof(st0));
    for (i = 0; i < churn; i++) {
        int c = client_connect(&addr), s, ok;
        BIO *b;

        if ((s = accept(lfd, NULL, NULL)) < 0) {
            perror("accept");
            return 1;
        }
        b = tap_one(s, c, (unsigned char)i, &ok);
        churn_tapped += b != NULL;
        churn_read += ok;
        BIO_free_all(b);
        close_rst(c);
        close(s);
        if (i + 1 == churn / 10) {
            usleep(100000); /* let the resets finish */
            fds0 = count_open_fds();
            rss0 = tap_rss_kb();
            tcp_sockets(&alloc0, &mem0);
            st0 = tap_global_stats();
        }
    }
    usleep(200000);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    fds1 = count_open_fds();
    rss1 = tap_rss_kb();
    tcp_sockets(&alloc1, &mem1);
    st = tap_global_stats();
    snprintf(summary, sizeof(summary),
             "{\"concurrent\":%ld,\"concurrent_tapped\":%ld,\"concurrent_s\":%.2f,"
             "\"churn\":%ld,\"churn_tapped\":%ld,\"churn_read\":%ld,\"churn_s\":%.2f,"
             "\"fds_warm\":%ld,\"fds_end\":%ld,\"rss_kb_warm\":%ld,\"rss_kb_end\":%ld,"
             "\"tcp_alloc_warm\":%ld,\"tcp_alloc_end\":%ld,\"tcp_mem_pages_warm\":%ld,"
             "\"tcp_mem_pages_end\":%ld,\"flows_end\":%zu,\"unattached_end\":%zu,"
             "\"ports_end\":%zu,\"kernel_bytes_warm\":%llu,\"kernel_bytes_end\":%llu,"
             "\"ring_drops\":%llu,\"inbox_drops\":%llu,\"filter_rebuilds\":%llu}",
             concurrent, tapped,
             (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, churn, churn_tapped,
             churn_read, (t2.tv_sec - t1.tv_sec) + (t2.tv_nsec - t1.tv_nsec) / 1e9, fds0, fds1,
             rss0, rss1, alloc0, alloc1, mem0, mem1, st.flows, st.unattached, st.ports,
             (unsigned long long)st0.kernel_bytes, (unsigned long long)st.kernel_bytes,
             (unsigned long long)st.ring_drops, (unsigned long long)st.inbox_drops,
             (unsigned long long)st.filter_rebuilds);
    printf("%s\n", summary);
    if (json != NULL && (jf = fopen(json, "w")) != NULL) {
        fprintf(jf, "%s\n", summary);
        fclose(jf);
    }
    tap_check(churn_tapped == churn, "every churned connection got a tap");
    tap_check(churn_read == churn, "every churned connection's byte came through its tap");
    tap_check(fds1 == fds0, "no descriptor leaked");
    tap_check(st.flows == 0 && st.attached == 0 && st.unattached == 0, "no flow or ISN entry left");
    tap_check(st.ports == 1, "the filter holds the listener's port only");
    tap_check(st.kernel_bytes == st0.kernel_bytes, "the capture's kernel memory is unchanged");
    tap_check(rss1 <= rss0 + rss0 / 20 + 1024, "RSS back within 5% + 1 MiB of the warm-up");
    tap_check(alloc1 <= alloc0 + 2, "the kernel's TCP sockets back to the warm-up count");
    /* /proc/net/sockstat's "mem" counts every namespace's TCP buffers: other
     * programs move it, so it is reported, not checked. */
    printf("kernel TCP buffer pages (whole host): %ld after warm-up, %ld at the end\n", mem0,
           mem1);
    UTLS_tap_listener_free(tl);
    close(lfd);
    return tap_check_failures == 0 ? 0 : 1;
}
