#!/usr/bin/env python3
"""aeadsearch_seeds.py DIR: writes the hand-made seeds (seed-*) of fuzz_aeadsearch
into DIR, in the input layout of the header of fuzz_aeadsearch.c. The
seed-valid-literal-* inputs carry records sealed here with the
cryptography package (an AEAD independent of the target's), given to the
target as arbitrary bytes. Usage:
    python3 tests/fuzz/aeadsearch_seeds.py tests/fuzz/corpus/fuzz_aeadsearch
"""
import struct, os, sys
out = sys.argv[1]
def u8(v): return bytes([v & 0xff])
def u16(v): return struct.pack('>H', v & 0xffff)
def u64(v): return struct.pack('>Q', v)
def setup(kind, tls12, key_from_input=False, probe=0, seed=0x12345678):
    b = u8(kind | (4 if tls12 else 0) | (8 if key_from_input else 0) | (probe << 4)) + u16(seed >> 16) + u16(seed)
    if key_from_input:
        b += bytes(range(1, 33)) + bytes(range(100, 112))
    return b
def record(flags=0, header=None, lensel=(1, 100), seqsel=(5, 7), muts=(), slack=16,
           count=(4 + 8 * 7,), mix=0x16, place=1, pos1=5, pos2=0, body=None):
    b = u8(flags)
    if flags & 4:
        b += u8(header[0]) + u16(header[1])
    b += u8(lensel[0]) + u16(lensel[1])
    b += u8(seqsel[0])
    if seqsel[0] % 8 == 2: b += u64(seqsel[1])
    elif seqsel[0] % 8 in (1, 3, 4): b += u8(seqsel[1])
    elif seqsel[0] % 8 != 0: b += u16(seqsel[1])
    if flags & 3 == 3:
        body = body or b''
        b += u16(len(body)) + body
    b += u8(len(muts))
    for (op, arg, arg2) in muts:
        b += u8(op) + u16(arg) + u8(arg2)
    b += u8(slack)
    b += u8(count[0])
    if count[0] % 8 == 3: b += u16(count[1])
    b += u8(mix) + u8(place) + u16(pos1) + u16(pos2)
    return b
names = {0: 'aes128', 1: 'aes256', 2: 'chacha'}
def w(name, data):
    open(os.path.join(out, name), 'wb').write(data)
for kind in range(3):
    for tls12 in (0, 1):
        tag = '%s-%s' % (names[kind], 'tls12' if tls12 else 'tls13')
        s = setup(kind, tls12)
        # genuine: the true number once at index 5 of 8; then a second,
        # longer record on the same context (the H^m cache), true number last
        w('seed-%s-genuine' % tag, s + record() + record(lensel=(6, 1000), seqsel=(5, 9), place=3))
        # tampered: a flip in the tag, the ciphertext, the header, the explicit nonce
        w('seed-%s-tampered' % tag, s + record(muts=((3, 3, 2),)) + record(muts=((2, 50, 7),))
          + record(muts=((0, 0, 0),)) + record(muts=((1, 2, 1),)))
        # cut and grown, with the header length following (op | 8) and not
        w('seed-%s-cut-grown' % tag, s + record(muts=((4 | 8, 1, 0),)) + record(muts=((5 | 8, 0, 15),))
          + record(muts=((4, 16, 0),)) + record(muts=((6, 99, 0),)))
# bounds: plaintext at the limit, one above, empty; lengths at the bounds
for kind in range(3):
    for tls12 in (0, 1):
        tag = '%s-%s' % (names[kind], 'tls12' if tls12 else 'tls13')
        s = setup(kind, tls12)
        w('seed-%s-bounds' % tag, s + record(lensel=(3, 0)) + record(lensel=(4, 0)) + record(lensel=(0, 0))
          + record(muts=((7 | 8, 0, 2),)) + record(muts=((7 | 8, 0, 1),)) + record(muts=((7 | 8, 0, 3),))
          + record(muts=((7 | 8, 0, 4),)) + record(muts=((7, 0, 0),)))
s = setup(0, 0)
# candidate counts: 0, MAX+1, MAX (true last), 1, random with duplicates
w('seed-counts', s + record(count=(0,)) + record(count=(1,)) + record(count=(2,), place=3)
  + record(count=(4,), place=1, pos1=0) + record(count=(3, 500), mix=0x81, place=2, pos1=400, pos2=7))
# numbers near 2^64 and the 2^32, 2^63 boundaries; true absent (mix without kind 0)
w('seed-near-2-64', setup(0, 1) + record(seqsel=(1, 3), mix=0x08, place=1, pos1=2)
  + record(seqsel=(3, 1), mix=0x20) + record(seqsel=(4, 2), mix=0x22, place=0)
  + record(seqsel=(2, 0xfffffffffffffff0), mix=0x0a, place=2, pos1=1, pos2=3))
w('seed-chacha-near-2-64', setup(2, 1) + record(seqsel=(1, 0), mix=0x08, place=2, pos1=3, pos2=1)
  + record(seqsel=(0,), mix=0x10, place=1, pos1=0))
# bad arguments 1..6, sentinel error on the queue
w('seed-bad-args', s + b''.join(record(flags=(b << 4) | 8) for b in range(1, 7)))
# key and IV from the input, header type and version from the input, the
# TLS 1.2 explicit nonce equal to the number
w('seed-key-from-input', setup(1, 1, True) + record(flags=4 | 0x80, header=(22, 0x0301))
  + record(flags=4, header=(0, 0xffff), muts=((0, 1, 3),)))
w('seed-arbitrary', setup(2, 0) + record(flags=3) + record(flags=3 | 8, lensel=(0, 0))
  + setup(0, 1)[:0] + record(flags=3, muts=((7 | 8, 0, 2),)))
w('seed-probe-new', setup(0, 0, probe=1) + record())
for p in range(2, 8):
    w('seed-probe-new-%d' % p, setup(p % 3, p & 1, probe=p) + record())

# arbitrary bytes that are a valid record (sealed here, independently):
# the oracle's reference must open them
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
key = bytes(range(1, 33)); iv = bytes(range(100, 112))
def nonce13(seq):
    return iv[:4] + bytes(a ^ b for a, b in zip(iv[4:], u64(seq)))
plain = bytes(range(20))
for kind, tls12 in ((0, 0), (1, 1), (2, 1), (2, 0)):
    ex = 8 if kind < 2 and tls12 else 0
    hdr = bytes([23, 3, 3]) + u16(ex + 20 + 16)
    seq = 7
    aead = AESGCM(key[:16] if kind == 0 else key) if kind < 2 else ChaCha20Poly1305(key)
    if ex:
        explicit = b'\x11' * 8
        nonce = iv[:4] + explicit
    else:
        explicit = b''
        nonce = nonce13(seq)
    aad = hdr if not tls12 else u64(seq) + hdr[:3] + u16(20)
    body = explicit + aead.encrypt(nonce, plain, aad)
    w('seed-valid-literal-%s-%s' % (names[kind], 'tls12' if tls12 else 'tls13'),
      setup(kind, tls12, True) + record(flags=3, lensel=(1, 20), body=body, count=(4 + 8 * 3,), place=1, pos1=2)
      + record(flags=3, lensel=(1, 20), body=body[:-1] + bytes([body[-1] ^ 1]), count=(4 + 8 * 3,), place=1, pos1=2))
