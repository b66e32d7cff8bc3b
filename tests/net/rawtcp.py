"""Forged IPv4 TCP segments for the tests/net scripts (Python 3 stdlib only).

inject.py and forge_syn.py both build whole IPv4 + TCP packets for a raw
socket; the checksum arithmetic and header layout live here once.
"""
import socket
import struct


def csum(data):
    """The Internet checksum (RFC 1071) of DATA."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4_tcp(src, dst, sport, dport, seq, ack, flags, window, payload, good, ipid, ttl):
    """An IPv4 packet (DF, no options) carrying one TCP segment; its TCP
    checksum is wrong unless GOOD, so the receiving kernel drops it while a
    sniffer still sees it."""
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, window, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(
        "!BBH", 0, 6, len(tcp) + len(payload))
    c = csum(pseudo + tcp + payload)
    if not good:
        c ^= 0x5A5A  # never the right value (and not its 0/0xffff twin)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), ipid,
                     0x4000, ttl, 6, 0, socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + tcp + payload
