#!/usr/bin/python3
"""Writes vectors.json: JA4/JA4S test vectors for wireshark/utls-wirecheck.

Every expected fingerprint is a published value, copied from its source (named
in each vector). Where the source publishes a fingerprint with the hello's
parameters but not its bytes, this script builds the hello bytes from those
parameters (marked "bytes built here"); contents a fingerprint ignores (random,
session ID, key share bytes, SNI host name) are filled with fixed values. For
JA4S the published hash is of the server's extension list in wire order, so a
match also confirms the order we chose (it is a SHA-256 preimage).

Run: /usr/bin/python3 tests/data/ja4/build_vectors.py > tests/data/ja4/vectors.json
"""
import json
import struct

FOXIO = "FoxIO-LLC/ja4"
CYBERCHEF = ("gchq/CyberChef tests/operations/tests/JA4Fingerprint.mjs "
             "(commit d59ebdd0dca916edefc0fc76437c0c2cbe561555), test")

# ClientHellos published as hex, with their expected JA4 (CyberChef's JA4
# operation tests; both are real browser hellos with GREASE and padding).
CYBERCHEF_TLS13 = (
    "1603010200010001fc0303b2c03e7ba990ef540c316a665d4d925f8e9079ac4b15687e587dc99016e75a6c20d0b0099243c9296a"
    "0c84153ea4ada7d87ad017f4211c2ea1350b0b3cc5514d5f00205a5a130113021303c02bc02fc02cc030cca9cca8c013c014009c"
    "009d002f003501000193fafa000000000024002200001f636f6e74656e742d6175746f66696c6c2e676f6f676c65617069732e63"
    "6f6d0033002b00293a3a000100001d0020fb2cd8ef3d605b96ab03119ec4f30a6e2088cb1af86c41a81feace8706068c50000d00"
    "1200100403080404010503080505010806060100230000000b00020100ff01000100000a000a00083a3a001d00170018001b0003"
    "02000244690005000302683200120000002d000201010010000e000c02683208687474702f312e31000500050100000000002b00"
    "07060a0a03040303001700001a1a000100001500b8" + "00" * 184)
CYBERCHEF_TLS12_NAMED = (
    "1603010200010001fc0303ecb2691addb2bf6c599c7aaae23de5f42561cc04eb41029acc6fc050a16ac1d22046f8617b580ac935"
    "8e2aa44e306d52466bcc989c87c8ca64309f5faf50ba7b4d0022130113031302c02bc02fcca9cca8c02cc030c00ac009c013c014"
    "009c009d002f00350100019100000021001f00001c636f6e74696c652e73657276696365732e6d6f7a696c6c612e636f6d001700"
    "00ff01000100000a000e000c001d00170018001901000101000b00020100002300000010000e000c02683208687474702f312e31"
    "0005000501000000000022000a000804030503060302030033006b0069001d00208909858fbeb6ed2f1248ba5b9e2978bead0e84"
    "0110192c61daed0096798b184400170041044d183d91f5eed35791fa982464e3b0214aaa5f5d1b78616d9b9fbebc22d11f535b2f"
    "94c686143136aa795e6e5a875d6c08064ad5b76d44caad766e2483012748002b00050403040303000d0018001604030503060308"
    "040805080604010501060102030201002d00020101001c000240010015007a" + "00" * 122)


def u16(v):
    return struct.pack(">H", v)


def vec8(b):
    return bytes([len(b)]) + b


def vec16(b):
    return u16(len(b)) + b


def ext_body(t, alpn=None, sigalgs=None, versions=None, host=b"example.com"):
    if t == 0x0000:
        return vec16(b"\x00" + vec16(host))
    if t == 0x0010:
        return vec16(b"".join(vec8(p) for p in alpn))
    if t == 0x000d:
        return vec16(b"".join(u16(s) for s in sigalgs))
    if t == 0x002b:
        return vec8(b"".join(u16(v) for v in versions))
    if t == 0x000a:
        return vec16(u16(0x001d) + u16(0x0017))
    if t == 0x000b:
        return vec8(b"\x00")
    if t == 0x0033:
        return vec16(u16(0x001d) + vec16(bytes(32)))
    if t == 0x002d:
        return vec8(b"\x01")
    if t == 0xff01:
        return b"\x00"
    return b""


def client_hello(ciphers, exts, alpn=(b"h2",), sigalgs=(), versions=(0x0304, 0x0303)):
    e = b"".join(u16(t) + vec16(ext_body(t, alpn, sigalgs, versions)) for t in exts)
    body = (u16(0x0303) + bytes(range(32)) + vec8(bytes(32)) + vec16(b"".join(u16(c) for c in ciphers)) +
            vec8(b"\x00") + vec16(e))
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return (b"\x16\x03\x01" + u16(len(hs)) + hs).hex()


def server_hello(version, cipher, exts, alpn=None, selected=None):
    def body(t):
        if t == 0x002b:
            return u16(selected)
        if t == 0x0033:
            return u16(0x001d) + vec16(bytes(32))
        if t == 0x0029:
            return u16(0)
        if t == 0x0010:
            return vec16(vec8(alpn))
        if t == 0xff01:
            return b"\x00"
        if t == 0x000b:
            return vec8(b"\x00")
        return b""
    e = b"".join(u16(t) + vec16(body(t)) for t in exts)
    b = u16(version) + bytes(range(32)) + vec8(bytes(32)) + u16(cipher) + b"\x00" + vec16(e)
    hs = b"\x02" + struct.pack(">I", len(b))[1:] + b
    return (b"\x16\x03\x03" + u16(len(hs)) + hs).hex()


# JA4.md's worked example: ciphers and extensions in their original order, the
# signature algorithms, SNI present, first ALPN h2, TLS 1.3 in supported_versions.
SPEC_CIPHERS = [0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014,
                0x009c, 0x009d, 0x002f, 0x0035]
SPEC_EXTS = [0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012,
             0x002b, 0xff01, 0x000b, 0x000a, 0x0015]
SPEC_SIGALGS = [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601]
SPEC_EXPECTED = {
    "ja4": "t13d1516h2_8daaf6152771_e5627efa2ab1",
    "ja4_r": "t13d1516h2_002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9_0005,000a,"
             "000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601",
    "ja4_o": "t13d1516h2_acb858a92679_18f69afefd3d",
    "ja4_ro": "t13d1516h2_1301,1302,1303,c02b,c02f,c02c,c030,cca9,cca8,c013,c014,009c,009d,002f,0035_001b,0000,"
              "0033,0010,4469,0017,002d,000d,0005,0023,0012,002b,ff01,000b,000a,0015_0403,0804,0401,0503,0805,"
              "0501,0806,0601",
}
JA4_MD = FOXIO + " technical_details/JA4.md (sections Example and Raw Output)"

vectors = [
    {"name": "cyberchef-tls13-chrome", "kind": "client", "hex": CYBERCHEF_TLS13,
     "source": CYBERCHEF + " 'JA4 Fingerprint: TLS 1.3' and '... Original Rendering' (hex and expected copied)",
     "expected": {"ja4": "t13d1516h2_8daaf6152771_e5627efa2ab1", "ja4_o": "t13d1516h2_acb858a92679_5276cb03a33b"}},
    {"name": "cyberchef-tls12-firefox", "kind": "client", "hex": CYBERCHEF_TLS12_NAMED,
     "source": CYBERCHEF + " 'JA4 Fingerprint: TLS 1.2' and '... Original Rendering' (hex and expected copied; "
               "the hello offers TLS 1.3 in supported_versions, hence t13)",
     "expected": {"ja4": "t13d1715h2_5b57614c22b0_3d5424432f57", "ja4_o": "t13d1715h2_5b234860e130_014157ec0da2"}},
    {"name": "foxio-ja4-spec-example", "kind": "client",
     "hex": client_hello(SPEC_CIPHERS, SPEC_EXTS, alpn=(b"h2", b"http/1.1"), sigalgs=SPEC_SIGALGS),
     "source": JA4_MD + "; bytes built here from the example's parameters",
     "expected": SPEC_EXPECTED},
    {"name": "foxio-ja4-spec-example-greased", "kind": "client",
     "hex": client_hello([0x0a0a] + SPEC_CIPHERS, [0x2a2a] + SPEC_EXTS + [0xfafa], alpn=(b"h2",),
                         sigalgs=[0x5a5a] + SPEC_SIGALGS, versions=(0x7a7a, 0x0304, 0x0303)),
     "source": JA4_MD + " ('ignore GREASE values anywhere'); the example's bytes built here with GREASE added "
               "to ciphers, extensions, signature algorithms and supported_versions",
     "expected": SPEC_EXPECTED},
]

# JA4.md 'ALPN Extension Value': non-alphanumeric first/last bytes print the
# first and last characters of the hex form. Checked on the a section.
for name, proto, want in (("alpn-hex-ab", b"\xab", "ab"), ("alpn-hex-abcd", b"\xab\xcd", "ad"),
                          ("alpn-hex-30ab", b"\x30\xab", "3b"), ("alpn-hex-3031abcd", b"\x30\x31\xab\xcd", "3d"),
                          ("alpn-hex-30abcd31", b"\x30\xab\xcd\x31", "01"), ("alpn-http11", b"http/1.1", "h1"),
                          ("alpn-single-char", b"x", "xx")):
    vectors.append({"name": name, "kind": "client",
                    "hex": client_hello([0x1301], [0x0000, 0x0010, 0x002b], alpn=(proto,)),
                    "source": JA4_MD + " section 'ALPN Extension Value' (examples listed there); bytes built here",
                    "expected": {"ja4_a": "t13d0103" + want}})
vectors.append({"name": "no-alpn-no-sni-tls12", "kind": "client",
                "hex": client_hello([0xc02f], [0x000a, 0x000b]),
                "source": JA4_MD + " ('no ALPN extension ... 00'; SNI absent is 'i'; no supported_versions: "
                          "the protocol version); bytes built here",
                "expected": {"ja4_a": "t12i010200"}})

JA4S_MD = FOXIO + " technical_details/JA4S.md (JA4S Example and Raw Output)"
SNAP = FOXIO + " rust/ja4/src/snapshots/ja4__insta@%s.snap, %s"
for name, src, sh, exp in (
        ("foxio-ja4s-spec-example", JA4S_MD,
         server_hello(0x0303, 0xc030, [0x0005, 0x0017, 0xff01, 0x0000]),
         {"ja4s": "t120400_c030_4e8089b08790", "ja4s_r": "t120400_c030_0005,0017,ff01,0000"}),
        ("foxio-tls-alpn-h2", SNAP % ("tls-alpn-h2.pcap", "stream 0"),
         server_hello(0x0303, 0xcca9, [0x0000, 0xff01, 0x000b, 0x0010], alpn=b"h2"),
         {"ja4s": "t1204h2_cca9_1428ce7b4018"}),
        ("foxio-tls3-stream7", SNAP % ("tls3.pcapng", "stream 7"),
         server_hello(0x0303, 0x1301, [0x002b, 0x0033], selected=0x0304),
         {"ja4s": "t130200_1301_a56c5b993250"}),
        ("foxio-sigalg-grease", SNAP % ("sigalg-grease.pcapng", "stream 0"),
         server_hello(0x0303, 0x1302, [0x0033, 0x002b], selected=0x0304),
         {"ja4s": "t130200_1302_234ea6891581"}),
        ("foxio-tls3-stream9-psk", SNAP % ("tls3.pcapng", "stream 9"),
         server_hello(0x0303, 0x1301, [0x002b, 0x0033, 0x0029], selected=0x0304),
         {"ja4s": "t130300_1301_0ee26285a86f"}),
        ("foxio-tls3-stream11-psk", SNAP % ("tls3.pcapng", "stream 11"),
         server_hello(0x0303, 0x1301, [0x0029, 0x0033, 0x002b], selected=0x0304),
         {"ja4s": "t130300_1301_6bbbaf601ed8"})):
    vectors.append({"name": name, "kind": "server", "hex": sh,
                    "source": src + "; bytes built here from the fingerprint's parameters (version, cipher, "
                                    "extension order; the hash confirms the order)",
                    "expected": exp})

print(json.dumps({"about": "JA4/JA4S test vectors for wireshark/utls-wirecheck; made by build_vectors.py",
                  "vectors": vectors}, indent=1))
