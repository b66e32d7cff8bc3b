// gopeer: a legacy TLS sender built on Go's crypto/tls (standard library
// only) for the uTLS interop tests. It connects to -addr, negotiates exactly
// the version asked for (and, for TLS 1.2, the cipher suite), then reads
// self-delimiting messages from stdin ("uTLS" | index u32 | length u32 | ...)
// and writes each one with a single conn.Write, so that record boundaries are
// Go's own choice (dynamic record sizing may split a message). At end of
// input it sends close_notify, reads until the receiver closes, and exits. It prints the negotiated version and
// suite on stderr.
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4433", "server address")
	version := flag.String("tls", "1.3", "1.2 or 1.3")
	cipher := flag.String("cipher", "", "TLS 1.2 cipher suite name (Go's name, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")
	flag.Parse()

	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}
	switch *version {
	case "1.2":
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	case "1.3":
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	default:
		fail("unknown version %q", *version)
	}
	if *cipher != "" {
		id, ok := suiteByName(*cipher)
		if !ok {
			fail("unknown cipher suite %q", *cipher)
		}
		cfg.CipherSuites = []uint16{id}
	}
	conn, err := tls.Dial("tcp", *addr, cfg)
	if err != nil {
		fail("dial: %v", err)
	}
	st := conn.ConnectionState()
	fmt.Fprintf(os.Stderr, "gopeer: %s %s\n", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))

	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	hdr := make([]byte, 12)
	for {
		if _, err := io.ReadFull(in, hdr); err != nil {
			if err == io.EOF {
				break
			}
			fail("stdin: %v", err)
		}
		n := int(binary.BigEndian.Uint32(hdr[8:12]))
		if string(hdr[:4]) != "uTLS" || n < 12 || n > 16384 {
			fail("stdin: not a message")
		}
		msg := make([]byte, n)
		copy(msg, hdr)
		if _, err := io.ReadFull(in, msg[12:]); err != nil {
			fail("stdin: %v", err)
		}
		if _, err := conn.Write(msg); err != nil {
			fail("write: %v", err)
		}
	}
	if err := conn.CloseWrite(); err != nil {
		fail("close_notify: %v", err)
	}
	// Read what the receiver sent (session tickets) until it closes: a
	// socket closed with unread data sends a RST, and the RST makes the
	// receiver's kernel discard the records still queued for it.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, conn)
	conn.Close()
}

func suiteByName(name string) (uint16, bool) {
	for _, s := range tls.CipherSuites() {
		if s.Name == name {
			return s.ID, true
		}
	}
	for _, s := range tls.InsecureCipherSuites() {
		if s.Name == name {
			return s.ID, true
		}
	}
	return 0, false
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "gopeer: "+format+"\n", args...)
	os.Exit(1)
}
