/*
 * utls-version: the smallest program that uses the uTLS API. It prints the
 * uTLS release and the OpenSSL base of the libssl it runs with, and exits 1
 * if that libssl is not the fork or is older than the header it was built with.
 *
 *   cc utls-version.c $(pkg-config --cflags --libs utls) -o utls-version
 */
#include <stdio.h>

#include <openssl/ssl.h>
#include <openssl/utls.h>

int main(void)
{
    unsigned long loaded = UTLS_version_num();

    printf("%s\n", UTLS_version(UTLS_FULL_VERSION));
    printf("libssl base: OpenSSL %s, libcrypto: %s\n", UTLS_version(UTLS_BASE_VERSION),
           OpenSSL_version(OPENSSL_VERSION));
    if (loaded < UTLS_VERSION_NUMBER) {
        fprintf(stderr, "utls-version: built with uTLS %#lx but runs with %#lx\n",
                (unsigned long)UTLS_VERSION_NUMBER, loaded);
        return 1;
    }
    return 0;
}
