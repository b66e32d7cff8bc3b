/*
 * example_util.h: the plumbing the streaming examples (utls-stream,
 * utls-substreams) share: messages and exit on error, clocks, little-endian
 * fields, which libssl is loaded, addresses, sockets, a throwaway
 * certificate and the --ready file. Nothing here is uTLS API: it compiles
 * against stock OpenSSL 3.0 too (the examples' -stock builds). Read the
 * examples for the API; read this file only for the plumbing.
 */
#ifndef UTLS_EXAMPLE_UTIL_H
#define UTLS_EXAMPLE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

/* example_name is the program name that die() and note() put before every
 * message; the example sets it first thing in main(). */
extern const char *example_name;

/* example_quiet: when nonzero note() prints nothing (the --quiet option). */
extern int example_quiet;

/* die prints "NAME: message" and OpenSSL's error queue to stderr and exits
 * with status 2. It does not return. */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* note prints "NAME: message" to stderr unless example_quiet is set. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* now_ns returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* real_minus_mono_ns returns CLOCK_REALTIME - CLOCK_MONOTONIC in nanoseconds
 * (logged so that two hosts' monotonic times can be put on one axis). */
int64_t real_minus_mono_ns(void);

/* sleep_until sleeps until CLOCK_MONOTONIC time |t| (nanoseconds), through
 * signals. */
void sleep_until(uint64_t t);

/* put32/put64 write |v| little-endian at |p|; get32/get64 read it back. */
void put32(unsigned char *p, uint32_t v);
void put64(unsigned char *p, uint64_t v);
uint32_t get32(const unsigned char *p);
uint64_t get64(const unsigned char *p);

/* loaded_libssl returns the real path of the libssl mapped into this process
 * (the one SSL_read comes from), or "?" if it cannot tell. The string is
 * static: valid until the next call. */
const char *loaded_libssl(void);

/* symbol_loaded returns 1 if a library of this process exports |name| (how
 * an example tells the uTLS fork from a stock libssl at run time), else 0. */
int symbol_loaded(const char *name);

/* parse_addr resolves "HOST:PORT" (numeric port; HOST may be "[v6]" or
 * empty for the wildcard) for |socktype| into |ss|/|sl|; dies if it cannot. */
void parse_addr(const char *s, int socktype, struct sockaddr_storage *ss, socklen_t *sl);

/* listen_socket returns a socket of |type| bound to |ss| (SO_REUSEADDR) and,
 * for SOCK_STREAM, listening; the caller owns it. |addr| names the address
 * in error messages. Dies on failure. */
int listen_socket(int type, const struct sockaddr_storage *ss, socklen_t sl, const char *addr);

/* listen_tcp returns a listening TCP socket bound to "HOST:PORT" |addr|
 * (parse_addr, then listen_socket); the caller owns it. Dies on failure. */
int listen_tcp(const char *addr);

/* connect_retry returns a socket of |type| connected to |ss|, retrying a
 * refused or unreachable TCP connect for 15 s (the receiver may still be
 * starting); TCP sockets get TCP_NODELAY and, if |cc| is not NULL, that
 * congestion control. The caller owns the socket. Dies on failure. */
int connect_retry(int type, const struct sockaddr_storage *ss, socklen_t sl, const char *addr,
                  const char *cc);

/* accept_tcp accepts one connection on the listening TCP socket |lfd| and
 * returns it with TCP_NODELAY set; the caller owns it. Dies on failure. */
int accept_tcp(int lfd);

/* accept_tls gives the server |ssl| the BIO |bio| (NULL: a new socket BIO
 * over the TCP socket |fd|, which it then owns), runs the handshake and
 * notes the version and cipher as "recv |what|: handshake done". Dies if the
 * BIO cannot be made or the handshake fails. */
void accept_tls(SSL *ssl, BIO *bio, int fd, const char *what);

/* new_tls13_server returns a TLS 1.3-only server SSL with a fresh
 * self-signed certificate for |cn| (make_cert) and no BIO yet; |*out_ctx|
 * gets its context. The caller frees both. Dies on failure. */
SSL *new_tls13_server(const char *cn, SSL_CTX **out_ctx);

/* wait_readable returns 1 if |fd| becomes readable within |ms| ms, else 0. */
int wait_readable(int fd, long ms);

/* make_cert gives |ctx| a fresh self-signed P-256 certificate with common
 * name |cn| and its key (the context takes its own references). Dies on
 * failure. */
void make_cert(SSL_CTX *ctx, const char *cn);

/* touch_ready writes the port |fd| is bound to (useful with port 0) to the
 * file |path|, atomically (a temporary file renamed): the file appears
 * complete or not at all. Does nothing if |path| is NULL; dies on failure. */
void touch_ready(const char *path, int fd);

/* example_opt_type: what an option stores through example_option.dest. */
enum example_opt_type {
    EXAMPLE_OPT_FLAG,   /* int: set to 1; the option takes no value */
    EXAMPLE_OPT_STR,    /* const char *: the value (points into argv) */
    EXAMPLE_OPT_LONG,   /* long: the value, a whole decimal number */
    EXAMPLE_OPT_DOUBLE, /* double: the value, a decimal number */
};

/* example_option: one command-line option: its name ("--count"), type and
 * where its value goes. */
typedef struct {
    const char *name;
    enum example_opt_type type;
    void *dest;
} example_option;

/* EXAMPLE_STREAM_OPTIONS(o, mode): the example_option entries both
 * streaming examples take, for their options struct |o| (fields of these
 * names and types) and the --mode string |mode|. */
#define EXAMPLE_STREAM_OPTIONS(o, mode)                                                            \
    {"--skip-without-tap", EXAMPLE_OPT_FLAG, &(o).skip_without_tap},                               \
        {"--quiet", EXAMPLE_OPT_FLAG, &(o).quiet}, {"--mode", EXAMPLE_OPT_STR, &(mode)},           \
        {"--listen", EXAMPLE_OPT_STR, &(o).addr}, {"--connect", EXAMPLE_OPT_STR, &(o).addr},       \
        {"--count", EXAMPLE_OPT_LONG, &(o).count}, {"--size", EXAMPLE_OPT_LONG, &(o).size},        \
        {"--interval", EXAMPLE_OPT_DOUBLE, &(o).interval_ms},                                      \
        {"--out", EXAMPLE_OPT_STR, &(o).out}, {"--ready", EXAMPLE_OPT_STR, &(o).ready},            \
        {"--require", EXAMPLE_OPT_STR, &(o).require}, {"--cc", EXAMPLE_OPT_STR, &(o).cc},          \
        {"--timeout", EXAMPLE_OPT_LONG, &(o).timeout_s}

/* parse_role returns 1 for "send", 0 for "recv"; calls |usage| (which must
 * not return) for anything else, NULL included. */
int parse_role(const char *arg, void (*usage)(void));

/* parse_choice returns the index of |arg| in |names| (|num_names|
 * entries); calls |usage|, which must not return, if it is none of them. */
int parse_choice(const char *arg, const char *const *names, size_t num_names, void (*usage)(void));

/* parse_options stores argv[first..argc-1] through |opts| (|num_opts|
 * entries). An unknown option, a missing value or a number that is not one
 * calls |usage|, which must not return. The strings stored point into argv. */
void parse_options(int argc, char **argv, int first, const example_option *opts, size_t num_opts,
                   void (*usage)(void));

/* parse_receiver_options parses argv[first..argc-1] of a receiver that
 * takes one connection: --listen ADDR:PORT into |*out_addr|, --ready FILE
 * into |*out_ready|, --count N and --size S into |*out_count| and
 * |*out_size| (each left as it was when not given). Anything else calls
 * |usage|, which must not return; the caller checks the values. */
void parse_receiver_options(int argc, char **argv, int first, const char **out_addr,
                            const char **out_ready, long *out_count, long *out_size,
                            void (*usage)(void));

/* check_require dies unless the loaded libssl matches |require| ("fork":
 * the uTLS fork, |is_fork| nonzero; "stock": not the fork; NULL: either), or
 * if |stock_build| is set and the fork is loaded anyway (an example built
 * against stock OpenSSL must not run on the fork unnoticed). */
void check_require(const char *require, int is_fork, int stock_build);

/* start_log ignores SIGPIPE, arms alarm(|timeout_s|) when it is positive (a
 * hung network must not hang a test) and returns the JSON log: stdout when
 * |path| is NULL, else |path| opened for writing (the caller closes it with
 * end_log). Dies if it cannot open |path|. */
FILE *start_log(const char *path, long timeout_s);

/* end_log closes |logf| unless it is stdout. */
void end_log(FILE *logf);

/* record_log: a receiver's exactly-once bookkeeping of the records it was
 * given, |seen| one byte per record index (the caller allocates it), and the
 * counts of first deliveries, repeats and records whose payload was wrong. */
typedef struct {
    unsigned char *seen;
    long num_ok, num_dup, num_bad;
} record_log;

/* record_log_add counts one received record in |rl| and writes its JSON line
 * to |logf|: |payload_ok| 0 (a bad record of |len| bytes), a repeat of |idx|,
 * or its first delivery (marked in |rl->seen|, with |extra|, "" or
 * ",\"key\":value...", in its line). |send_ns| and |recv_ns| are the times
 * carried in the payload and of arrival. Returns 1 for a first delivery. */
int record_log_add(record_log *rl, FILE *logf, int payload_ok, uint32_t idx, size_t len,
                   uint64_t send_ns, uint64_t recv_ns, const char *extra);

/* count_open_fds returns how many file descriptors the process has open
 * (the entries of /proc/self/fd, less the one reading it), or -1 if that
 * directory cannot be read: what leak checks compare before and after. */
long count_open_fds(void);

/* drain_until_closed shuts down the write side of the TCP socket |fd| and
 * reads and discards into |buf| (|buf_len| bytes) until the peer closes, an
 * error, or 30 s without data: the sender's last records are then not cut off
 * by a reset when it closes. */
void drain_until_closed(int fd, void *buf, size_t buf_len);

/* frame_take cuts an ordered byte stream into messages of |size| bytes, as
 * a TLS receiver without uTLS must (the stream does not keep record
 * boundaries): it moves bytes from |buf|[|*pos|..|len|) into |msg|, which
 * holds |*have| bytes of the current message, advancing both. Returns 1 when
 * |msg| holds a whole message (|*have| is then 0 again for the next), 0 when
 * |buf| is used up first. */
int frame_take(unsigned char *msg, size_t *have, size_t size, const unsigned char *buf,
               size_t len, size_t *pos);

#endif /* UTLS_EXAMPLE_UTIL_H */
