"""Forged and sniffed IPv4 TCP segments for the tests/net scripts (Python 3
stdlib only).

inject.py, inject_attacks.py and forge_syn.py all build whole IPv4 + TCP
packets for a raw socket and read the genuine ones from a packet socket; the
checksum arithmetic, the header layout and the parser live here once.
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


ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800


def ipv4_tcp(src, dst, sport, dport, seq, ack, flags, window, payload, good, ipid, ttl,
             opts=b""):
    """An IPv4 packet (DF, no IP options) carrying one TCP segment with the
    TCP options OPTS (a multiple of 4 bytes); its TCP checksum is wrong unless
    GOOD, so the receiving kernel drops it while a sniffer still sees it."""
    doff = (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      doff << 4, flags, window, 0, 0) + opts
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


def parse_ipv4_tcp(pkt):
    """PKT (starting at the IP header) as a dict: ttl, src, dst, sport, dport,
    seq, ack, flags, ts (TSval, TSecr) or None, sack (a list of (left, right)
    blocks) or None, and payload; None if it is not a whole IPv4 TCP
    segment."""
    if len(pkt) < 40 or pkt[0] >> 4 != 4 or pkt[9] != 6:
        return None
    ihl = (pkt[0] & 15) * 4
    tot = struct.unpack("!H", pkt[2:4])[0]
    pkt = pkt[:tot]
    if len(pkt) < ihl + 20:
        return None
    sport, dport, seq, ack = struct.unpack("!HHII", pkt[ihl:ihl + 12])
    doff = (pkt[ihl + 12] >> 4) * 4
    opts = pkt[ihl + 20:ihl + doff]
    ts = sack = None
    i = 0
    while i < len(opts):
        k = opts[i]
        if k == 0:
            break
        if k == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            break
        ln = opts[i + 1]
        if k == 8 and ln == 10:
            ts = struct.unpack("!II", opts[i + 2:i + 10])
        elif k == 5 and ln >= 10:
            sack = [struct.unpack("!II", opts[j:j + 8]) for j in range(i + 2, i + ln - 7, 8)]
        i += ln
    return dict(ttl=pkt[8], src=socket.inet_ntoa(pkt[12:16]), dst=socket.inet_ntoa(pkt[16:20]),
                sport=sport, dport=dport, seq=seq, ack=ack, flags=pkt[ihl + 13], ts=ts, sack=sack,
                payload=pkt[ihl + doff:])


def packet_socket(iface, rcvbuf=None):
    """An AF_PACKET socket bound to IFACE that sees every packet in and out
    (from the IP header on), with a receive buffer of RCVBUF bytes if given."""
    # ETH_P_ALL: protocol-specific packet sockets see no outgoing packets.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    s.bind((iface, ETH_P_ALL))
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    return s
