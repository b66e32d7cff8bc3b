/*
 * uTLS event-loop readiness (docs/evloop.md): what a program that waits in
 * poll/select/epoll polls besides a tapped connection's TCP socket, and which
 * connections have records ready although their socket is not readable (a
 * record complete past a TCP hole). Included at the end of <openssl/utls.h>.
 *
 * The kernel never marks a socket readable for bytes held behind a hole, so a
 * program that calls SSL_read() only when poll() says the socket is readable
 * would read early records only after the retransmission. It also polls the
 * descriptor UTLS_evloop_get_fd() returns and calls SSL_read() when
 * UTLS_evloop_ready() says so. Programs that cannot be changed get the same
 * through the companion preload library libutls-evloop.so, which uses the
 * descriptor-level calls below.
 *
 * Every call here is thread-safe against another thread running SSL_read()
 * on the same connection: the tap's ring is drained under a per-tap lock and
 * readiness is a cheap test (nothing is decrypted by the poller).
 */
#ifndef OPENSSL_UTLS_EVLOOP_H
# define OPENSSL_UTLS_EVLOOP_H

# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/*
 * UTLS_evloop_get_fd returns the descriptor to poll for reading besides
 * |ssl|'s TCP socket (the tap's capture socket, which may be shared by many
 * connections), or -1 if |ssl| reads through no tap (then the socket alone
 * says when to read). The descriptor stays owned by the library and is valid
 * until SSL_free(|ssl|).
 */
int UTLS_evloop_get_fd(const SSL *ssl);

/*
 * UTLS_evloop_ready returns 1 if SSL_read() on |ssl| may deliver a record now
 * although its socket is not readable: a record verified past a hole is held
 * for the reader, or captured bytes past the hole wait to be verified. It
 * returns 0 otherwise (and for an SSL without a tap). Call it when the
 * descriptor of UTLS_evloop_get_fd() polls readable. A read after a 1 may
 * still find nothing (a spurious wake-up: the bytes completed no record); a
 * non-blocking SSL_read() then fails with SSL_ERROR_WANT_READ and nothing
 * else. Such wake-ups are counted (UTLS_evloop_get_wakeups) and bounded.
 */
int UTLS_evloop_ready(SSL *ssl);

/*
 * UTLS_evloop_generation returns 0 when no socket of the process is read
 * through a tap, else a number that changes whenever a tapped socket is added
 * or removed. One atomic load: an interposing library tests it before doing
 * any work, so that programs with nothing tapped pay nothing else.
 */
uint64_t UTLS_evloop_generation(void);

/*
 * UTLS_evloop_fd_get_capture_fd returns the descriptor to poll besides the TCP
 * socket |fd| when |fd| is read by an SSL through a tap, or -1 (not tapped,
 * closed, or a different socket now has that number).
 */
int UTLS_evloop_fd_get_capture_fd(int fd);

/*
 * UTLS_evloop_fd_ready is UTLS_evloop_ready() for the SSL that reads the
 * tapped TCP socket |fd|: 1 if ready, 0 if not or if |fd| is not tapped. If
 * |out_token| is not NULL it receives a number that changes whenever new
 * bytes past a hole were captured, for edge-triggered reporting.
 */
int UTLS_evloop_fd_ready(int fd, uint64_t *out_token);

/*
 * UTLS_evloop_get_wakeups stores in |*out_wakeups| how many times the
 * connection over tapped socket |fd| was reported ready for captured bytes
 * alone, and in |*out_spurious| how many reads after such a report delivered
 * no early record. Returns 1, or 0 if |fd| is not tapped (outputs untouched).
 */
int UTLS_evloop_get_wakeups(int fd, uint64_t *out_wakeups, uint64_t *out_spurious);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_EVLOOP_H */
