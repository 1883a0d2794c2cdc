// Command egressprobe runs inside a test sandbox and makes the requests
// the egress inspection tests check, printing one result line each. It
// trusts what the sandbox trusts (SSL_CERT_FILE, set by sbx with a CA).
//
//	egressprobe get URL [KEY:VALUE...]   GET with headers; $VAR in a value is expanded
//	egressprobe post URL                 POST
//	egressprobe ws HOST PATH             WebSocket upgrade over TLS, one line echoed
//	egressprobe hold                     print "ready" and sleep (keeps its env in memory)
//	egressprobe dnstcp NAME              resolve NAME over TCP with the name server of /etc/resolv.conf
//	egressprobe bench N URL [CAFILE]     N GETs on new connections, then N on one; median ms of each
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: egressprobe get|post|ws|hold ...")
		os.Exit(2)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true}}
	switch os.Args[1] {
	case "get", "post":
		method := strings.ToUpper(os.Args[1])
		req, err := http.NewRequest(method, os.Args[2], strings.NewReader(""))
		if err != nil {
			fail(err)
		}
		for _, h := range os.Args[3:] {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(k, os.ExpandEnv(v))
		}
		resp, err := client.Do(req)
		if err != nil {
			fail(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		fmt.Printf("status=%d proto=%s body=%s\n", resp.StatusCode, resp.Proto, strings.TrimSpace(string(b)))
	case "ws":
		conn, err := tls.Dial("tcp", os.Args[2]+":443", &tls.Config{ServerName: os.Args[2], NextProtos: []string{"http/1.1"}})
		if err != nil {
			fail(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", os.Args[3], os.Args[2])
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			fail(err)
		}
		fmt.Fprint(conn, "ping over the upgrade\n")
		line, err := br.ReadString('\n')
		if err != nil {
			fail(err)
		}
		fmt.Printf("status=%d echo=%s\n", resp.StatusCode, strings.TrimSpace(line))
	case "bench":
		n, _ := strconv.Atoi(os.Args[2])
		bench(n, os.Args[3], os.Args[4:])
	case "dnstcp":
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(ctx, os.Args[2])
		if err != nil {
			fail(err)
		}
		fmt.Printf("addrs=%s\n", strings.Join(addrs, ","))
	case "hold":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
}

func fail(err error) {
	fmt.Printf("error=%v\n", err)
	os.Exit(1)
}

// bench prints the median latency of a GET on a new connection (TCP and
// TLS handshakes included) and on a kept-alive one.
func bench(n int, url string, caFiles []string) {
	cfg := &tls.Config{}
	if len(caFiles) > 0 {
		pool, _ := x509.SystemCertPool()
		if pool == nil {
			pool = x509.NewCertPool()
		}
		for _, f := range caFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				fail(err)
			}
			pool.AppendCertsFromPEM(b)
		}
		cfg.RootCAs = pool
	}
	get := func(c *http.Client) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			fail(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0)
	}
	median := func(keep bool) float64 {
		ds := make([]time.Duration, n)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: !keep}}
		get(c) // warm: DNS, the proxy's leaf cache, a kept-alive connection
		for i := range ds {
			ds[i] = get(c)
		}
		slices.Sort(ds)
		return float64(ds[n/2].Microseconds()) / 1000
	}
	fmt.Printf("conn_ms=%.3f req_ms=%.3f\n", median(false), median(true))
}
