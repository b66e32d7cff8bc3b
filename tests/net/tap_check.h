/*
 * What tests/net's C programs of the process-wide tap share (tap_churn.c,
 * tap_inbox_bound.c): one line per check, the process's RSS and the tap's
 * global counters.
 */
#ifndef UTLS_TESTS_NET_TAP_CHECK_H
#define UTLS_TESTS_NET_TAP_CHECK_H

#include <netinet/in.h>
#include <openssl/utls.h>

/* The checks that failed so far. */
extern int tap_check_failures;

/* tap_check prints "ok: WHAT" or "FAIL: WHAT" and counts a failure. */
void tap_check(int ok, const char *what);

/* tap_rss_kb: this process's VmRSS in KiB, or -1. */
long tap_rss_kb(void);

/* tap_loopback_listener: a TCP socket listening on 127.0.0.1 at a port the
 * kernel picks, whose address goes to |*out_addr|; -1 (with perror) if it
 * cannot be made. */
int tap_loopback_listener(int backlog, struct sockaddr_in *out_addr);

/* tap_global_stats: UTLS_tap_get_global_stats(), or exit(1) with the
 * error queue printed. */
UTLS_TAP_GLOBAL_STATS tap_global_stats(void);

#endif
