/*
 * <openssl/utls_version.h>: the library's own version.
 * Part of the uTLS API; <openssl/utls.h> includes every part. Exported under
 * the symbol version nodes of openssl-patch/libssl-utls.map.
 */
#ifndef OPENSSL_UTLS_VERSION_H
# define OPENSSL_UTLS_VERSION_H

# include <stddef.h>
# include <stdint.h>
# include <openssl/ssl.h>

# ifdef __cplusplus
extern "C" {
# endif

/* The uTLS release, as numbers and as one integer 0xMMNNPP00. */
# define UTLS_VERSION_MAJOR 0
# define UTLS_VERSION_MINOR 1
# define UTLS_VERSION_PATCH 0
# define UTLS_VERSION_NUMBER \
    ((UTLS_VERSION_MAJOR << 24) | (UTLS_VERSION_MINOR << 16) | (UTLS_VERSION_PATCH << 8))

/* What UTLS_version() describes. */
# define UTLS_VERSION_TEXT 0 /* "0.1.0" */
# define UTLS_BASE_VERSION 1 /* the upstream OpenSSL release, "3.0.22" */
# define UTLS_FULL_VERSION 2 /* "uTLS 0.1.0 (OpenSSL 3.0.22 libssl fork)" */

/*
 * UTLS_version returns a static, NUL-terminated string described by |which|
 * (one of the UTLS_*_VERSION values above), or NULL for any other value. The
 * string is owned by the library and must not be freed. UTLS_BASE_VERSION is
 * the upstream OpenSSL release whose ssl/ sources were compiled into this
 * libssl, which need not be the release of the libcrypto it runs with.
 */
const char *UTLS_version(int which);

/*
 * UTLS_version_num returns UTLS_VERSION_NUMBER of the library actually
 * loaded, so that a program can compare it with the header it was built with.
 */
unsigned long UTLS_version_num(void);

/*
 * UTLS_base_version_num returns OPENSSL_VERSION_NUMBER of the upstream
 * release the fork's libssl was built from (0x30000160 for 3.0.22).
 */
unsigned long UTLS_base_version_num(void);

# ifdef __cplusplus
}
# endif
#endif /* OPENSSL_UTLS_VERSION_H */
