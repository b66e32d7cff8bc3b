/* packet-utls.h
 * Registration entry points of the uTLS dissectors (plugin.c calls them).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef PACKET_UTLS_H
#define PACKET_UTLS_H

/* proto_register_utls registers protocol "utls", its fields and expert items. */
void proto_register_utls(void);

/* proto_reg_handoff_utls registers the postdissector and the "tls" heuristic. */
void proto_reg_handoff_utls(void);

#endif /* PACKET_UTLS_H */
