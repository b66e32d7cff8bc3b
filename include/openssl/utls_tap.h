/*
 * uTLS: the process-wide tap (docs/tap.md). Included by <openssl/utls.h>.
 */
#ifndef OPENSSL_UTLS_TAP_H
# define OPENSSL_UTLS_TAP_H
# pragma once

# include <stddef.h>
# include <stdint.h>

# ifdef __cplusplus
extern "C" {
# endif

/*-
 * One tap per process
 * ===================
 *
 * A process holds one capture, whatever the number of tapped connections:
 * one AF_PACKET ring (16 MiB of kernel memory) for the segments that arrive
 * at the tapped local ports, one small control socket for the handshakes
 * this host sends, and a table that gives each segment to its connection by
 * 4-tuple. The kernel's filter tests a packet's port with a binary search
 * over the tapped ports, so a packet costs the same with 1 or 10,000
 * connections, and packets to other ports are rejected in the kernel.
 *
 * The capture needs CAP_NET_RAW only to be opened. A server opens it while
 * privileged (UTLS_tap_open(), UTLS_tap_listen(), or UTLS_MODE=tap at load
 * time), drops root, and every later connection is still tapped. A child of
 * fork() opens its own capture at once (prefork workers: each sees only its
 * own connections' segments).
 */

/*
 * UTLS_tap_open opens the process-wide tap now, if it is not open. Call it
 * before dropping privileges. Returns 1, or 0 with an error on the queue
 * (UTLS_R_TAP_PERMISSION without CAP_NET_RAW).
 */
int UTLS_tap_open(void);

/*
 * UTLS_tap_get_fd returns the descriptor that becomes readable when the
 * process-wide tap holds captured segments to hand out (one descriptor for
 * every tapped connection), or -1 if the tap is not open. An event loop polls
 * it next to its sockets and then calls UTLS_tap_poll_ready(). The tap owns
 * it: never close it.
 */
int UTLS_tap_get_fd(void);

/*
 * UTLS_tap_poll_ready hands the captured segments out to their connections
 * and writes to |out_fds| (at most |max_fds|) the sockets of the tapped
 * connections that received some since the last call, and their number to
 * |*out_num|. The program then reads those connections (SSL_read or
 * UTLS_read_record) as if their sockets were readable: a record past a hole
 * may be ready; a read that finds none returns SSL_ERROR_WANT_READ. Sockets
 * not written because |max_fds| was reached are returned by the next call.
 * Thread-safe. Returns 1, or 0 with an error on the queue (NULL arguments).
 */
int UTLS_tap_poll_ready(int *out_fds, size_t max_fds, size_t *out_num);

/* UTLS_TAP_GLOBAL_STATS describes the process-wide tap. */
typedef struct utls_tap_global_stats_st {
    int open;                /* 1 if the capture is open */
    int watch;               /* 1 if every port's handshakes are watched (UTLS_MODE=tap) */
    size_t flows;            /* 4-tuples in the table */
    size_t attached;         /* of which a tap BIO of this process holds */
    size_t unattached;       /* handshakes whose ISN waits for a tap BIO */
    size_t ports;            /* local ports in the kernel filters */
    size_t filter_ports;     /* of which in the control filter */
    size_t inbox_bytes;      /* memory held by captured segments waiting for
                                their readers (payload and per-segment record) */
    uint64_t kernel_bytes;   /* kernel memory the capture may hold, at most */
    uint64_t packets;        /* segments taken from the ring */
    uint64_t foreign;        /* of which for no connection of this process */
    uint64_t malformed;      /* unparseable */
    uint64_t inbox_drops;    /* dropped: a reader's inbox was full */
    uint64_t ring_drops;     /* the kernel dropped: the ring was full */
    uint64_t control_packets; /* handshake and teardown headers read */
    uint64_t isn_from_kernel; /* ISNs read from what this host sent */
    uint64_t isn_ambiguous;  /* flows with two different SYN-ACKs (watch mode) */
    uint64_t bad_checksum;   /* SYN-ACKs ignored for a wrong TCP checksum */
    uint64_t evicted;        /* unattached flows forgotten (table full) */
    uint64_t filter_rebuilds; /* times the kernel filters were replaced */
    /* Added after filter_rebuilds (an older, shorter struct is filled up to
       its size): */
    int isn_sockops;         /* 1 if the ISNs come from the kernel's sock_ops
                                record, 0 if the control socket captures them */
    uint64_t isn_from_sockops; /* ISNs read from the sock_ops record */
} UTLS_TAP_GLOBAL_STATS;

/*
 * UTLS_tap_get_global_stats copies the process-wide tap's state and counters
 * into |*out_stats|; |stats_size| is sizeof(UTLS_TAP_GLOBAL_STATS) (or that of
 * an older version of it, which ended at filter_rebuilds: that much is filled).
 * Returns 1, or 0 with an error on the queue.
 */
int UTLS_tap_get_global_stats(UTLS_TAP_GLOBAL_STATS *out_stats, size_t stats_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_TAP_H */
