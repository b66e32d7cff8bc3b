/* plugin.c
 * Wireshark 4.0 plugin entry points for the uTLS dissectors.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define WS_BUILD_DLL
#include <wireshark.h>

#include <epan/packet.h>
#include <epan/proto.h>

#include "packet-ucobs.h"
#include "packet-utls.h"

#ifndef UTLS_PLUGIN_VERSION
#define UTLS_PLUGIN_VERSION "0.0.0"
#endif

WS_DLL_PUBLIC_DEF const gchar plugin_version[] = UTLS_PLUGIN_VERSION;
WS_DLL_PUBLIC_DEF const int plugin_want_major = WIRESHARK_VERSION_MAJOR;
WS_DLL_PUBLIC_DEF const int plugin_want_minor = WIRESHARK_VERSION_MINOR;

WS_DLL_PUBLIC void plugin_register(void);

void plugin_register(void)
{
    static proto_plugin plug_utls;

    plug_utls.register_protoinfo = proto_register_utls;
    plug_utls.register_handoff = proto_reg_handoff_utls;
    proto_register_plugin(&plug_utls);

    static proto_plugin plug_ucobs;

    plug_ucobs.register_protoinfo = proto_register_ucobs;
    plug_ucobs.register_handoff = proto_reg_handoff_ucobs;
    proto_register_plugin(&plug_ucobs);
}
