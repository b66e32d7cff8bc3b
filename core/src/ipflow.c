/*
 * The delivery policy of SSL_MODE_UTLS_IP_TUNNEL: which inner packets may be
 * delivered before the records in front of them (docs/tunnel.md).
 */
#include "utls/ipflow.h"

/* IANA protocol numbers of the transports that take reordering as it comes:
 * datagrams, each one self-contained. */
static int reorder_tolerant(uint8_t proto)
{
    switch (proto) {
    case 1:   /* ICMP */
    case 17:  /* UDP */
    case 58:  /* ICMPv6 */
    case 136: /* UDP-Lite */
        return 1;
    default:
        return 0;
    }
}

int utls_ipflow_keeps_order(const uint8_t *pkt, size_t len)
{
    size_t pos, ext;
    uint8_t next;

    if (pkt == NULL || len < 1)
        return 1;
    switch (pkt[0] >> 4) {
    case 4:
        /* RFC 791: IHL counts 32-bit words, at least 5. */
        if (len < 20 || (pkt[0] & 0x0f) < 5 || (size_t)(pkt[0] & 0x0f) * 4 > len)
            return 1;
        return !reorder_tolerant(pkt[9]);
    case 6:
        if (len < 40)
            return 1;
        next = pkt[6];
        pos = 40;
        for (ext = 0; ext < UTLS_IPFLOW_MAX_EXT_HEADERS; ext++) {
            switch (next) {
            case 0:  /* hop-by-hop options */
            case 43: /* routing */
            case 60: /* destination options */
                /* RFC 8200 4.3: Hdr Ext Len in 8-octet units, not counting
                 * the first 8 octets. */
                if (len < pos + 8 || len < pos + 8 + (size_t)pkt[pos + 1] * 8)
                    return 1;
                next = pkt[pos];
                pos += 8 + (size_t)pkt[pos + 1] * 8;
                break;
            case 44: /* fragment: RFC 8200 4.5, 8 octets; its Next Header names
                      * the protocol of the whole packet */
                if (len < pos + 8)
                    return 1;
                next = pkt[pos];
                pos += 8;
                break;
            default:
                return !reorder_tolerant(next);
            }
        }
        return 1;
    default:
        return 1; /* not an IP packet: the tunnel's own data keeps its order */
    }
}
