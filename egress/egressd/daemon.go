package egressd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/sbxrun/sbx/egress"
)

// Target is what the daemon knows of a sandbox, looked up by its source
// address at each connection and query.
type Target struct {
	Sandbox egress.SandboxRef
	Policy  *egress.Policy
	// Upstream are the name servers the daemon asks for this sandbox.
	Upstream []netip.AddrPort
}

// Config configures a Daemon.
type Config struct {
	// Listen is the bridge's address: the proxy and the resolver listen
	// there, on egress.ProxyPort and egress.DNSPort.
	Listen netip.Addr
	// InHostNS runs f in the host's network namespace (where the bridge
	// and the uplink are); nil runs it where the caller is.
	InHostNS func(f func() error) error
	// Lookup finds the sandbox with a source address; a sandbox it does
	// not know (or whose policy has no names) gets nothing.
	Lookup func(netip.Addr) (*Target, bool)
	// Inspector takes connections to inspected hosts; nil refuses them.
	Inspector egress.Inspector
	// Audit receives one event per connection, refused query and
	// inspected request; nil only logs them (at debug level).
	Audit func(egress.AuditEvent)
	// Logger logs the daemon's own troubles; nil discards.
	Logger *slog.Logger
	// ProxyPort and DNSPort override the ports (tests).
	ProxyPort, DNSPort uint16
}

// Daemon is a running egress proxy and resolver.
type Daemon struct {
	cfg  Config
	log  *slog.Logger
	ln   net.Listener
	dnsU *dns.Server
	dnsT *dns.Server

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen opens the daemon's sockets on cfg.Listen in the host namespace.
// Serve then runs it.
func Listen(cfg Config) (*Daemon, error) {
	if cfg.Lookup == nil || !cfg.Listen.Is4() {
		return nil, errors.New("egress daemon: Config.Lookup and an IPv4 Config.Listen are required")
	}
	if cfg.ProxyPort == 0 {
		cfg.ProxyPort = egress.ProxyPort
	}
	if cfg.DNSPort == 0 {
		cfg.DNSPort = egress.DNSPort
	}
	if cfg.InHostNS == nil {
		cfg.InHostNS = func(f func() error) error { return f() }
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, conns: map[net.Conn]struct{}{}}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	var pc net.PacketConn
	var dnsLn net.Listener
	err := cfg.InHostNS(func() (err error) {
		lc := net.ListenConfig{}
		ctx := context.Background()
		if d.ln, err = lc.Listen(ctx, "tcp4", netip.AddrPortFrom(cfg.Listen, cfg.ProxyPort).String()); err != nil {
			return err
		}
		if pc, err = lc.ListenPacket(ctx, "udp4", netip.AddrPortFrom(cfg.Listen, cfg.DNSPort).String()); err != nil {
			d.ln.Close()
			return err
		}
		if dnsLn, err = lc.Listen(ctx, "tcp4", netip.AddrPortFrom(cfg.Listen, cfg.DNSPort).String()); err != nil {
			d.ln.Close()
			pc.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("egress daemon: listen on %s: %w (is another egress daemon running for this bridge?)", cfg.Listen, err)
	}
	h := dns.HandlerFunc(d.serveDNS)
	d.dnsU = &dns.Server{PacketConn: pc, Handler: h}
	d.dnsT = &dns.Server{Listener: dnsLn, Handler: h, ReadTimeout: 5 * time.Second}
	return d, nil
}

// Serve runs the daemon until ctx ends or Close; then it closes every
// connection it proxies.
func (d *Daemon) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- d.dnsU.ActivateAndServe() }()
	go func() { errc <- d.dnsT.ActivateAndServe() }()
	go func() { errc <- d.acceptLoop(ctx) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	d.Close()
	if d.isClosed() || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("egress daemon: %w", err)
}

// Close stops the daemon and resets every connection it proxies.
func (d *Daemon) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	for c := range d.conns {
		resetClose(c)
	}
	d.mu.Unlock()
	d.ln.Close()
	_ = d.dnsU.Shutdown()
	_ = d.dnsT.Shutdown()
	d.wg.Wait()
}

func (d *Daemon) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// track records a live connection (false: the daemon is closing).
func (d *Daemon) track(c net.Conn, add bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !add {
		delete(d.conns, c)
		return true
	}
	if d.closed {
		return false
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *Daemon) acceptLoop(ctx context.Context) error {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			if d.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if !d.track(c, true) {
			resetClose(c)
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer d.track(c, false)
			d.handle(ctx, c.(*net.TCPConn))
		}()
	}
}

// dialHost dials addr from the host namespace.
func (d *Daemon) dialHost(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := d.cfg.InHostNS(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr.String())
		return err
	})
	return c, err
}

func (d *Daemon) audit(ev egress.AuditEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if d.cfg.Audit != nil {
		d.cfg.Audit(ev)
		return
	}
	d.log.Debug("egress", "sandbox", ev.Sandbox, "kind", ev.Kind, "name", ev.Name, "addr", ev.Addr, "decision", ev.Decision, "rule", ev.Rule, "reason", ev.Reason)
}

// resetClose closes c with a TCP reset (SO_LINGER 0).
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
