/*
 * Version reporting: the first call of the uTLS API, and the proof that our
 * sources are compiled into the fork and exported under their own node.
 */
#include <openssl/opensslv.h>
#include <openssl/utls.h>

#define UTLS_STR2(x) #x
#define UTLS_STR(x) UTLS_STR2(x)
#define UTLS_VERSION_STR                                                                           \
    UTLS_STR(UTLS_VERSION_MAJOR) "." UTLS_STR(UTLS_VERSION_MINOR) "." UTLS_STR(UTLS_VERSION_PATCH)

/* OPENSSL_VERSION_STR comes from the pinned tree's own opensslv.h. */
const char *UTLS_version(int which)
{
    switch (which) {
    case UTLS_VERSION_TEXT:
        return UTLS_VERSION_STR;
    case UTLS_BASE_VERSION:
        return OPENSSL_VERSION_STR;
    case UTLS_FULL_VERSION:
        return "uTLS " UTLS_VERSION_STR " (OpenSSL " OPENSSL_VERSION_STR " libssl fork)";
    default:
        return NULL;
    }
}

unsigned long UTLS_version_num(void)
{
    return UTLS_VERSION_NUMBER;
}

unsigned long UTLS_base_version_num(void)
{
    return OPENSSL_VERSION_NUMBER;
}
