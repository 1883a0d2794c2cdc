package egressd

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// peekFrom runs peek on the server side of a pipe whose client writes
// with send, and returns what peek learnt and what a replay yields.
func peekFrom(t *testing.T, send func(c net.Conn)) (*hello, error) {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	go send(client)
	return peek(server)
}

func TestPeekTLSServerName(t *testing.T) {
	h, err := peekFrom(t, func(c net.Conn) {
		_ = tls.Client(c, &tls.Config{ServerName: "API.Example.com", InsecureSkipVerify: true}).Handshake()
	})
	if err != nil || !h.TLS || h.Name != "api.example.com" && h.Name != "API.Example.com" {
		t.Fatalf("peek = %+v, %v", h, err)
	}
	if len(h.Raw) < 5 || h.Raw[0] != 0x16 {
		t.Errorf("raw bytes do not start with the TLS record: %x", h.Raw[:min(len(h.Raw), 8)])
	}
	// What was read is replayed first: a TLS server reading the replay
	// gets the same ClientHello.
	rc := newReplayConn(nopConn{r: strings.NewReader("")}, h.Raw)
	got, _ := io.ReadAll(rc)
	if !bytes.Equal(got, h.Raw) {
		t.Error("replay differs from what was read")
	}
}

func TestPeekHTTPHost(t *testing.T) {
	h, err := peekFrom(t, func(c net.Conn) {
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: example.com:8080\r\n\r\n")
	})
	if err != nil || h.TLS || h.Name != "example.com" || h.Port != "8080" || h.Req.URL.Path != "/x" {
		t.Fatalf("peek = %+v, %v", h, err)
	}
}

func TestPeekRefusesOtherBytes(t *testing.T) {
	for name, data := range map[string]string{
		"ssh banner":     "SSH-2.0-OpenSSH_9.6\r\n",
		"tls garbage":    "\x16\x03\x01\x00\x05hello",
		"empty":          "",
		"http no header": "GET / HTTP/1.1\r\n",
	} {
		_, err := peekFrom(t, func(c net.Conn) {
			io.WriteString(c, data)
			c.Close()
		})
		if err == nil {
			t.Errorf("%s: peek accepted it", name)
		}
	}
}

func TestPeekIsBounded(t *testing.T) {
	_, err := peekFrom(t, func(c net.Conn) {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nX: "+strings.Repeat("a", 2*maxPeek))
	})
	if err == nil {
		t.Error("an endless request head was accepted")
	}
}

type nopConn struct {
	net.Conn
	r io.Reader
}

func (c nopConn) Read(p []byte) (int, error) { return c.r.Read(p) }
