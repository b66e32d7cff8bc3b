/*
 * Copies between a structure in the caller's memory, laid out by the header
 * the caller was built with, and the library's own: the size-checked (_ex)
 * functions of the UTLS_0.2 node (docs/api-conventions.md, "Caller-allocated
 * structures"). A structure only ever grows at its end, so the common prefix
 * of two sizes is the same fields in both. Pure C, no OpenSSL (core/).
 */
#ifndef UTLS_STRUCTSIZE_H
#define UTLS_STRUCTSIZE_H

#include <stddef.h>

/*
 * The largest size a caller may pass. No structure of the API comes near
 * it; a larger value is a length passed where a sizeof belongs, and would
 * make utls_struct_in read that much of the caller's memory.
 */
#define UTLS_STRUCT_MAX_SIZE ((size_t)4096)

/*
 * utls_struct_size_ok returns 1 if |caller_size| is a size the library
 * accepts for a structure whose first published layout (UTLS_0.1) was
 * |first_size| bytes: at least that, at most UTLS_STRUCT_MAX_SIZE. A smaller
 * size cannot hold the fields every caller has; 0 otherwise.
 */
int utls_struct_size_ok(size_t caller_size, size_t first_size);

/*
 * utls_struct_out copies the library's |src| (|src_size| bytes) to the
 * caller's |dst| (|dst_size| bytes): the common prefix, and zeros for the
 * caller's bytes past |src_size| (fields of a newer header that this library
 * does not fill read as 0).
 */
void utls_struct_out(void *dst, size_t dst_size, const void *src, size_t src_size);

/*
 * utls_struct_in copies the caller's |src| (|src_size| bytes) over the
 * library's |dst| (|dst_size| bytes), which the caller has filled with
 * defaults: fields the caller's older header lacks keep them. Returns 1, or
 * 0 without writing if a byte of |src| past |dst_size| is not zero: a
 * setting of a newer header that this library does not know cannot be
 * honoured, so it is refused rather than ignored.
 */
int utls_struct_in(void *dst, size_t dst_size, const void *src, size_t src_size);

#endif
