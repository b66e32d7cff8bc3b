/*
 * The hook interface is one for both bases: the 3.5 hook patches include
 * "utls/utls_hooks.h" (ssl/utls is a link to this folder), which is the
 * shared lib/glue/utls_hooks.h. The path is relative to this file's real
 * folder, so it resolves the same from every file that includes ssl_local.h,
 * OpenSSL's own test programs included.
 */
#include "../utls_hooks.h"
