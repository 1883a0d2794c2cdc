package egressd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbxrun/sbx/egress"
	"golang.org/x/sys/unix"
)

// dialTimeout bounds connecting to an upstream.
const dialTimeout = 10 * time.Second

// originalDst reads where the sandbox meant to connect before nftables
// redirected it (SO_ORIGINAL_DST).
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		// struct sockaddr_in: family(2) port(2, big endian) addr(4)
		port := uint16(m.Multiaddr[2])<<8 | uint16(m.Multiaddr[3])
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Multiaddr[4:8])), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return ap, nil
}

// handle decides one redirected connection and proxies it.
func (d *Daemon) handle(ctx context.Context, c *net.TCPConn) {
	src := addrOf(c.RemoteAddr())
	t, ok := d.cfg.Lookup(src)
	if !ok {
		resetClose(c)
		return
	}
	ev := egress.AuditEvent{Sandbox: t.Sandbox.ID, Kind: "connection"}
	deny := func(reason string) {
		ev.Decision, ev.Reason = "deny", reason
		d.audit(ev)
		resetClose(c)
	}
	orig, err := originalDst(c)
	if err != nil {
		deny(err.Error())
		return
	}
	ev.Addr = orig.String()
	if orig.Addr() == d.cfg.Listen {
		deny("the host is not reachable")
		return
	}
	if rule, ok := t.Policy.DecideAddr(orig.Addr()); ok || rule != "" {
		ev.Rule = rule
		if !ok {
			deny("address denied")
			return
		}
		// An address entry: the sandbox's own choice of address is the
		// point, and it is in the policy.
		up, err := d.dialChecked(ctx, t, []netip.Addr{orig.Addr()}, orig.Port(), false)
		if err != nil {
			deny(err.Error())
			return
		}
		d.splice(c, up, nil, &ev)
		return
	}
	h, err := peek(c)
	if h != nil {
		ev.Name = h.Name
	}
	if err != nil {
		deny(err.Error())
		return
	}
	name, valid := egress.NormalizeName(h.Name)
	if !valid {
		deny("no valid server name (SNI or Host); connections by address need a CIDR entry")
		return
	}
	ev.Name = name
	if h.Port != "" && h.Port != strconv.Itoa(int(orig.Port())) {
		deny("the Host port differs from the port connected to")
		return
	}
	rule, ok := t.Policy.DecideName(name, orig.Port())
	ev.Rule = rule
	if !ok {
		deny("name not allowed")
		return
	}
	dial := func(ctx context.Context, network string, port uint16) (net.Conn, error) {
		addrs, err := d.lookupA(ctx, t, name)
		if err != nil {
			return nil, err
		}
		return d.dialChecked(ctx, t, addrs, port, true)
	}
	if t.Policy.Inspected(name) {
		if d.cfg.Inspector == nil {
			deny("inspection not available")
			return
		}
		ev.Decision = "allow"
		d.audit(ev)
		hp, _ := t.Policy.Host(name)
		err := d.cfg.Inspector.Serve(ctx, newReplayConn(c, h.Raw), egress.Conn{
			Sandbox: t.Sandbox, SNI: name, Port: orig.Port(), TLS: h.TLS, Host: hp,
			Secrets: t.Policy.SecretsFor(name), Dial: dial, Audit: d.audit,
		})
		if err != nil {
			d.log.Debug("egress inspector", "sandbox", t.Sandbox.ID, "name", name, "err", err)
		}
		return
	}
	if !h.TLS {
		d.serveHTTP(ctx, c, h, name, orig.Port(), dial, &ev)
		return
	}
	up, err := dial(ctx, "tcp", orig.Port())
	if err != nil {
		deny(err.Error())
		return
	}
	d.splice(c, up, h.Raw, &ev)
}

// dialChecked connects to the first of addrs that answers, from the host
// namespace; with checkPublic, an address that is private, metadata or
// denied is refused in Control, before connect(2).
func (d *Daemon) dialChecked(ctx context.Context, t *Target, addrs []netip.Addr, port uint16, checkPublic bool) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	dialer := &net.Dialer{ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if checkPublic && !publicAllowed(t.Policy, ap.Addr().Unmap()) {
			return fmt.Errorf("%s is a private or denied address", ap.Addr())
		}
		return nil
	}}
	var errs []error
	for _, a := range addrs {
		var c net.Conn
		err := d.cfg.InHostNS(func() (err error) {
			c, err = dialer.DialContext(ctx, "tcp4", netip.AddrPortFrom(a, port).String())
			return err
		})
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("connect upstream: %w", errors.Join(errs...))
}

// splice copies both ways until both sides are done, first sending first
// upstream; it records the connection's audit event with the byte counts.
func (d *Daemon) splice(c, up net.Conn, first []byte, ev *egress.AuditEvent) {
	if !d.track(up, true) {
		resetClose(c)
		resetClose(up)
		return
	}
	defer d.track(up, false)
	ev.Decision = "allow"
	if len(first) > 0 {
		if _, err := up.Write(first); err != nil {
			resetClose(c)
			up.Close()
			return
		}
		ev.BytesUp += int64(len(first))
	}
	var wg sync.WaitGroup
	var upN, downN int64
	cp := func(dst, src net.Conn, n *int64) {
		defer wg.Done()
		*n, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go cp(up, c, &upN)
	go cp(c, up, &downN)
	wg.Wait()
	c.Close()
	up.Close()
	ev.BytesUp += upN
	ev.BytesDown = downN
	d.audit(*ev)
}

// serveHTTP proxies a plain HTTP connection request by request with
// net/http's parsers: every request's Host must be the name the connection
// was allowed for (else 421 and the connection ends), and goes to that
// name, dialled by the daemon once. A 101 (an upgrade: WebSocket) turns
// the connection into a splice.
func (d *Daemon) serveHTTP(ctx context.Context, c net.Conn, h *hello, name string, port uint16, dial egress.DialFunc, ev *egress.AuditEvent) {
	defer c.Close()
	ev.Decision = "allow"
	defer func() { d.audit(*ev) }()
	cr := bufio.NewReader(newReplayConn(c, h.Raw))
	var up net.Conn
	var ur *bufio.Reader
	defer func() {
		if up != nil {
			up.Close()
			d.track(up, false)
		}
	}()
	for {
		_ = c.SetReadDeadline(time.Now().Add(httpIdleTimeout))
		req, err := http.ReadRequest(cr)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if !sameHost(req.Host, name, port) {
			rev := *ev
			rev.Kind, rev.Decision, rev.Reason, rev.Method, rev.Path = "request", "deny", "Host differs from the connection's first request", req.Method, req.URL.Path
			d.audit(rev)
			resp := &http.Response{StatusCode: http.StatusMisdirectedRequest, ProtoMajor: 1, ProtoMinor: 1, Close: true,
				Body: io.NopCloser(strings.NewReader("sbx egress: Host differs from the connection's first request\n"))}
			_ = resp.Write(c)
			return
		}
		if up == nil {
			if up, err = dial(ctx, "tcp", port); err != nil {
				d.log.Debug("egress http upstream", "name", name, "err", err)
				resp := &http.Response{StatusCode: http.StatusBadGateway, ProtoMajor: 1, ProtoMinor: 1, Close: true,
					Body: io.NopCloser(strings.NewReader("sbx egress: upstream unreachable\n"))}
				_ = resp.Write(c)
				up = nil
				return
			}
			if !d.track(up, true) {
				up.Close()
				up = nil
				return
			}
			ur = bufio.NewReader(up)
		}
		cw := &countingWriter{w: up}
		if err := req.Write(cw); err != nil {
			return
		}
		ev.BytesUp += cw.n
		resp, err := http.ReadResponse(ur, req)
		if err != nil {
			return
		}
		dw := &countingWriter{w: c}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// The head, then whatever either side already buffered, then raw bytes.
			_ = resp.Write(dw)
			ev.BytesDown += dw.n
			d.spliceBuffered(c, cr, up, ur, ev)
			up = nil
			return
		}
		err = resp.Write(dw)
		resp.Body.Close()
		ev.BytesDown += dw.n
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

// httpIdleTimeout ends a plain HTTP connection that sends no request.
const httpIdleTimeout = 90 * time.Second

// sameHost reports whether an HTTP Host names name on port.
func sameHost(host, name string, port uint16) bool {
	if h, p, err := net.SplitHostPort(host); err == nil {
		if p != strconv.Itoa(int(port)) {
			return false
		}
		host = h
	}
	n, ok := egress.NormalizeName(host)
	return ok && n == name
}

// spliceBuffered splices c and up after an upgrade, first passing on what
// their readers hold.
func (d *Daemon) spliceBuffered(c net.Conn, cr *bufio.Reader, up net.Conn, ur *bufio.Reader, ev *egress.AuditEvent) {
	var wg sync.WaitGroup
	var upN, downN int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		upN, _ = io.Copy(up, cr)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		downN, _ = io.Copy(c, ur)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	wg.Wait()
	up.Close()
	d.track(up, false)
	ev.BytesUp += upN
	ev.BytesDown += downN
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}
