package netns

import (
	"context"
	"fmt"
	"net"
	"os"
)

// Dial connects to addr (such as "127.0.0.1:60000") from inside the network
// namespace at nsPath, the way a process in it would: the socket is made in
// that namespace and keeps to it, so the host reaches a sandbox's loopback
// without routing, bridges or published ports. ctx bounds the connect.
func Dial(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	f, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer f.Close()
	return DialFD(ctx, int(f.Fd()), network, addr)
}

// DialFD is Dial for a namespace open as nsFD (a namespace file or a
// pidfd).
func DialFD(ctx context.Context, nsFD int, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := InNamespace(nsFD, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		conn = c
		return err
	})
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("dial %s in the sandbox's network: %w", addr, err)
	}
	return conn, nil
}
