/*
 * The glue's own header (lib/glue/): the runtime's state and interface plus
 * OpenSSL's internals (ssl_local.h, record_local.h). Only the files of
 * lib/glue/ include it (tests/build/check-layering.py); upstream files
 * include utls_hooks.h, not this.
 */
#ifndef UTLS_GLUE_LOCAL_H
#define UTLS_GLUE_LOCAL_H

#include <stdint.h>

#include <openssl/utls.h>

#include "ssl_local.h" /* libssl is built with ssl/ on the include path */
#include "record/record_local.h"
#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/* UTLS_TLS_OF: the connection object that holds |s|'s TLS state (the SSL
 * itself on this base), as UTLS_TLS_CONN. */
#define UTLS_TLS_CONN SSL
#define UTLS_TLS_OF(s) (s)
/* UTLS_CONN_OF: the uTLS state of |s| (NULL when it has none), for the
 * files both bases compile (ern_neg.c). */
#define UTLS_CONN_OF(s) ((s)->utls)

/* ern_neg.c */
void utls_ern_register(SSL_CTX *ctx);
/* utls_ern_inorder handles an authenticated application record in order:
 * consumes a negotiation message, or checks and strips the record number.
 * Returns 0 after SSLfatal() (a wrong number). */
int utls_ern_inorder(SSL *s, utls_conn *c, SSL3_RECORD *rr, uint64_t seq);
/* utls_ern_tls12_record_done: a TLS 1.2 client looks for the server's
 * offer in the explicit nonce of the first record under the new read key
 * (the server's Finished), once per connection. */
void utls_ern_tls12_record_done(SSL *s, const SSL3_RECORD *rr);
/* utls_ern_rx_done: the record numbered |seq| was authenticated in order:
 * mark it seen and set the read sequence to the highest number + 1. */
void utls_ern_rx_done(SSL *s, utls_conn *c, uint64_t seq);

/* keygen.c: the private copy of the read cipher context. */
void utls_copy_read_ctx(SSL *s, utls_conn *c);

/* conf.c: SSL_MODE_UNORDERED of |s| came from UTLS_MODE/UTLSMode (set on its
 * SSL_CTX or on it by utls_conf_mode), not from the program. */
int utls_mode_from_config(const SSL *s);
/* conf.c: |s|, whose mode came from UTLS_MODE/UTLSMode, matches one of the
 * setting's scope words (port=, alpn=, sni=, all). Called once the handshake
 * is done (ALPN and SNI known). */
int utls_conf_in_scope(const SSL *s);

#endif
