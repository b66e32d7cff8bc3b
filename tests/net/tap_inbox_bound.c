/*
 * tap_inbox_bound: what 1-byte segments sprayed at a connection whose
 * reader is not reading can make the process-wide tap hold, on loopback in
 * a network namespace of its own (tests/net/in_netns.sh runs it under
 * `unshare -n`). Real kernel TCP, the real capture; no TLS.
 *
 *   tap_inbox_bound COUNT
 *
 * One connection is tapped and its first byte read through the tap BIO;
 * then its reader stops. COUNT segments of one byte each, for the
 * connection's 4-tuple and far ahead of its read point, are sent from a raw
 * socket in batches; after each batch UTLS_tap_poll_ready() drains the ring
 * into the connections' inboxes, as an event loop's wake-up for another
 * connection would. Checks: every segment reached the capture (no ring
 * drop), the inbox stayed within its bound (UTLS_TAP_INBOX_MAX_BYTES, 4 MiB)
 * and refused the rest (inbox_drops), and the process's RSS grew by no more
 * than the inbox says it holds plus 2 MiB: the bound counts the memory a
 * segment really takes, not its one payload byte. A read through the tap
 * BIO then empties the inbox.
 * Prints one line per check; exits 0 if every check holds, 1 otherwise, 77
 * if it cannot run (not root).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/utls.h>

#include "tap_check.h"

#define INBOX_MAX_BYTES (4u << 20) /* UTLS_TAP_INBOX_MAX_BYTES */
#define BATCH 2000                 /* well under the ring's 8,192 frames */

/* poll_all drains the ring (the ready list it returns is not served: the
 * reader is not reading). */
static void poll_all(void)
{
    int ready[64];
    size_t num;

    do {
        if (!UTLS_tap_poll_ready(ready, 64, &num)) {
            ERR_print_errors_fp(stderr);
            exit(1);
        }
    } while (num == 64);
}

int main(int argc, char **argv)
{
    struct sockaddr_in addr, cli;
    socklen_t cl = sizeof(cli);
    UTLS_TAP_LISTENER *tl;
    UTLS_TAP_GLOBAL_STATS st0, st1, st2;
    int lfd, cfd, sfd, rfd;
    long count, i, rss0, rss1, grown_kb;
    unsigned char byte = 'x', got = 0, pkt[sizeof(struct iphdr) + sizeof(struct tcphdr) + 1];
    struct iphdr *ip = (struct iphdr *)pkt;
    struct tcphdr *tcp = (struct tcphdr *)(pkt + sizeof(*ip));
    BIO *b;
    char what[256];

    if (argc < 2 || (count = strtol(argv[1], NULL, 10)) <= 0) {
        fprintf(stderr, "usage: tap_inbox_bound COUNT\n");
        return 2;
    }
    if (geteuid() != 0) {
        printf("SKIP: needs root (AF_PACKET, raw socket)\n");
        return 77;
    }
    if ((lfd = tap_loopback_listener(16, &addr)) < 0)
        return 1;
    if ((tl = UTLS_tap_listen(lfd)) == NULL) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cfd < 0 || connect(cfd, (struct sockaddr *)&addr, sizeof(addr)) != 0
        || (sfd = accept(lfd, NULL, NULL)) < 0 || getsockname(cfd, (struct sockaddr *)&cli, &cl) != 0) {
        perror("connect");
        return 1;
    }
    if ((b = UTLS_BIO_new_tap(sfd, BIO_NOCLOSE)) == NULL) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    if (write(cfd, &byte, 1) != 1 || BIO_read(b, &got, 1) != 1 || got != byte) {
        fprintf(stderr, "tap_inbox_bound: the first byte did not come through the tap\n");
        return 1;
    }
    /* 1-byte segments from the client's 4-tuple, 64 MiB ahead of the read
     * point (the kernel drops them; the capture sees them first). The
     * checksum is left wrong: the hub queues a segment before its
     * connection's validator looks at it, which is what is measured. */
    if ((rfd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW)) < 0) {
        perror("raw socket");
        return 1;
    }
    memset(pkt, 0, sizeof(pkt));
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_TCP;
    ip->tot_len = htons(sizeof(pkt));
    ip->saddr = cli.sin_addr.s_addr;
    ip->daddr = addr.sin_addr.s_addr;
    tcp->source = cli.sin_port;
    tcp->dest = addr.sin_port;
    tcp->doff = 5;
    tcp->ack = 1;
    tcp->window = htons(1024);
    pkt[sizeof(pkt) - 1] = 'z';
    poll_all();
    st0 = tap_global_stats();
    rss0 = tap_rss_kb();
    for (i = 0; i < count; i++) {
        tcp->seq = htonl((uint32_t)(64u << 20) + (uint32_t)i * 2u);
        if (sendto(rfd, pkt, sizeof(pkt), 0, (struct sockaddr *)&addr, sizeof(addr))
            != (ssize_t)sizeof(pkt)) {
            perror("sendto");
            return 1;
        }
        if ((i + 1) % BATCH == 0)
            poll_all();
    }
    usleep(20000);
    poll_all();
    st1 = tap_global_stats();
    rss1 = tap_rss_kb();
    grown_kb = rss1 - rss0;
    printf("sprayed %ld: captured %llu, ring drops %llu, inbox %zu bytes, inbox drops %llu, "
           "RSS +%ld KiB\n",
           count, (unsigned long long)(st1.packets - st0.packets),
           (unsigned long long)(st1.ring_drops - st0.ring_drops), st1.inbox_bytes,
           (unsigned long long)(st1.inbox_drops - st0.inbox_drops), grown_kb);
    snprintf(what, sizeof(what), "the capture saw every sprayed segment (%llu of %ld)",
             (unsigned long long)(st1.packets - st0.packets), count);
    tap_check(st1.packets - st0.packets >= (uint64_t)count && st1.ring_drops == st0.ring_drops, what);
    snprintf(what, sizeof(what), "the inbox stayed within its bound (%zu <= %u bytes)",
             st1.inbox_bytes, INBOX_MAX_BYTES);
    tap_check(st1.inbox_bytes <= INBOX_MAX_BYTES, what);
    snprintf(what, sizeof(what), "the inbox refused the rest (%llu dropped)",
             (unsigned long long)(st1.inbox_drops - st0.inbox_drops));
    tap_check(st1.inbox_drops > st0.inbox_drops, what);
    snprintf(what, sizeof(what),
             "RSS grew by what the inbox says it holds (+%ld KiB <= %zu KiB + 2048 KiB)",
             grown_kb, st1.inbox_bytes / 1024);
    tap_check(rss0 > 0 && grown_kb <= (long)(st1.inbox_bytes / 1024) + 2048, what);
    /* The reader reads again: its drain takes the inbox (the validator
     * drops every sprayed segment: bad checksum). */
    if (write(cfd, &byte, 1) != 1)
        return 1;
    got = 0;
    tap_check(BIO_read(b, &got, 1) == 1 && got == byte, "the next byte still comes through the tap");
    st2 = tap_global_stats();
    snprintf(what, sizeof(what), "the read emptied the inbox (%zu bytes left)", st2.inbox_bytes);
    tap_check(st2.inbox_bytes == 0, what);
    BIO_free(b);
    UTLS_tap_listener_free(tl);
    close(rfd);
    close(cfd);
    close(sfd);
    close(lfd);
    return tap_check_failures == 0 ? 0 : 1;
}
