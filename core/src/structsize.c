/*
 * Size-checked copies of caller-allocated structures (utls/structsize.h).
 */
#include <string.h>

#include "utls/structsize.h"

int utls_struct_size_ok(size_t caller_size, size_t first_size)
{
    return caller_size >= first_size && caller_size <= UTLS_STRUCT_MAX_SIZE;
}

void utls_struct_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    size_t n = dst_size < src_size ? dst_size : src_size;

    memcpy(dst, src, n);
    if (dst_size > n) {
        memset((unsigned char *)dst + n, 0, dst_size - n);
    }
}

int utls_struct_in(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    const unsigned char *p = src;
    size_t i;

    for (i = dst_size; i < src_size; i++) {
        if (p[i] != 0) {
            return 0;
        }
    }
    memcpy(dst, src, dst_size < src_size ? dst_size : src_size);
    return 1;
}
