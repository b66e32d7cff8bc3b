/*
 * utls_tapcheck.h: what the tap's validation of captured segments rejected
 * (docs/tap-threats.md). Part of <openssl/utls.h>; it may also be included
 * alone.
 */
#ifndef OPENSSL_UTLS_TAPCHECK_H
# define OPENSSL_UTLS_TAPCHECK_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/bio.h>

# ifdef __cplusplus
extern "C" {
# endif

/*
 * UTLS_TAP_CHECK_STATS counts the verdicts on a tap's captured segments with
 * payload (pure ACKs are not checked). Only |passed| segments may enter the
 * out-of-order store; the others are what the local kernel's TCP drops too.
 * Fields are only ever appended.
 */
typedef struct utls_tap_check_stats_st {
    uint64_t passed;
    uint64_t bad_checksum;      /* TCP checksum wrong (pseudo-header included) */
    uint64_t bad_flags;         /* data without ACK, or with SYN or RST */
    uint64_t out_of_window;     /* starts past the receive window */
    uint64_t bad_ack;           /* acknowledges unsent data, or far too old */
    uint64_t paws;              /* timestamp older than the newest accepted */
    uint64_t checksum_unchecked; /* CHECKSUM_PARTIAL: made on this host */
    uint64_t checksum_by_device; /* verified by the device already */
} UTLS_TAP_CHECK_STATS;

/*
 * UTLS_BIO_tap_get_check_stats copies the first |stats_size| bytes of a tap
 * BIO's validation counters to |out_stats| (pass sizeof(UTLS_TAP_CHECK_STATS);
 * a program built against an older, shorter struct gets its prefix). Returns
 * 1, or 0 if |b| is not a tap BIO, |out_stats| is NULL or |stats_size| is
 * larger than this library's struct.
 */
int UTLS_BIO_tap_get_check_stats(BIO *b, UTLS_TAP_CHECK_STATS *out_stats, size_t stats_size);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_TAPCHECK_H */
