/* packet-ucobs.h
 * Registration entry points of the uCOBS dissector (plugin.c calls them).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef PACKET_UCOBS_H
#define PACKET_UCOBS_H

/* proto_register_ucobs registers protocol "ucobs" ("uCOBS datagrams over
 * TCP"), its fields, subtrees, expert items and the "ucobs" dissector. */
void proto_register_ucobs(void);

/* proto_reg_handoff_ucobs adds the "tcp" heuristic (ucobs_tcp, enabled) and
 * the ucobs.tcp.port preference / Decode As entry (no port by default). */
void proto_reg_handoff_ucobs(void);

#endif /* PACKET_UCOBS_H */
