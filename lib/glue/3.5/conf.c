/*
 * Configuration hooks (UTLSMode, UTLS_MODE, SSLKEYLOGFILE) on the 3.5 base:
 * lib/glue/conf.c uses only OpenSSL's public API and the runtime, so the very
 * same source is compiled here instead of a copy (glue_local.h says how its
 * include resolves to this folder's header).
 */
#define _GNU_SOURCE
#include "glue_local.h"

#include "../conf.c"
