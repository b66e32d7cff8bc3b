/* What tests/net's C programs of the tap share (tap_check.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "tap_check.h"

int tap_check_failures;

void tap_check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    tap_check_failures += !ok;
}

long tap_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = strtol(line + 6, NULL, 10);
    fclose(f);
    return v;
}

int tap_loopback_listener(int backlog, struct sockaddr_in *out_addr)
{
    socklen_t al = sizeof(*out_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    memset(out_addr, 0, sizeof(*out_addr));
    out_addr->sin_family = AF_INET;
    out_addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0
        || bind(fd, (struct sockaddr *)out_addr, sizeof(*out_addr)) != 0
        || listen(fd, backlog) != 0
        || getsockname(fd, (struct sockaddr *)out_addr, &al) != 0) {
        perror("listen");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

UTLS_TAP_GLOBAL_STATS tap_global_stats(void)
{
    UTLS_TAP_GLOBAL_STATS st;

    if (!UTLS_tap_get_global_stats(&st, sizeof(st))) {
        ERR_print_errors_fp(stderr);
        exit(1);
    }
    return st;
}
