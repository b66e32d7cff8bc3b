/*
 * Explicit record numbers on the 3.5 base, the parts both bases share (the
 * tokens, the NewSessionTicket offer, UTLS_ern_status(), the prefix written
 * and stripped, the one-block test's key): lib/glue/ern_neg.c uses only
 * OpenSSL's public API, the SSL_CTX's library context, WPACKET and the
 * TLS 1.3 key schedule, so the very same source is compiled here instead of
 * a copy (glue_local.h says how its include resolves to this folder's
 * header, and defines UTLS_TLS_OF and UTLS_CONN_OF for this base).
 */
#include "glue_local.h"

#include "../ern_neg.c"
