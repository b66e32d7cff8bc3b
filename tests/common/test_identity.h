/*
 * test_identity.h: what every TLS test program needs and that uses only
 * OpenSSL's public API, so that programs linked against the system libssl
 * (tests/sched's stock receiver, tests/parity) share it with those linked
 * against the fork: a throwaway key and self-signed certificate, and the
 * libssl.so.3 really mapped into a process. Header-only (static inline), so
 * that each program compiles it with its own flags (the fuzz targets'
 * sanitizers) and nothing is linked twice.
 */
#ifndef UTLS_TEST_IDENTITY_H
#define UTLS_TEST_IDENTITY_H

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/*
 * ti_make_identity makes a key (P-256 if |ec|, else RSA-2048) and a
 * self-signed X.509v3 certificate for |cn|, valid from an hour ago for a day.
 * Returns 1 with both in |*out_key| and |*out_cert| (the caller frees them),
 * or 0 with nothing allocated.
 */
static inline int ti_make_identity(int ec, const char *cn, EVP_PKEY **out_key, X509 **out_cert)
{
    EVP_PKEY *key = ec ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
    X509 *x = X509_new();
    X509_NAME *name = NULL;
    int ok = 0;

    if (key == NULL || x == NULL)
        goto end;
    if (!X509_set_version(x, X509_VERSION_3) || !ASN1_INTEGER_set(X509_get_serialNumber(x), 1)
        || X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(x), 86400) == NULL || !X509_set_pubkey(x, key))
        goto end;
    name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0)
        || !X509_set_issuer_name(x, name) || !X509_sign(x, key, EVP_sha256()))
        goto end;
    *out_key = key;
    *out_cert = x;
    key = NULL;
    x = NULL;
    ok = 1;
end:
    EVP_PKEY_free(key);
    X509_free(x);
    return ok;
}

/*
 * ti_maps_libssl writes to |buf| (|len| bytes) the path of the libssl.so.3
 * that the maps file |maps_path| (/proc/self/maps, /proc/PID/maps) shows,
 * or |fallback| when there is none or the file cannot be read. Returns |buf|.
 */
static inline const char *ti_maps_libssl(const char *maps_path, char *buf, size_t len,
                                         const char *fallback)
{
    FILE *f = fopen(maps_path, "r");
    char line[4096];

    snprintf(buf, len, "%s", fallback);
    if (f == NULL)
        return buf;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p = strchr(line, '/');

        if (p == NULL || strstr(p, "libssl.so.3") == NULL)
            continue;
        p[strcspn(p, "\n")] = '\0';
        snprintf(buf, len, "%s", p);
        break;
    }
    fclose(f);
    return buf;
}

#endif
