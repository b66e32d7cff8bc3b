/*
 * The 3.5 glue's own header (lib/glue/3.5/): the runtime's state and
 * interface plus OpenSSL 3.5's internals (ssl_local.h). Only the files of
 * this folder include it. It uses the include guard of the 3.0 glue's
 * glue_local.h on purpose: a base-neutral glue file of lib/glue/ (conf.c)
 * is compiled here through a one-line wrapper, and its own
 * #include "glue_local.h" must then find this header already included.
 */
#ifndef UTLS_GLUE_LOCAL_H
#define UTLS_GLUE_LOCAL_H

#include <stdint.h>

#include <openssl/utls.h>

#include "ssl_local.h" /* libssl is built with ssl/ on the include path */
#include "internal/ssl_unwrap.h" /* SSL_CONNECTION_FROM_SSL */
#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/*
 * UTLS_SC returns the SSL_CONNECTION of |s| (3.2 and later keep the TLS
 * connection state behind the public SSL), or NULL for a QUIC object or a
 * NULL |s|: uTLS state lives on TLS connections only.
 */
#define UTLS_SC(s) ((s) != NULL ? SSL_CONNECTION_FROM_SSL(s) : NULL)

/* UTLS_TLS_OF: the connection object that holds |s|'s TLS state (its
 * SSL_CONNECTION on this base), as UTLS_TLS_CONN. */
#define UTLS_TLS_CONN SSL_CONNECTION
#define UTLS_TLS_OF(s) UTLS_SC(s)
/* UTLS_CONN_OF: the uTLS state of |s| (NULL when it has none), for the
 * files both bases compile (ern_neg.c). */
#define UTLS_CONN_OF(s) (UTLS_SC(s) != NULL ? UTLS_SC(s)->utls : NULL)

/* ern_neg.c: the ERN extension (docs/ern.md). */
void utls_ern_register(SSL_CTX *ctx);

/* conf.c: SSL_MODE_UNORDERED of |s| came from UTLS_MODE/UTLSMode. */
int utls_mode_from_config(const SSL *s);
/* conf.c: |s|, whose mode came from UTLS_MODE/UTLSMode, matches one of the
 * setting's scope words (port=, alpn=, sni=, all). */
int utls_conf_in_scope(const SSL *s);

/* read.c: the read record layer of |sc| when it is 3.5's own TLS record
 * method (ssl/record/methods/tls_common.c), whose state uTLS reads; NULL for
 * KTLS's, DTLS's or QUIC's. */
struct ossl_record_layer_st;
const struct ossl_record_layer_st *utls_rl35(const SSL_CONNECTION *sc);

/* keygen.c: the private copy of the read cipher context, taken when a read
 * key is installed (utls_hook35_read_key_changed). */
void utls_copy_read_ctx(SSL *s, utls_conn *c);

#endif
