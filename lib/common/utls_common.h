/*
 * What every module of the uTLS runtime (lib/) shares: the default limits,
 * the hot/cold markers, error reporting and the clock. Public OpenSSL
 * headers only.
 */
#ifndef UTLS_LIB_COMMON_H
#define UTLS_LIB_COMMON_H

#include <stdint.h>

#include <openssl/ssl3.h>
#include <openssl/utls.h>

/* Default limits (UTLS_limits_default). Each bounds an attack; see utls.h. */
#define UTLS_DEFAULT_MAX_PROBES_PER_RECORD 64
/* 32 trial decryptions per KiB past a hole: an honest stream needs about one
 * per record (>= 1 per 16 KiB .. 1 per 22 bytes); an injector pays 1 KiB of
 * traffic for 32 failed trials of ~1 us each. */
#define UTLS_DEFAULT_MAX_PROBES_PER_KIB 32
/* A burst allowance for the probe budget, so that the first records after a
 * hole do not wait for the budget to build up. */
#define UTLS_PROBE_BUDGET_BURST 256
/* Verified records waiting to be read: bounds memory (each holds up to 16 KiB
 * of plaintext) when the application reads slower than records arrive. */
#define UTLS_DEFAULT_MAX_READY_RECORDS 64
/* Spare probe buffers (UTLS_SCRATCH_LEN bytes each) kept for reuse: bounds
 * the memory an idle connection keeps after a burst of out-of-order
 * records. */
#define UTLS_MAX_SPARE_BUFS 4
/* Scanner hits handled per feed call. */
#define UTLS_SCAN_BATCH 64
/* Plausible headers whose candidates all failed, kept to be tried again when
 * a record next to them verifies (its number then pins theirs exactly). The
 * oldest are forgotten first; forged headers cost at most this much memory
 * and, on each retry, the probe budget. */
#define UTLS_MAX_FAILED_HITS 64
/* Of a header's max_probes_per_record, this many are kept back for retries:
 * next to a new anchor its number is exact and one probe settles it. */
#define UTLS_RETRY_RESERVE 4

/*
 * UTLS_HOT marks the functions every in-order record passes through (the
 * record hooks, the segment BIO's read and push): the compiler keeps them
 * together (.text.hot), so that they share instruction cache lines instead of
 * evicting OpenSSL's own record path (docs/unordered.md, PERFORMANCE).
 * UTLS_COLD marks the rare paths split off them, UTLS_NOINLINE the paths
 * split off them that are not rare (so that the hot function stays small
 * enough to be inlined where it is called).
 */
#if defined(__GNUC__)
# define UTLS_HOT __attribute__((hot))
# define UTLS_COLD __attribute__((cold, noinline))
# define UTLS_NOINLINE __attribute__((noinline))
#else
# define UTLS_HOT
# define UTLS_COLD
# define UTLS_NOINLINE
#endif

/* One record: header + max ciphertext (the probes' scratch buffers). */
#define UTLS_SCRATCH_LEN (SSL3_RT_HEADER_LENGTH + SSL3_RT_MAX_ENCRYPTED_LENGTH + 256)

/* utls_raise puts |reason| (UTLS_R_*) with a formatted detail on the error
 * queue. */
void utls_raise(int reason, const char *fmt, ...);
/* utls_now_ns: CLOCK_MONOTONIC in nanoseconds. */
uint64_t utls_now_ns(void);

#endif
