/*
 * stats_dump.c: an LD_PRELOAD helper for tests/net/forged_segments.sh.
 *
 * examples/utls-stream logs only part of UTLS_STATS in its end line (no
 * headers_found, probe_limit_hits, ...) and not the connection's UTLS_LIMITS.
 * This module interposes UTLS_get_stats(): it calls the library's function
 * and, when $UTLS_STATS_DUMP names a file, writes every counter and every
 * limit of the connection there as one JSON object, with the process's CPU
 * time so far and peak RSS (getrusage; utls-stream calls it once, at the end).
 * It also interposes UTLS_BIO_tap_get_stats() (called once, at the end, too):
 * when $UTLS_TAPCHECK_DUMP names a file, the tap's validation counters
 * (UTLS_BIO_tap_get_check_stats) go there as JSON. The program's behaviour
 * does not change. Built by tests/net/CMakeLists.txt; not installed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <openssl/utls.h>

typedef int (*get_stats_fn)(const SSL *, UTLS_STATS *);
typedef int (*get_limits_fn)(const SSL *, UTLS_LIMITS *);

int UTLS_get_stats(const SSL *s, UTLS_STATS *st)
{
    get_stats_fn real = (get_stats_fn)dlsym(RTLD_NEXT, "UTLS_get_stats");
    get_limits_fn lim_fn = (get_limits_fn)dlsym(RTLD_DEFAULT, "UTLS_get_limits");
    const char *path = getenv("UTLS_STATS_DUMP");
    UTLS_LIMITS lim = {0};
    struct rusage ru = {0};
    FILE *f;
    int r;

    if (real == NULL)
        return 0;
    r = real(s, st);
    if (r != 1 || path == NULL || (f = fopen(path, "w")) == NULL)
        return r;
    if (lim_fn != NULL)
        lim_fn(s, &lim);
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f,
            "{\"records_in_order\":%llu,\"records_out_of_order\":%llu,\"records_skipped\":%llu,"
            "\"probes\":%llu,\"soft_failures\":%llu,\"headers_found\":%llu,\"fragments\":%llu,"
            "\"bytes_dropped\":%llu,\"probe_limit_hits\":%llu,\"ern_block_checks\":%llu,"
            "\"provider_searches\":%llu,\"decryptions_saved\":%llu,\"fallback\":%d,"
            "\"limits\":{\"max_bytes_held\":%zu,\"max_fragments\":%zu,\"max_window\":%llu,"
            "\"max_probes_per_record\":%zu,\"max_probes_per_kib\":%zu,\"max_ready_records\":%zu},"
            "\"cpu_user_ms\":%ld,\"cpu_sys_ms\":%ld,\"maxrss_kb\":%ld}\n",
            (unsigned long long)st->records_in_order, (unsigned long long)st->records_out_of_order,
            (unsigned long long)st->records_skipped, (unsigned long long)st->probes,
            (unsigned long long)st->soft_failures, (unsigned long long)st->headers_found,
            (unsigned long long)st->fragments, (unsigned long long)st->bytes_dropped,
            (unsigned long long)st->probe_limit_hits, (unsigned long long)st->ern_block_checks,
            (unsigned long long)st->provider_searches, (unsigned long long)st->decryptions_saved,
            (int)st->fallback, lim.max_bytes_held, lim.max_fragments,
            (unsigned long long)lim.max_window, lim.max_probes_per_record,
            lim.max_probes_per_kib, lim.max_ready_records,
            (long)ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000,
            (long)ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000, (long)ru.ru_maxrss);
    fclose(f);
    return r;
}

typedef int (*tap_stats_fn)(BIO *, UTLS_TAP_STATS *);
typedef int (*check_stats_fn)(BIO *, UTLS_TAP_CHECK_STATS *, size_t);

int UTLS_BIO_tap_get_stats(BIO *b, UTLS_TAP_STATS *out)
{
    tap_stats_fn real = (tap_stats_fn)dlsym(RTLD_NEXT, "UTLS_BIO_tap_get_stats");
    check_stats_fn chk = (check_stats_fn)dlsym(RTLD_DEFAULT, "UTLS_BIO_tap_get_check_stats");
    const char *path = getenv("UTLS_TAPCHECK_DUMP");
    UTLS_TAP_CHECK_STATS c;
    FILE *f;
    int r;

    if (real == NULL)
        return 0;
    r = real(b, out);
    if (r != 1 || path == NULL || chk == NULL || chk(b, &c, sizeof(c)) != 1
        || (f = fopen(path, "w")) == NULL)
        return r;
    fprintf(f,
            "{\"passed\":%llu,\"bad_checksum\":%llu,\"bad_flags\":%llu,\"out_of_window\":%llu,"
            "\"bad_ack\":%llu,\"paws\":%llu,\"checksum_unchecked\":%llu,"
            "\"checksum_by_device\":%llu}\n",
            (unsigned long long)c.passed, (unsigned long long)c.bad_checksum,
            (unsigned long long)c.bad_flags, (unsigned long long)c.out_of_window,
            (unsigned long long)c.bad_ack, (unsigned long long)c.paws,
            (unsigned long long)c.checksum_unchecked, (unsigned long long)c.checksum_by_device);
    fclose(f);
    return r;
}
