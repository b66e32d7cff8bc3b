// quic-stream: the streaming experiment of bench/latency over QUIC (quic-go),
// in the same shape and with the same per-message log as
// examples/utls-stream, so that analyze.py reads both.
//
//	quic-stream recv --mode stream|datagram --listen ADDR:PORT [options]
//	quic-stream send --mode stream|datagram --connect ADDR:PORT [options]
//
// The sender is the QUIC client. It sends one message of --size bytes every
// --interval ms on an absolute schedule (start + i*T, clock_nanosleep on
// CLOCK_MONOTONIC, as utls-stream does):
//
//	stream    each message on a unidirectional stream of its own, written
//	          and closed (FIN) at once: reliable, and a loss delays only
//	          the message whose stream it hit (no head-of-line blocking
//	          across messages);
//	datagram  each message in one DATAGRAM frame (RFC 9221): unreliable, a
//	          lost packet loses its message, nothing is retransmitted.
//
// Every message carries the payload of utls-stream: a 24-byte header (magic,
// index, send time in CLOCK_MONOTONIC ns, length) and an index-derived
// pattern that the receiver checks. CLOCK_MONOTONIC is host-wide, so the
// receiver (the server, in another network namespace of the same host)
// measures latency on the sender's clock.
//
// The receiver writes one JSON line per message delivered,
//
//	{"i":17,"send_ns":...,"recv_ns":...,"stream":70,"ok":1}
//
// where recv_ns is when the message was complete in the application (stream:
// the read that returned EOF; datagram: ReceiveDatagram's return). The end
// line's out_of_order counts the messages delivered before an earlier one
// that was delivered too (analyze.py counts the same). The first line is
// {"event":"start",...}; the last {"event":"end",...} has the totals and
// quic-go's connection statistics. The sender writes {"i":..,"send_ns":..}
// per message. --keylog writes the TLS secrets in the NSS key log format
// (tls.Config.KeyLogWriter), with which tshark decrypts a capture.
//
// Congestion control is quic-go's own: v0.65.0 hard-codes NewReno
// (internal/ackhandler: NewCubicSender(..., true /* use Reno */, ...)); it has
// no option to pick another one and no BBR.
//
// Exit status: 0 when every message arrived exactly once and intact
// (datagram: none duplicated or corrupted), 1 otherwise, 2 on setup errors.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/sys/unix"
)

const (
	hdrLen   = 24
	magic    = 0x6d727473 // "strm" little-endian, as utls-stream
	alpn     = "utls-bench-latency"
	codeDone = 0 // application close code: the receiver has what it waited for
)

var (
	mode      = flag.String("mode", "stream", "stream (one QUIC stream per message) or datagram (RFC 9221)")
	listen    = flag.String("listen", "", "recv: ADDR:PORT to listen on")
	connect   = flag.String("connect", "", "send: ADDR:PORT of the receiver")
	count     = flag.Int("count", 1000, "messages")
	size      = flag.Int("size", 1426, "bytes per message (application payload)")
	interval  = flag.Float64("interval", 20, "ms between messages")
	outPath   = flag.String("out", "", "JSON lines (default stdout)")
	ready     = flag.String("ready", "", "recv: file written once the receiver listens")
	keylog    = flag.String("keylog", "", "NSS key log file (TLS secrets, for tshark)")
	idleMs    = flag.Int("idle-ms", 3000, "recv: stop after this long without a message once one arrived")
	timeoutS  = flag.Int("timeout", 0, "give up after this many seconds (0: never)")
	maxStream = flag.Int64("max-streams", 1000, "recv: unidirectional streams the sender may have open (stream credit)")
	batch     = flag.Int("credit-batch", 100, "recv: return stream credit after this many streams completed")
	quiet     = flag.Bool("quiet", false, "no progress on stderr")
)

var logw *bufio.Writer
var logMu sync.Mutex

func logLine(format string, a ...any) {
	logMu.Lock()
	fmt.Fprintf(logw, format+"\n", a...)
	logMu.Unlock()
}

func flushLog() {
	logMu.Lock()
	logw.Flush()
	logMu.Unlock()
}

func note(format string, a ...any) {
	if !*quiet {
		fmt.Fprintf(os.Stderr, "quic-stream: "+format+"\n", a...)
	}
}

func die(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "quic-stream: "+format+"\n", a...)
	if logw != nil {
		flushLog()
	}
	os.Exit(code)
}

func clockNs(id int32) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		die(2, "clock_gettime: %v", err)
	}
	return ts.Sec*1e9 + ts.Nsec
}

func nowNs() int64 { return clockNs(unix.CLOCK_MONOTONIC) }

func sleepUntil(t int64) {
	ts := unix.NsecToTimespec(t)
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if err != unix.EINTR {
			return
		}
	}
}

func pattern(idx uint32, j int) byte {
	return byte(idx*131 + uint32(j)*7 + uint32(j>>8))
}

func fillPayload(p []byte, idx uint32, sendNs int64) {
	binary.LittleEndian.PutUint32(p[0:], magic)
	binary.LittleEndian.PutUint32(p[4:], idx)
	binary.LittleEndian.PutUint64(p[8:], uint64(sendNs))
	binary.LittleEndian.PutUint32(p[16:], uint32(len(p)))
	binary.LittleEndian.PutUint32(p[20:], 0)
	for j := hdrLen; j < len(p); j++ {
		p[j] = pattern(idx, j)
	}
}

// checkPayload returns the index and send time of an intact message.
func checkPayload(p []byte) (uint32, int64, bool) {
	if len(p) != *size || len(p) < hdrLen || binary.LittleEndian.Uint32(p) != magic ||
		binary.LittleEndian.Uint32(p[16:]) != uint32(len(p)) {
		return 0, 0, false
	}
	idx := binary.LittleEndian.Uint32(p[4:])
	for j := hdrLen; j < len(p); j++ {
		if p[j] != pattern(idx, j) {
			return 0, 0, false
		}
	}
	return idx, int64(binary.LittleEndian.Uint64(p[8:])), int(idx) < *count
}

func quicConfig() *quic.Config {
	return &quic.Config{
		// The messages are 1426 bytes: start at quic-go's largest packet
		// (1452 bytes of UDP payload) instead of 1280, so that a message
		// fits one packet from the first one (the testbed's veths have a
		// 1500-byte MTU; path MTU discovery would get there after a few
		// round trips).
		InitialPacketSize:       1452,
		DisablePathMTUDiscovery: true,
		EnableDatagrams:         *mode == "datagram",
		MaxIncomingUniStreams:   *maxStream,
		// By default quic-go sends a MAX_STREAMS frame for every stream
		// that completes: an ack-eliciting packet for every message, whose
		// ACK the sender then bundles with the next message, and a
		// 1426-byte message plus an ACK frame does not fit one packet. The
		// receiver returns the credit in batches instead (--credit-batch).
		RequireStreamCreditRelease: true,
		MaxIdleTimeout:             30 * time.Second,
	}
}

func keyLogWriter() io.Writer {
	if *keylog == "" {
		return nil
	}
	f, err := os.OpenFile(*keylog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0600)
	if err != nil {
		die(2, "key log %s: %v", *keylog, err)
	}
	return f
}

func selfSigned() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		die(2, "key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "utls-bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		DNSNames:     []string{"utls-bench"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		die(2, "certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func logStart(role string) {
	logLine(`{"event":"start","role":"%s","mode":"quic_%s","quic":"quic-go v0.65.0","count":%d,"size":%d,"interval_ms":%g,"real_minus_mono_ns":%d,"pid":%d}`,
		role, *mode, *count, *size, *interval,
		clockNs(unix.CLOCK_REALTIME)-nowNs(), os.Getpid())
	flushLog()
}

func statsJSON(c *quic.Conn) string {
	s := c.ConnectionStats()
	return fmt.Sprintf(`{"packets_sent":%d,"bytes_sent":%d,"packets_received":%d,"bytes_received":%d,"packets_lost":%d,"bytes_lost":%d,"min_rtt_ms":%.3f,"smoothed_rtt_ms":%.3f,"cwnd_bytes":%d}`,
		s.PacketsSent, s.BytesSent, s.PacketsReceived, s.BytesReceived, s.PacketsLost,
		s.BytesLost, float64(s.MinRTT)/1e6, float64(s.SmoothedRTT)/1e6, s.CongestionWindow)
}

// --- receiver ---------------------------------------------------------------

type receiver struct {
	mu        sync.Mutex
	recvNs    []int64 // delivery time per message, 0 = not delivered
	ok, dup   int
	bad       int
	last      int64
	first     int64
	completed chan struct{}
	pending   []*quic.ReceiveStream
}

func (r *receiver) deliver(p []byte, recvNs int64, stream int64) {
	idx, sendNs, good := checkPayload(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == 0 {
		r.first = recvNs
	}
	r.last = recvNs
	extra := ""
	if stream >= 0 {
		extra = fmt.Sprintf(`,"stream":%d`, stream)
	}
	if !good {
		r.bad++
		logLine(`{"i":-1,"len":%d,"recv_ns":%d%s,"ok":0}`, len(p), recvNs, extra)
		return
	}
	if r.recvNs[idx] != 0 {
		r.dup++
		logLine(`{"i":%d,"send_ns":%d,"recv_ns":%d,"dup":1%s,"ok":0}`, idx, sendNs, recvNs, extra)
		return
	}
	r.recvNs[idx] = recvNs
	r.ok++
	logLine(`{"i":%d,"send_ns":%d,"recv_ns":%d%s,"ok":1}`, idx, sendNs, recvNs, extra)
	if r.ok == *count {
		close(r.completed)
	}
}

// outOfOrder counts the messages delivered before an earlier message that
// was delivered too (as uTLS counts records delivered past a hole; a lost
// datagram is no hole, since nothing waits for it).
func (r *receiver) outOfOrder() int {
	n := 0
	var maxEarlier int64 // latest delivery among the earlier messages
	for i := 0; i < *count; i++ {
		t := r.recvNs[i]
		if t == 0 {
			continue
		}
		if maxEarlier > t {
			n++
		}
		if t > maxEarlier {
			maxEarlier = t
		}
	}
	return n
}

// release returns the stream credit of |s| to the sender, in batches of
// --credit-batch streams (one packet of MAX_STREAMS frames per batch).
func (r *receiver) release(s *quic.ReceiveStream) {
	r.mu.Lock()
	r.pending = append(r.pending, s)
	var out []*quic.ReceiveStream
	if len(r.pending) >= *batch {
		out, r.pending = r.pending, nil
	}
	r.mu.Unlock()
	for _, p := range out {
		p.ReleaseStreamCredit()
	}
}

func doRecv() int {
	tlsConf := &tls.Config{
		Certificates: []tls.Certificate{selfSigned()},
		NextProtos:   []string{alpn},
		KeyLogWriter: keyLogWriter(),
		MinVersion:   tls.VersionTLS13,
	}
	ln, err := quic.ListenAddr(*listen, tlsConf, quicConfig())
	if err != nil {
		die(2, "listen %s: %v", *listen, err)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(ln.Addr().String()+"\n"), 0644); err != nil {
			die(2, "ready file: %v", err)
		}
	}
	ctx := context.Background()
	if *timeoutS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*timeoutS)*time.Second)
		defer cancel()
	}
	conn, err := ln.Accept(ctx)
	if err != nil {
		die(2, "accept: %v", err)
	}
	st := conn.ConnectionState()
	logLine(`{"event":"handshake","version":"QUIC v%d","cipher":"%s","alpn":"%s","datagrams":%t}`,
		uint32(st.Version), tls.CipherSuiteName(st.TLS.CipherSuite),
		st.TLS.NegotiatedProtocol, st.SupportsDatagrams.Remote && st.SupportsDatagrams.Local)
	note("recv quic_%s: connected (%s)", *mode, tls.CipherSuiteName(st.TLS.CipherSuite))
	r := &receiver{recvNs: make([]int64, *count), completed: make(chan struct{})}

	// The watchdog: all messages in, the sender gone, or --idle-ms of silence
	// after the first message (lost datagrams never come).
	done := make(chan string, 4)
	go func() {
		select {
		case <-r.completed:
			done <- "complete"
		case <-conn.Context().Done():
			done <- "closed by the sender"
		case <-ctx.Done():
			done <- "timeout"
		}
	}()
	go func() {
		for {
			time.Sleep(50 * time.Millisecond)
			r.mu.Lock()
			last := r.last
			r.mu.Unlock()
			if last != 0 && nowNs()-last > int64(*idleMs)*1e6 {
				done <- "idle"
				return
			}
		}
	}()
	if *mode == "datagram" {
		go func() {
			for {
				p, err := conn.ReceiveDatagram(ctx)
				if err != nil {
					return
				}
				r.deliver(p, nowNs(), -1)
			}
		}()
	} else {
		go func() {
			for {
				s, err := conn.AcceptUniStream(ctx)
				if err != nil {
					return
				}
				go func(s *quic.ReceiveStream) {
					defer r.release(s)
					buf := make([]byte, 0, *size)
					tmp := make([]byte, 2048)
					for {
						n, err := s.Read(tmp)
						buf = append(buf, tmp[:n]...)
						if err == io.EOF {
							r.deliver(buf, nowNs(), int64(s.StreamID()))
							return
						}
						if err != nil {
							return
						}
					}
				}(s)
			}
		}()
	}
	why := <-done
	stats := statsJSON(conn)
	conn.CloseWithError(codeDone, "done")
	r.mu.Lock()
	ooo := r.outOfOrder()
	missing := *count - r.ok
	dur := 0.0
	if r.last > r.first {
		dur = float64(r.last-r.first) / 1e9
	}
	logLine(`{"event":"end","mode":"quic_%s","received":%d,"missing":%d,"duplicates":%d,"bad":%d,"out_of_order":%d,"duration_s":%.3f,"why":"%s","quic_stats":%s}`,
		*mode, r.ok, missing, r.dup, r.bad, ooo, dur, why, stats)
	note("recv quic_%s: %d of %d messages, %d out of order, %d missing, %d duplicates, %d bad (%s)",
		*mode, r.ok, *count, ooo, missing, r.dup, r.bad, why)
	ok := r.dup == 0 && r.bad == 0 && (*mode == "datagram" || missing == 0)
	r.mu.Unlock()
	flushLog()
	ln.Close()
	if ok {
		return 0
	}
	return 1
}

// --- sender -----------------------------------------------------------------

func doSend() int {
	tlsConf := &tls.Config{
		InsecureSkipVerify: true, // a self-signed certificate on a test bed
		NextProtos:         []string{alpn},
		KeyLogWriter:       keyLogWriter(),
		MinVersion:         tls.VersionTLS13,
	}
	ctx := context.Background()
	var conn *quic.Conn
	var err error
	// The receiver may still be starting: retry for 10 s, as utls-stream does.
	deadline := time.Now().Add(10 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		conn, err = quic.DialAddr(dctx, *connect, tlsConf, quicConfig())
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		die(2, "connect %s: %v", *connect, err)
	}
	st := conn.ConnectionState()
	if *mode == "datagram" && !st.SupportsDatagrams.Remote {
		die(2, "the receiver does not support DATAGRAM frames")
	}
	logLine(`{"event":"handshake","version":"QUIC v%d","cipher":"%s","first_app_offset":0}`,
		uint32(st.Version), tls.CipherSuiteName(st.TLS.CipherSuite))
	note("send quic_%s: connected (%s), %d messages of %d bytes every %g ms",
		*mode, tls.CipherSuiteName(st.TLS.CipherSuite), *count, *size, *interval)

	period := int64(*interval * 1e6)
	start := nowNs() + 10_000_000
	var lateMax int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for i := 0; i < *count; i++ {
		due := start + int64(i)*period
		sleepUntil(due)
		t := nowNs()
		if t-due > lateMax {
			lateMax = t - due
		}
		msg := make([]byte, *size)
		fillPayload(msg, uint32(i), t)
		if *mode == "datagram" {
			if err := conn.SendDatagram(msg); err != nil {
				var tl *quic.DatagramTooLargeError
				if errors.As(err, &tl) {
					die(2, "datagram %d: %d bytes do not fit one QUIC packet: quic-go accepts at most %d (--size)",
						i, len(msg), tl.MaxDatagramPayloadSize)
				}
				die(2, "datagram %d: %v", i, err)
			}
		} else {
			// Streams are opened in message order (stream i carries message
			// i); each is written and closed by a goroutine of its own, so
			// a stream waiting for flow or congestion credit does not hold
			// up the schedule (as a TCP socket's send buffer does not).
			s, err := conn.OpenUniStreamSync(ctx)
			if err != nil {
				die(2, "stream %d: %v", i, err)
			}
			wg.Add(1)
			go func(s *quic.SendStream, msg []byte) {
				defer wg.Done()
				if _, err := s.Write(msg); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
				s.Close()
			}(s, msg)
		}
		logLine(`{"i":%d,"send_ns":%d}`, i, t)
		if (i+1)%500 == 0 {
			note("send quic_%s: %d messages", *mode, i+1)
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		die(2, "stream write: %v", err)
	default:
	}
	// Wait for the receiver to close the connection (it has every message,
	// or gave up on the lost datagrams), so that retransmissions go on.
	wait := time.Duration(*idleMs)*time.Millisecond + 30*time.Second
	select {
	case <-conn.Context().Done():
	case <-time.After(wait):
		note("send quic_%s: the receiver did not close within %v", *mode, wait)
	}
	logLine(`{"event":"end","sent":%d,"max_late_ms":%.3f,"quic_stats":%s}`,
		*count, float64(lateMax)/1e6, statsJSON(conn))
	flushLog()
	conn.CloseWithError(codeDone, "done")
	return 0
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "send" && os.Args[1] != "recv") {
		fmt.Fprintln(os.Stderr, "usage: quic-stream send|recv --mode stream|datagram (--listen|--connect) HOST:PORT [options]; -h for options")
		os.Exit(2)
	}
	role := os.Args[1]
	flag.CommandLine.Parse(os.Args[2:])
	if *mode != "stream" && *mode != "datagram" {
		die(2, "--mode stream or datagram")
	}
	if *size < hdrLen || *count <= 0 || *interval < 0 {
		die(2, "bad --size/--count/--interval")
	}
	if (role == "recv" && *listen == "") || (role == "send" && *connect == "") {
		die(2, "%s needs --%s", role, map[string]string{"recv": "listen", "send": "connect"}[role])
	}
	out := os.Stdout
	if *outPath != "" {
		f, err := os.Create(*outPath)
		if err != nil {
			die(2, "%s: %v", *outPath, err)
		}
		out = f
	}
	logw = bufio.NewWriterSize(out, 1<<16)
	if *timeoutS > 0 {
		time.AfterFunc(time.Duration(*timeoutS)*time.Second, func() {
			die(1, "timeout after %d s", *timeoutS)
		})
	}
	logStart(role)
	var rc int
	if role == "send" {
		rc = doSend()
	} else {
		rc = doRecv()
	}
	flushLog()
	if out != os.Stdout {
		out.Close()
	}
	os.Exit(rc)
}
