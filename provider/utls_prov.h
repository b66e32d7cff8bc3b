/*
 * utls_prov.h: the provider's entry point under its own name, for programs
 * that register it in process with OSSL_PROVIDER_add_builtin() (the tests).
 * The module utls.so exports the same function as OSSL_provider_init.
 */
#ifndef UTLS_PROVIDER_UTLS_PROV_H
#define UTLS_PROVIDER_UTLS_PROV_H

#include <openssl/core.h>

/* utls_provider_init is an OSSL_provider_init_fn: returns 1 and sets *out and
 * *provctx (freed by the provider's teardown), or 0. */
int utls_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                       const OSSL_DISPATCH **out, void **provctx);

#endif
