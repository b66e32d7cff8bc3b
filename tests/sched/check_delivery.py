#!/usr/bin/env python3
"""check_delivery.py RECV_OUT SEND_SUMMARY DROPS: the receiver read exactly the
messages the scheduler wrote (every submitted id minus every dropped id), each
intact and once, and the connection ended with a clean close_notify; no
delivered message depends on a dropped one."""
import sys

recv_out, summary_path, drops_path = sys.argv[1:4]
got, deps, end = set(), {}, None
for line in open(recv_out):
    f = line.split()
    if f[0] == 'm':
        got.add(int(f[1]))
        deps[int(f[1])] = int(f[6])
    elif f[0] == 'end':
        end = dict(kv.split('=') for kv in f[1:])
summary = None
for line in open(summary_path):
    if line.startswith('summary '):
        summary = dict(kv.split('=') for kv in line.split()[1:])
dropped = {int(l.split()[0]) for l in open(drops_path) if l.strip()}
fail = []
if end is None:
    fail.append('receiver wrote no end line')
elif end['clean'] != '1' or end['bad'] != '0' or end['dup'] != '0':
    fail.append('receiver: %s' % end)
if summary is None:
    fail.append('sender wrote no summary')
else:
    want = set(range(1, int(summary['submitted']) + 1)) - dropped
    if got != want:
        fail.append('missing %s, unexpected %s' % (sorted(want - got)[:10], sorted(got - want)[:10]))
    if int(summary['written']) != len(want):
        fail.append('sender wrote %s, expected %d' % (summary['written'], len(want)))
bad_dep = [i for i, d in deps.items() if d and d in dropped]
if bad_dep:
    fail.append('delivered messages that depend on dropped ones: %s' % bad_dep[:10])
print('check_delivery: received %d, dropped %d, summary %s' % (len(got), len(dropped), summary))
for f in fail:
    print('check_delivery: FAIL:', f)
sys.exit(1 if fail else 0)
