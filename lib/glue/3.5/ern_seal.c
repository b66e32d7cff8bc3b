/*
 * Sealing records out of sequence order on the 3.5 base: lib/glue/ern_seal.c
 * decides (windows, slots, refusals) through the SSL and a few primitives
 * each base gives it (lib/glue/3.5/ern.c here), so the very same source is
 * compiled here instead of a copy.
 */
#include "glue_local.h"

#include "../ern_seal.c"
