// erngo: a stock Go crypto/tls peer (standard library only) for the ERN
// interop matrix (tests/ern-interop). Server: accepts one connection and
// answers each line with the line reversed (like `openssl s_server -rev`).
// Client: sends each line of -msgs (a file), waiting for each answer before
// sending the next one, and writes the answers to stdout.
// Both print "VERSION TLSv1.x" on stderr after the handshake.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

func fail(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "erngo: "+f+"\n", a...)
	os.Exit(1)
}

func vname(v uint16) string {
	switch v {
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS13:
		return "TLSv1.3"
	}
	return fmt.Sprintf("0x%04x", v)
}

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return r
}

func main() {
	role := flag.String("role", "client", "client or server")
	addr := flag.String("addr", "127.0.0.1:0", "listen or connect address")
	version := flag.String("tls", "1.3", "1.2 or 1.3")
	cert := flag.String("cert", "", "certificate (server) or CA file (client)")
	key := flag.String("key", "", "key (server)")
	msgs := flag.String("msgs", "", "client: file with the lines to send")
	flag.Parse()

	cfg := &tls.Config{ServerName: "localhost"}
	if *version == "1.2" {
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	} else {
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	}
	if *role == "server" {
		kp, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			fail("key pair: %v", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
		ln, err := tls.Listen("tcp", *addr, cfg)
		if err != nil {
			fail("listen: %v", err)
		}
		fmt.Printf("LISTENING %d\n", ln.Addr().(*net.TCPAddr).Port)
		os.Stdout.Sync()
		c, err := ln.Accept()
		if err != nil {
			fail("accept: %v", err)
		}
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			fail("handshake: %v", err)
		}
		fmt.Fprintf(os.Stderr, "VERSION %s\n", vname(tc.ConnectionState().Version))
		r := bufio.NewReader(tc)
		n := 0
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				body := []byte(strings.TrimRight(string(line), "\r\n"))
				if _, werr := tc.Write(append(reverse(body), '\n')); werr != nil {
					fail("write: %v", werr)
				}
				n++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				fail("read after %d lines: %v", n, err)
			}
		}
		fmt.Fprintf(os.Stderr, "DONE %d lines\n", n)
		tc.Close()
		return
	}
	pem, err := os.ReadFile(*cert)
	if err != nil {
		fail("CA file: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg.RootCAs = pool
	data, err := os.ReadFile(*msgs)
	if err != nil {
		fail("msgs: %v", err)
	}
	c, err := tls.Dial("tcp", *addr, cfg)
	if err != nil {
		fail("dial: %v", err)
	}
	fmt.Fprintf(os.Stderr, "VERSION %s\n", vname(c.ConnectionState().Version))
	r := bufio.NewReader(c)
	lines := strings.SplitAfter(string(data), "\n")
	n := 0
	for _, l := range lines {
		if l == "" {
			continue
		}
		if _, err := io.WriteString(c, l); err != nil {
			fail("write: %v", err)
		}
		ans, err := r.ReadBytes('\n')
		if err != nil {
			fail("read answer %d: %v", n, err)
		}
		os.Stdout.Write(ans)
		n++
	}
	fmt.Fprintf(os.Stderr, "DONE %d lines\n", n)
	c.Close()
}
