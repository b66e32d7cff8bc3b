/*
 * uharness.h: pieces shared by the in-process test and the interop relay:
 * self-describing messages (index + length + checksum), throwaway
 * certificates, and a check that a weak reference to the uTLS API resolved.
 */
#ifndef UTLS_TESTS_UHARNESS_H
#define UTLS_TESTS_UHARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/*-
 * A message is
 *   "uTLS" | index (u32 BE) | total length (u32 BE) | body | FNV-1a-64 (u64 BE)
 * where the body is a function of (index, position), so that a receiver can
 * tell a message's identity and integrity from its bytes alone.
 */
#define UH_MSG_MIN 20
#define UH_MSG_MAX 16384

/* uh_msg_build writes message |index| of |len| bytes (UH_MSG_MIN..UH_MSG_MAX)
 * to |out|. Returns 1, or 0 if |len| is out of range. */
int uh_msg_build(uint8_t *out, uint32_t index, size_t len);

/* uh_msg_check returns 1 if |msg|[0..len) is exactly one intact message and
 * sets |*out_index|; 0 otherwise. */
int uh_msg_check(const uint8_t *msg, size_t len, uint32_t *out_index);

/* uh_msg_peek_len returns the total length a message header claims, or 0 if
 * fewer than 12 bytes or no magic. */
size_t uh_msg_peek_len(const uint8_t *msg, size_t len);

/* uh_make_identity creates a throwaway self-signed certificate: ECDSA P-256
 * if |ec|, else RSA-2048. The caller owns both. Returns 1 or 0. */
int uh_make_identity(int ec, EVP_PKEY **out_key, X509 **out_cert);

/* uh_errors_to_stderr prints and clears OpenSSL's error queue. */
void uh_errors_to_stderr(const char *what);

/* uh_monotonic_ns: CLOCK_MONOTONIC in nanoseconds. */
uint64_t uh_monotonic_ns(void);

/* uh_libssl_path returns the path of the libssl.so.3 mapped into this process
 * (from /proc/self/maps), or "" if none. */
const char *uh_libssl_path(void);

/* uh_pid_maps_libssl returns the path of the libssl.so.3 mapped into |pid|
 * (or "" if none, or not readable yet) in |buf|. */
const char *uh_pid_maps_libssl(int pid, char *buf, size_t len);

#endif /* UTLS_TESTS_UHARNESS_H */
