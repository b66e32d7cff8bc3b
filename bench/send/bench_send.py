#!/usr/bin/env python3
"""bench/send: the send scheduler against stock TLS on the testbed.

1. Minion Figure 2(c): a saturating low-priority bulk stream plus one
   high-priority message every 100 ms, over a 60 ms RTT path with 0.5% loss
   and a 10 Mbit/s bottleneck. Latency of the high-priority messages, from
   the moment the application made them to the moment the receiver read them:
     base   no bulk stream (the unloaded path),
     stock  everything written straight into the socket (stock TLS),
     sched  the late-binding scheduler (TCP_NOTSENT_LOWAT, priorities) with a
            window reserve of 1 segment (bulk leaves room in TCP's congestion
            window, which matters in BBR's ProbeRTT), plus the safe control
            UTLS_tcp_set_max_pacing_rate() at 95% of the bottleneck, which
            keeps the queue in the sender, where the scheduler decides,
            instead of in the router, and with probe_rtt_drain (bulk is held
            a little more than a round trip before BBR's predicted ProbeRTT,
            so that the window is free when it drops to 4 segments).
   The receiver is the fork with SSL_MODE_UNORDERED and the tap, the same for
   all; sched_nodrain is sched without probe_rtt_drain (the headline before
   it), sched_noreserve is sched_nodrain without the window reserve, sched_nocap
   without the pacing cap, sched_inorder with an in-order receiver,
   sched_cubic with CUBIC instead of the system's congestion control (BBR).
   Each configuration is 3 connections of 40 s (about 1140 urgent messages
   after a 2 s warm-up per connection); the JSON gives, for each percentile,
   how many messages lie above it, and for the messages above the target
   their cause, from a trace of the sender's TCP state (ProbeRTT, a
   retransmission, other).
2. Deadlines: video-like frames (21 messages of 1426 bytes, one 1448-byte
   record = one MSS each, every 20 ms: 12 Mbit/s offered to the 9.5 Mbit/s
   the pacing cap allows; each due 200 ms after it was made, dependencies
   chained per slice within a 10-frame group), with and without deadline
   dropping (5 ms margin on the arrival estimate): the share of delivered
   messages that arrived late, and the number of delivered messages that
   depend on a dropped one (must be 0).

For sched and sched_nodrain the JSON also lines up the scheduler's ProbeRTT
drains with BBR's real ProbeRTT entries in the sender's trace
(sched_probe_rtt: entries met by a drain, the drain's lead, segments in
flight at entry; the sender's drain counters), and compares their bulk
throughput (sched_bulk_over_nodrain_bulk). --only runs a subset.

Writes JSON (default build/bench/send.json). --smoke runs everything briefly
on loopback (no testbed, no root) to check that the pipeline works.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Net:
    """Where the programs run: the testbed's namespaces, or loopback."""

    def __init__(self, args):
        self.args = args
        self.tb = None
        self.addr = '127.0.0.1'
        if not args.smoke:
            self.tb = os.path.join(args.top, 'tools', 'testbed', 'testbed')
            if os.geteuid() != 0 or not os.access(self.tb, os.X_OK):
                sys.exit('bench_send: needs root and tools/testbed/testbed (or --smoke)')
            self.prefix = args.prefix
            env = dict(os.environ)
            env.setdefault('UTLS_NFQ_DELAY', os.path.join(args.build, 'tools', 'testbed', 'nfq-delay'))
            self.env = env
            subprocess.run([self.tb, '--prefix', self.prefix, '-q', 'down'], env=env)
            subprocess.run([self.tb, '--prefix', self.prefix, '-q', 'up', '--rtt', str(args.rtt),
                            '--loss', str(args.loss), '--rate', str(args.rate),
                            '--queue', str(args.queue), '--seed', str(args.seed)],
                           env=env, check=True)
            self.addr = subprocess.run([self.tb, '--prefix', self.prefix, 'addr', 'receiver'],
                                       env=env, check=True, capture_output=True,
                                       text=True).stdout.strip()

    def cmd(self, where, argv):
        if self.tb is None:
            return argv
        if self.args.rt_prio > 0:
            # The sender and the receiver run SCHED_FIFO below nfq-delay
            # (priority 10): on a shared host, builds at load 10 on 2 cores
            # otherwise delay their wake-ups by tens of milliseconds, which
            # measures the host, not the network or the scheduler. Neither
            # program spins: both sleep in poll() or a blocking read.
            argv = ['chrt', '-f', str(self.args.rt_prio)] + argv
        return [self.tb, '--prefix', self.prefix, 'exec', where, '--'] + argv

    def down(self):
        if self.tb is not None:
            subprocess.run([self.tb, '--prefix', self.prefix, '-q', 'down'], env=self.env)


def run(net, args, name, send_opts, unordered=True):
    """run_once, tried a second time if the connection failed."""
    try:
        return run_once(net, args, name, send_opts, unordered)
    except RunFailed as e:
        sys.stderr.write('bench_send: %s; trying once more\n' % e)
        return run_once(net, args, name + '-retry', send_opts, unordered)


class RunFailed(Exception):
    pass


def run_once(net, args, name, send_opts, unordered=True):
    """One connection: receiver + sender. Returns (messages, summary, drops)."""
    work = tempfile.mkdtemp(prefix='bench-send-%s-' % name)
    out, ready, drops = (os.path.join(work, f) for f in ('recv.out', 'ready', 'drops'))
    port = 23000 + (os.getpid() + hash(name)) % 20000
    rargs = [os.path.join(args.bin, 'sched_recv_utls'), '--listen', '%s:%d' % (net.addr, port),
             '--out', out, '--ready', ready] + (['--unordered'] if unordered and not args.smoke
                                                else [])
    rlog = open(os.path.join(work, 'recv.err'), 'w')
    recv = subprocess.Popen(net.cmd('receiver', rargs), stderr=rlog)
    for _ in range(200):
        if os.path.exists(ready):
            break
        time.sleep(0.05)
    sargs = [os.path.join(args.bin, 'sched_send'), '--connect', '%s:%d' % (net.addr, port),
             '--drops', drops] + send_opts
    trace_path = os.path.join(work, 'trace')
    sargs += ['--trace', trace_path]
    snd = subprocess.run(net.cmd('sender', sargs), capture_output=True, text=True, timeout=600)
    try:
        recv.wait(timeout=600)
    finally:
        if recv.poll() is None:
            recv.kill()
    if snd.returncode != 0 or recv.returncode != 0:
        sys.stderr.write(snd.stderr + open(os.path.join(work, 'recv.err')).read())
        raise RunFailed('run %s failed (sender %d, receiver %s); files in %s'
                         % (name, snd.returncode, recv.returncode, work))
    summary = {}
    for line in snd.stdout.splitlines():
        if line.startswith('summary '):
            summary = {k: int(v) for k, v in (kv.split('=') for kv in line.split()[1:])}
    msgs = []
    for line in open(out):
        f = line.split()
        if f[0] == 'm':
            msgs.append({'id': int(f[1]), 'kind': int(f[2]), 'gen': int(f[3]), 'recv': int(f[4]),
                         'deadline': int(f[5]), 'dep': int(f[6]), 'ooo': int(f[7])})
    dropped = {int(l.split()[0]) for l in open(drops) if l.strip()}
    trace = read_trace(trace_path)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        for f in ('recv.out', 'trace', 'recv.err'):
            if os.path.exists(os.path.join(work, f)):
                shutil.copy(os.path.join(work, f), os.path.join(args.keep, '%s.%s' % (name, f)))
    shutil.rmtree(work, ignore_errors=True)
    return msgs, summary, dropped, trace


# The sender's TCP state (sched_send --trace), one sample at most every 2 ms
# while its loop runs: (ns, ca_state, cwnd, unacked, notsent, total_retrans,
# bbr_min_rtt_us, drains started, draining). Older traces (11 fields) have no
# drain columns.
def read_trace(path):
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path):
        f = line.split()
        if len(f) >= 11 and f[0] == 't':
            extra = (int(f[11]), int(f[12]), int(f[14])) if len(f) >= 15 else (0, 0, 0)
            out.append((int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5]), int(f[7])) + extra)
    return out


def probe_rtt_alignment(runs):
    """Lines up the scheduler's drains with BBR's real ProbeRTT entries, from
    the sender traces: an entry is the window falling to 4 segments from more
    (outside the loss state). For each entry: whether a drain was under way
    on the sample before it, how long before it that drain started, and the
    segments still unacknowledged when it came (the drain's aim is few).
    Counted over all connections, with the sender's own counters."""
    entries = predicted = 0
    leads, unacked_drained, unacked_other = [], [], []
    for r in runs:
        t = r[3]
        drain_start = None
        for a, b in zip(t, t[1:]):
            if b[7] > a[7]:
                drain_start = b[0]
            if a[2] > PROBE_RTT_CWND and b[2] <= PROBE_RTT_CWND and b[1] != 4:
                entries += 1
                if a[8]:
                    predicted += 1
                    if drain_start is not None:
                        leads.append((b[0] - drain_start) / 1e6)
                    unacked_drained.append(b[3])
                else:
                    unacked_other.append(b[3])
    counters = {}
    for k in ('probe_rtt_seen', 'probe_rtt_predicted', 'probe_rtt_drains',
              'probe_rtt_drains_wasted', 'probe_rtt_drain_ms', 'probe_rtt_held_bytes'):
        counters[k] = sum(r[1].get(k, 0) for r in runs)
    return {'trace_entries': entries, 'trace_entries_in_a_drain': predicted,
            'drain_lead_ms_median': round(pct(leads, 50), 1) if leads else None,
            'unacked_segs_at_entry_median_drained': pct(unacked_drained, 50),
            'unacked_segs_at_entry_median_not_drained': pct(unacked_other, 50),
            'sender_counters': counters}


# BBR's ProbeRTT holds the window at 4 segments (bbr_cwnd_min_target) for
# 200 ms plus a round trip, every 10 s. A smaller window is loss recovery
# (RTO: 1 segment); larger is normal operation.
PROBE_RTT_CWND = 4
CA_RECOVERY = 3


def window(trace, t0, t1):
    """The trace samples that describe [t0, t1]: the last one at or before t0
    and every one up to t1."""
    import bisect
    times = [x[0] for x in trace]
    lo = max(0, bisect.bisect_right(times, t0) - 1)
    hi = bisect.bisect_right(times, t1)
    return trace[lo:hi]


def cause(trace, m, base_ms, rtt_ms):
    """Why an urgent message was slow, from the sender's TCP state between
    its generation and its arrival: 'probe_rtt' (the window was held at 4
    segments), 'retransmission' (TCP retransmitted in that time and the
    message came at least 90% of a round trip late: loss recovery, of its
    own segment or one ahead of it in the kernel, costs at least one RTT),
    or 'other' (e.g. the host's scheduling, a shorter wait in the kernel)."""
    w = window(trace, m['gen'], m['recv'])
    if not w:
        return 'no_trace'
    if any(x[2] == PROBE_RTT_CWND for x in w):
        return 'probe_rtt'
    late = (m['recv'] - m['gen']) / 1e6 - base_ms
    if late >= 0.9 * rtt_ms and (w[-1][5] > w[0][5] or any(x[1] >= CA_RECOVERY for x in w)):
        return 'retransmission'
    return 'other'


def probe_rtt_time_share(trace):
    """Share of the traced time during which the window was 4 segments."""
    if len(trace) < 2:
        return None
    held = sum(b[0] - a[0] for a, b in zip(trace, trace[1:]) if a[2] == PROBE_RTT_CWND)
    return round(held / (trace[-1][0] - trace[0][0]), 4)


def urgent_stats(runs, warmup_ns, target_ms=None, base_ms=0, rtt_ms=0):
    """Latency of the urgent (high-priority) messages made after each
    connection's warm-up, over all the connections |runs|. Reports how many
    messages lie above each percentile, and with target_ms how many are above
    the target and why (cause())."""
    urg, traces, msgs = [], [], []
    for r in runs:
        t0 = min(m['gen'] for m in r[0]) if r[0] else 0
        for m in r[0]:
            if m['kind'] == 1 and m['gen'] - t0 >= warmup_ns:
                urg.append(m)
                traces.append(r[3])
        msgs += r[0]
    lat = [(m['recv'] - m['gen']) / 1e6 for m in urg]
    st = {'messages': len(lat)}
    for p in (50, 90, 99):
        v = pct(lat, p)
        st['p%d_ms' % p] = round(v, 2)
        st['above_p%d' % p] = sum(1 for x in lat if x > v)
    st['max_ms'] = round(max(lat), 2)
    st['out_of_order'] = sum(1 for m in urg if m['ooo'])
    shares = [probe_rtt_time_share(r[3]) for r in runs]
    shares = [x for x in shares if x is not None]
    st['probe_rtt_time_share'] = round(sum(shares) / len(shares), 4) if shares else None
    st['connections'] = len(runs)
    if target_ms is not None:
        slow = [(m, t) for m, x, t in zip(urg, lat, traces) if x > target_ms]
        causes = {}
        for m, t in slow:
            c = cause(t, m, base_ms, rtt_ms)
            causes[c] = causes.get(c, 0) + 1
        st['above_target'] = len(slow)
        st['above_target_share'] = round(len(slow) / len(lat), 4) if lat else None
        st['above_target_causes'] = causes
        # Diagnostic only (the headline is p99_ms above): the messages whose
        # time in flight did not overlap BBR's ProbeRTT.
        rest = [x for m, x, t in zip(urg, lat, traces)
                if not any(w[2] == PROBE_RTT_CWND for w in window(t, m['gen'], m['recv']))]
        st['p99_ms_outside_probe_rtt'] = round(pct(rest, 99), 2) if rest else None
    return st


def deadline_stats(msgs, summary, dropped, trace=None):
    frames = [m for m in msgs if m['kind'] == 2]
    late = [m for m in frames if m['recv'] > m['deadline']]
    got = {m['id'] for m in frames}
    bad_dep = [m['id'] for m in frames if m['dep'] and (m['dep'] in dropped or m['dep'] not in got)]
    offered = summary.get('submitted', 0) + summary.get('refused', 0)
    return {'offered': offered, 'delivered': len(frames), 'late': len(late),
            'late_share': round(len(late) / len(frames), 5) if frames else None,
            'dropped': len(dropped), 'refused': summary.get('refused', 0),
            'on_time_share_of_offered': round((len(frames) - len(late)) / offered, 4) if offered else None,
            'delivered_depending_on_dropped': len(bad_dep)}


def bulk_mbit_s(runs, args):
    n = sum(1 for r in runs for x in r[0] if x['kind'] == 0)
    return round(n * args.bulk_size * 8 / (args.duration * len(runs)) / 1e6, 2)


def runs(net, args, name, send_opts, unordered=True):
    """args.connections connections of args.duration seconds each (see
    --connections for why not one long one)."""
    return [run(net, args, '%s%d' % (name, i), send_opts, unordered)
            for i in range(args.connections)]


CONFIGS = ('stock', 'sched', 'sched_nodrain', 'sched_noreserve', 'sched_nocap', 'sched_inorder',
           'sched_cubic', 'deadline')


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default=os.path.join(here, '..', '..', 'build'))
    ap.add_argument('--out')
    ap.add_argument('--smoke', action='store_true')
    ap.add_argument('--duration', type=float, default=40,
                    help='seconds per Figure 2(c) connection')
    ap.add_argument('--connections', type=int, default=3,
                    help='connections per Figure 2(c) configuration (3 x 40 s: about 1140 '
                         'urgent messages, 11 above p99)')
    ap.add_argument('--deadline-duration', type=float, default=30)
    ap.add_argument('--rtt', type=float, default=60)
    ap.add_argument('--loss', type=float, default=0.5)
    ap.add_argument('--rate', type=float, default=10)
    ap.add_argument('--queue', default='20')
    ap.add_argument('--lowat', type=int, default=3000)
    ap.add_argument('--bulk-size', type=int, default=1400)
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--pacing-cap-pct', type=float, default=95)
    ap.add_argument('--rt-prio', type=int, default=5,
                    help='SCHED_FIFO priority of the sender and receiver on the testbed '
                         '(below nfq-delay\'s 10; 0: normal scheduling)')
    ap.add_argument('--window-reserve', type=int, default=1,
                    help='window_reserve_segs of the scheduler runs (0: off)')
    ap.add_argument('--probe-rtt-drain', type=int, default=1, choices=(0, 1),
                    help='probe_rtt_drain of the scheduler runs other than sched_nodrain')
    ap.add_argument('--only', default=','.join(CONFIGS),
                    help='comma-separated configurations to run besides base (default: all: '
                         '%s); the others are null in the JSON' % ','.join(CONFIGS))
    ap.add_argument('--prefix', default=os.environ.get('UTLS_TESTBED_PREFIX', 'bs7'),
                    help='testbed prefix (default $UTLS_TESTBED_PREFIX, else bs7): '
                         'parallel runs need different prefixes')
    ap.add_argument('--keep', metavar='DIR',
                    help='keep each run\'s receiver log and the sender\'s TCP trace in DIR')
    args = ap.parse_args()
    args.top = os.path.abspath(os.path.join(here, '..', '..'))
    args.build = os.path.abspath(args.build)
    args.bin = os.path.join(args.build, 'tests', 'sched')
    args.out = args.out or os.path.join(args.build, 'bench', 'send.json')
    if args.smoke:
        args.duration, args.deadline_duration, args.connections = 1.5, 1.5, 1
    warm = 0 if args.smoke else 2e9

    mss_ms = 1448 * 8 / (args.rate * 1e6) * 1e3
    net = Net(args)
    try:
        common = ['--duration', str(args.duration), '--hp-interval-ms', '100', '--hp-size', '200']
        base_run = runs(net, args, 'base', ['--mode', 'sched', '--bulk-size', '0'] + common)
        base = urgent_stats(base_run, warm)
        target = 1.5 * base['p50_ms'] + mss_ms
        tctx = (target, base['p50_ms'], args.rtt)
        only = set(x for x in args.only.split(',') if x)
        if only - set(CONFIGS):
            sys.exit('bench_send: unknown configuration(s) %s' % ','.join(sorted(only - set(CONFIGS))))
        stock = sched = sched_nodrain = sched_noreserve = sched_nocap = None
        sched_inorder = sched_cubic = with_drop = without = None
        sched_summary, sched_alignment, nodrain_alignment = [], None, None
        if 'stock' in only:
            stock = urgent_stats(runs(net, args, 'stock', ['--mode', 'stock', '--bulk-size',
                                                          str(args.bulk_size)] + common), warm, *tctx)
        cap = ['--pacing-cap', str(int(args.rate * 1e6 / 8 * args.pacing_cap_pct / 100))]
        plain_opts = ['--mode', 'sched', '--bulk-size', str(args.bulk_size), '--lowat',
                      str(args.lowat), '--probe-rtt-drain', '0'] + common
        nocap_opts = plain_opts + ['--window-reserve', str(args.window_reserve)]
        nodrain_opts = nocap_opts + cap
        sched_opts = nodrain_opts + ['--probe-rtt-drain', str(args.probe_rtt_drain)]
        if 'sched' in only:
            sched_run = runs(net, args, 'sched', sched_opts)
            sched_summary = [r[1] for r in sched_run]
            sched = urgent_stats(sched_run, warm, *tctx)
            sched['bulk_mbit_s'] = bulk_mbit_s(sched_run, args)
            sched_alignment = probe_rtt_alignment(sched_run)
        # The window reserve without draining ahead of ProbeRTT: the
        # ProbeRTT entries then find about a BDP in flight.
        if 'sched_nodrain' in only:
            nodrain_run = runs(net, args, 'sched_nodrain', nodrain_opts)
            sched_nodrain = urgent_stats(nodrain_run, warm, *tctx)
            sched_nodrain['bulk_mbit_s'] = bulk_mbit_s(nodrain_run, args)
            nodrain_alignment = probe_rtt_alignment(nodrain_run)
        # The scheduler as it was before the window reserve: BBR's ProbeRTT
        # then holds urgent messages behind bulk data for up to a round trip.
        if 'sched_noreserve' in only:
            sched_noreserve = urgent_stats(runs(net, args, 'sched_noreserve', plain_opts + cap),
                                           warm, *tctx)
        if 'sched_nocap' in only:
            sched_nocap = urgent_stats(runs(net, args, 'sched_nocap', nocap_opts), warm, *tctx)
        if 'sched_inorder' in only:
            sched_inorder = urgent_stats(runs(net, args, 'sched_inorder', sched_opts,
                                              unordered=False), warm, *tctx)
        # The same with CUBIC: no ProbeRTT, but a loss-limited window.
        if 'sched_cubic' in only:
            cubic_run = runs(net, args, 'sched_cubic', sched_opts + ['--cc', 'cubic'])
            sched_cubic = urgent_stats(cubic_run, warm, *tctx)
            sched_cubic['bulk_mbit_s'] = bulk_mbit_s(cubic_run, args)
        if 'deadline' in only:
            dl_common = ['--mode', 'sched', '--workload', 'deadline', '--duration',
                         str(args.deadline_duration), '--deadline-ms', '200', '--frame-ms', '20',
                         '--frame-msgs', '21', '--msg-size', '1426', '--gop', '10', '--lowat',
                         str(args.lowat), '--deadline-margin-ms', '5'] + cap
            with_drop = deadline_stats(*run(net, args, 'deadline_drop', dl_common))
            without = deadline_stats(*run(net, args, 'deadline_nodrop', dl_common + ['--no-drop']))
    finally:
        net.down()

    base_ms = base['p50_ms']
    deadline = None
    if with_drop is not None:
        deadline = {
            'workload': '21 x 1426-byte messages (one MSS-sized record each) every 20 ms (12 Mbit/s '
                        'offered), deadline 200 ms after generation, dependencies chained per slice in '
                        '10-frame groups, 5 ms margin, same pacing cap',
            'with_drop': with_drop,
            'without_drop': without,
            'late_share_with_drop_under_1pct': (with_drop['late_share'] or 0) < 0.01,
            'no_delivered_message_depends_on_a_dropped_one':
                with_drop['delivered_depending_on_dropped'] == 0,
        }
    result = {
        'network': 'loopback (smoke)' if args.smoke else
        'testbed: rtt %g ms, loss %g%%, bottleneck %g Mbit/s, queue %s packets, seed %d'
        % (args.rtt, args.loss, args.rate, args.queue, args.seed),
        'workload': 'bulk %d-byte messages saturating at priority 0; a 200-byte priority-1 message '
                    'every 100 ms; %d connections of %g s per configuration (2 s warm-up each); '
                    'receiver: the fork, SSL_MODE_UNORDERED with the tap'
                    % (args.bulk_size, args.connections, args.duration),
        'configurations_run': ['base'] + [c for c in CONFIGS if c in only],
        'base_ms': base_ms,
        'base': base,
        'stock': stock,
        'sched': sched,
        'sched_nodrain': sched_nodrain,
        'sched_noreserve': sched_noreserve,
        'sched_nocap': sched_nocap,
        'sched_inorder': sched_inorder,
        'sched_cubic': sched_cubic,
        'congestion_control': open('/proc/sys/net/ipv4/tcp_congestion_control').read().strip(),
        'pacing_cap_bytes_per_s': int(cap[1]),
        'notsent_lowat': args.lowat,
        'window_reserve_segs': args.window_reserve,
        'probe_rtt_drain': args.probe_rtt_drain,
        'mss_serialisation_ms': round(mss_ms, 3),
        'target_sched_p99_ms': round(target, 2),
        'sched_p99_within_target': sched['p99_ms'] <= target if sched else None,
        'stock_p99_over_sched_p99': round(stock['p99_ms'] / sched['p99_ms'], 1)
        if stock and sched else None,
        'sched_bulk_over_nodrain_bulk': round(sched['bulk_mbit_s'] / sched_nodrain['bulk_mbit_s'], 4)
        if sched and sched_nodrain and sched_nodrain['bulk_mbit_s'] else None,
        'sched_probe_rtt': sched_alignment,
        'sched_nodrain_probe_rtt': nodrain_alignment,
        'sched_summary': sched_summary,
        'deadline': deadline,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, 'w') as f:
        json.dump(result, f, indent=2)
        f.write('\n')
    print(json.dumps(result, indent=2))


if __name__ == '__main__':
    main()
