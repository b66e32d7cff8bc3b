/*
 * The size-checked (_ex) forms of the functions that fill or read a
 * structure in the caller's memory (symbol version node UTLS_0.2). Each
 * takes the caller's sizeof, so that a structure can grow at its end in a
 * later release: a caller built against an older header passes the older
 * size and gets exactly the fields it knows; one built against a newer
 * header reads zeros in the fields this library does not fill, and is
 * refused if it sets one this library does not know (core/src/structsize.c,
 * docs/api-conventions.md).
 *
 * The UTLS_0.1 forms read and write the layouts of 0.1 (the sizes below),
 * today the whole structures. The assertions hold that: the day one of these
 * structures grows, its 0.1 function must copy only its first
 * UTLS_*_SIZE_0_1 bytes (utls_struct_out), and the assertion is updated with
 * it.
 */
#include <stddef.h>
#include <string.h>

#include "common/utls_common.h"
#include "utls/structsize.h"

/* The sizes of the structures in UTLS_0.1 (tests/abi/utls-layout.txt). */
#define UTLS_STATS_SIZE_0_1 ((size_t)128)
#define UTLS_LIMITS_SIZE_0_1 ((size_t)48)
#define UTLS_TAP_STATS_SIZE_0_1 ((size_t)48)
#define UTLS_SCHED_CONFIG_SIZE_0_1 ((size_t)40)
#define UTLS_SCHED_STATS_SIZE_0_1 ((size_t)184)
#define UTLS_TCP_INFO_SIZE_0_1 ((size_t)136)
#define UTLS_STREAM_STATS_SIZE_0_1 ((size_t)56)
#define UTLS_UCOBS_STATS_SIZE_0_1 ((size_t)112)

_Static_assert(sizeof(UTLS_STATS) == UTLS_STATS_SIZE_0_1, "UTLS_STATS grew: see above");
_Static_assert(sizeof(UTLS_LIMITS) == UTLS_LIMITS_SIZE_0_1, "UTLS_LIMITS grew: see above");
_Static_assert(sizeof(UTLS_TAP_STATS) == UTLS_TAP_STATS_SIZE_0_1,
               "UTLS_TAP_STATS grew: see above");
_Static_assert(sizeof(UTLS_SCHED_CONFIG) == UTLS_SCHED_CONFIG_SIZE_0_1,
               "UTLS_SCHED_CONFIG grew: see above");
_Static_assert(sizeof(UTLS_SCHED_STATS) == UTLS_SCHED_STATS_SIZE_0_1,
               "UTLS_SCHED_STATS grew: see above");
_Static_assert(sizeof(UTLS_TCP_INFO) == UTLS_TCP_INFO_SIZE_0_1, "UTLS_TCP_INFO grew: see above");
_Static_assert(sizeof(UTLS_STREAM_STATS) == UTLS_STREAM_STATS_SIZE_0_1,
               "UTLS_STREAM_STATS grew: see above");
/* UTLS_UCOBS_STATS ends with its UTLS_TAP_STATS, so that the two grow
 * together at the end (docs/ucobs.md): new uCOBS counters never follow it. */
_Static_assert(sizeof(UTLS_UCOBS_STATS) == UTLS_UCOBS_STATS_SIZE_0_1,
               "UTLS_UCOBS_STATS grew: see above");
_Static_assert(offsetof(UTLS_UCOBS_STATS, tap) + sizeof(UTLS_TAP_STATS) == sizeof(UTLS_UCOBS_STATS),
               "UTLS_UCOBS_STATS.tap must stay its last member");

/* size_ok checks the caller's |size| against the structure's 0.1 size, and
 * says why on the error queue when it does not fit. */
static int size_ok(const char *type, size_t size, size_t first_size)
{
    if (utls_struct_size_ok(size, first_size))
        return 1;
    utls_raise(UTLS_R_STRUCT_SIZE, "%s: size %zu (at least %zu, at most %zu)", type, size,
               first_size, UTLS_STRUCT_MAX_SIZE);
    return 0;
}

/* read_in checks the caller's |size| and copies its structure over |dst|,
 * which holds the defaults; 0 with the reason queued for a size it does not
 * accept or a field this library does not know. */
static int read_in(const char *type, void *dst, size_t dst_size, size_t first_size,
                   const void *src, size_t size)
{
    if (!size_ok(type, size, first_size))
        return 0;
    if (utls_struct_in(dst, dst_size, src, size))
        return 1;
    utls_raise(UTLS_R_STRUCT_SIZE, "%s: a field past this library's %zu bytes is set", type,
               dst_size);
    return 0;
}

/* The getters share one shape: check the size, fill the library's own
 * structure with the 0.1 function, copy out what the caller has room for. */
#define GET_EX(type, call, out, size)                                                              \
    do {                                                                                           \
        type full_;                                                                                \
        if (!size_ok(#type, (size), type##_SIZE_0_1) || (out) == NULL || !(call))                 \
            return 0;                                                                              \
        utls_struct_out((out), (size), &full_, sizeof(full_));                                     \
        return 1;                                                                                  \
    } while (0)

int UTLS_get_stats_ex(const SSL *s, UTLS_STATS *out_stats, size_t stats_size)
{
    GET_EX(UTLS_STATS, UTLS_get_stats(s, &full_), out_stats, stats_size);
}

int UTLS_get_limits_ex(const SSL *s, UTLS_LIMITS *out_limits, size_t limits_size)
{
    GET_EX(UTLS_LIMITS, UTLS_get_limits(s, &full_), out_limits, limits_size);
}

int UTLS_limits_default_ex(UTLS_LIMITS *out_limits, size_t limits_size)
{
    GET_EX(UTLS_LIMITS, (UTLS_limits_default(&full_), 1), out_limits, limits_size);
}

int UTLS_BIO_tap_get_stats_ex(BIO *b, UTLS_TAP_STATS *out_stats, size_t stats_size)
{
    GET_EX(UTLS_TAP_STATS, UTLS_BIO_tap_get_stats(b, &full_), out_stats, stats_size);
}

int UTLS_sched_config_default_ex(UTLS_SCHED_CONFIG *out_config, size_t config_size)
{
    GET_EX(UTLS_SCHED_CONFIG, (UTLS_sched_config_default(&full_), 1), out_config, config_size);
}

int UTLS_sched_get_stats_ex(const UTLS_SCHED *sch, UTLS_SCHED_STATS *out_stats, size_t stats_size)
{
    GET_EX(UTLS_SCHED_STATS, UTLS_sched_get_stats(sch, &full_), out_stats, stats_size);
}

int UTLS_tcp_get_info_ex(int fd, UTLS_TCP_INFO *out_info, size_t info_size)
{
    GET_EX(UTLS_TCP_INFO, UTLS_tcp_get_info(fd, &full_), out_info, info_size);
}

int UTLS_sched_get_tcp_info_ex(UTLS_SCHED *sch, UTLS_TCP_INFO *out_info, size_t info_size)
{
    GET_EX(UTLS_TCP_INFO, UTLS_sched_get_tcp_info(sch, &full_), out_info, info_size);
}

int UTLS_stream_get_stats_ex(const SSL *s, UTLS_STREAM_STATS *out_stats, size_t stats_size)
{
    GET_EX(UTLS_STREAM_STATS, UTLS_stream_get_stats(s, &full_), out_stats, stats_size);
}

int UTLS_ucobs_get_stats_ex(const UTLS_UCOBS *u, UTLS_UCOBS_STATS *out_stats, size_t stats_size)
{
    GET_EX(UTLS_UCOBS_STATS, UTLS_ucobs_get_stats(u, &full_), out_stats, stats_size);
}

int UTLS_set_limits_ex(SSL *s, const UTLS_LIMITS *limits, size_t limits_size)
{
    UTLS_LIMITS full;

    if (limits == NULL)
        return UTLS_set_limits(s, NULL);
    UTLS_limits_default(&full);
    if (!read_in("UTLS_LIMITS", &full, sizeof(full), UTLS_LIMITS_SIZE_0_1, limits, limits_size))
        return 0;
    return UTLS_set_limits(s, &full);
}

UTLS_SCHED *UTLS_sched_new_ex(SSL *s, const UTLS_SCHED_CONFIG *config, size_t config_size)
{
    UTLS_SCHED_CONFIG full;

    if (config == NULL)
        return UTLS_sched_new(s, NULL);
    UTLS_sched_config_default(&full);
    if (!read_in("UTLS_SCHED_CONFIG", &full, sizeof(full), UTLS_SCHED_CONFIG_SIZE_0_1, config,
                 config_size))
        return NULL;
    return UTLS_sched_new(s, &full);
}
