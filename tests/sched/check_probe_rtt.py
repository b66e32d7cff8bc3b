#!/usr/bin/env python3
"""check_probe_rtt.py TRACE SEND_SUMMARY: the scheduler's ProbeRTT drain
(probe_rtt_drain) lined up with BBR's real ProbeRTT entries on a real kernel
TCP connection. From the sender's trace (sched_send --trace): an entry is the
window falling to 4 segments from more, outside the loss state. Checks that
BBR entered ProbeRTT at least twice, that the scheduler saw the entries and
met every one but at most the first with a drain, and that the drained
entries found few segments in flight (the point of the drain; without it
about a bandwidth-delay product is in flight)."""
import sys

PROBE_RTT_CWND = 4
# Segments unacknowledged at a drained entry: the drain aims at 3 (the
# ProbeRTT window less the reserve); a sample can lag by an ACK or two.
MAX_UNACKED_AT_DRAINED_ENTRY = 6

trace_path, summary_path = sys.argv[1:3]
trace = []
for line in open(trace_path):
    f = line.split()
    if f[0] == 't' and len(f) >= 15:
        trace.append({'ns': int(f[1]), 'ca': int(f[2]), 'cwnd': int(f[3]), 'unacked': int(f[4]),
                      'draining': int(f[14])})
summary = None
for line in open(summary_path):
    if line.startswith('summary '):
        summary = {k: int(v) for k, v in (kv.split('=') for kv in line.split()[1:])}
fail = []
entries = []
for a, b in zip(trace, trace[1:]):
    if a['cwnd'] > PROBE_RTT_CWND and b['cwnd'] <= PROBE_RTT_CWND and b['ca'] != 4:
        entries.append((a, b))
drained = [b['unacked'] for a, b in entries if a['draining']]
print('check_probe_rtt: %d trace samples, %d ProbeRTT entries, %d in a drain, unacked at '
      'those %s; sender %s' % (len(trace), len(entries), len(drained), drained, summary))
if summary is None:
    fail.append('sender wrote no summary')
elif len(entries) < 2:
    fail.append('BBR entered ProbeRTT %d times (at least 2 expected: is the congestion control '
                'BBR?)' % len(entries))
else:
    if summary['probe_rtt_seen'] < len(entries) - 1:
        fail.append('the scheduler saw %d entries, the trace %d'
                    % (summary['probe_rtt_seen'], len(entries)))
    if summary['probe_rtt_predicted'] < summary['probe_rtt_seen'] - 1:
        fail.append('%d of %d entries predicted: more than the first was missed'
                    % (summary['probe_rtt_predicted'], summary['probe_rtt_seen']))
    if len(drained) < len(entries) - 1:
        fail.append('%d of %d trace entries came during a drain' % (len(drained), len(entries)))
    if any(u > MAX_UNACKED_AT_DRAINED_ENTRY for u in drained):
        fail.append('a drained entry found %s segments unacknowledged (at most %d expected)'
                    % (max(drained), MAX_UNACKED_AT_DRAINED_ENTRY))
for f in fail:
    print('check_probe_rtt: FAIL:', f)
sys.exit(1 if fail else 0)
