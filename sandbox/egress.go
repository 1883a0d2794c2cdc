package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/egress/egressd"
	"github.com/sbxrun/sbx/netns"
)

// egressReadyTimeout bounds the wait for the bridge's egress daemon to
// listen, before a sandbox whose policy needs it starts.
const egressReadyTimeout = 10 * time.Second

// egressIdleChecks is how many idle looks in a row (egressIdleInterval
// apart) an on-demand daemon makes before it exits.
const (
	egressIdleChecks   = 3
	egressIdleInterval = 5 * time.Second
)

// egressState is the in-process egress daemon of a Host that runs one
// (sbx serve, an embedder without HostConfig.EgressCommand).
type egressState struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
	// Inspector, if set, takes connections to inspected hosts.
	inspector egress.Inspector
	// counts are the decisions of the daemon this process ran, by kind
	// and decision.
	counts map[[2]string]uint64
}

// EgressCounts returns how many decisions of each kind and outcome the
// egress daemon this Host runs (sbx serve's, in-process) made since the
// Host opened, sorted; none when the daemon runs in another process.
func (h *Host) EgressCounts() []sbx.EgressCount {
	h.egress.mu.Lock()
	out := make([]sbx.EgressCount, 0, len(h.egress.counts))
	for k, n := range h.egress.counts {
		out = append(out, sbx.EgressCount{Kind: k[0], Decision: k[1], N: n})
	}
	h.egress.mu.Unlock()
	slices.SortFunc(out, func(a, b sbx.EgressCount) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Decision, b.Decision))
	})
	return out
}

// countEgress counts one decision of the daemon.
func (h *Host) countEgress(kind, decision string) {
	h.egress.mu.Lock()
	if h.egress.counts == nil {
		h.egress.counts = map[[2]string]uint64{}
	}
	h.egress.counts[[2]string{kind, decision}]++
	h.egress.mu.Unlock()
}

// SetEgressInspector sets what takes the connections to inspected hosts
// (L7 rules, secrets) of the egress daemon this Host runs; without one
// they are refused. Call before anything starts the daemon.
func (h *Host) SetEgressInspector(i egress.Inspector) {
	h.egress.mu.Lock()
	defer h.egress.mu.Unlock()
	h.egress.inspector = i
}

// RunEgress runs the egress daemon of the host's bridge (resolver and
// proxy for the sandboxes whose egress policy names hosts) unless another
// process does; it reports whether it ran. With untilIdle it returns once
// no sandbox of the bridge needs it (`sbx egressd`, started on demand);
// without, it waits for the lock if another process holds it and serves
// until ctx ends (`sbx serve`).
func (h *Host) RunEgress(ctx context.Context, untilIdle bool) (bool, error) {
	n, err := h.network()
	if err != nil {
		return false, err
	}
	ran := false
	for {
		unlock, err := n.LockEgress()
		if errors.Is(err, netns.ErrEgressLocked) {
			if untilIdle {
				return ran, nil
			}
			select {
			case <-ctx.Done():
				return ran, nil
			case <-time.After(egressIdleInterval):
				continue
			}
		}
		if err != nil {
			return ran, err
		}
		ran = true
		err = h.serveEgress(ctx, n, untilIdle)
		unlock()
		if err != nil || ctx.Err() != nil {
			h.tidyEgress(n)
			return ran, err
		}
		// A create may have attached a sandbox that needs the daemon after
		// the last look, and seen the lock held: look again.
		if n.ProxiedSandboxes() == 0 {
			h.tidyEgress(n)
			return ran, nil
		}
	}
}

// tidyEgress removes what is left of the bridge's state once the daemon
// has stopped, if no sandbox of the bridge is left.
func (h *Host) tidyEgress(n *netns.Network) {
	if err := n.TidyEgress(); err != nil {
		h.log.Warn("egress daemon: tidy the bridge's state", "err", err)
	}
}

// serveEgress runs the daemon with the lock held.
func (h *Host) serveEgress(ctx context.Context, n *netns.Network, untilIdle bool) error {
	gw, err := n.EgressListen()
	if err != nil {
		return err
	}
	h.egress.mu.Lock()
	inspector := h.egress.inspector
	h.egress.mu.Unlock()
	if inspector == nil {
		ins, err := newInspector(filepath.Join(h.store.Root(), "network"))
		if err != nil {
			return err
		}
		defer ins.Close()
		inspector = ins
	}
	lookup := n.EgressLookup()
	audit := newEgressAudit(filepath.Join(h.store.Root(), "network", "egress-audit.jsonl"), h)
	defer audit.close()
	d, err := egressd.Listen(egressd.Config{
		Listen: gw, InHostNS: n.InHostNS, Inspector: inspector, Logger: h.log, Audit: audit.record,
		Lookup: func(ip netip.Addr) (*egressd.Target, bool) {
			t, ok := lookup(ip)
			if !ok {
				return nil, false
			}
			up := make([]netip.AddrPort, 0, len(t.DNS))
			for _, a := range t.DNS {
				up = append(up, netip.AddrPortFrom(a, 53))
			}
			return &egressd.Target{Policy: t.Policy, Upstream: up,
				Sandbox: egress.SandboxRef{ID: t.Sandbox, IP: t.IP, StateDir: egress.StateDir(t.Root, t.Sandbox)}}, true
		},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if untilIdle {
		go func() {
			idle := 0
			for idle < egressIdleChecks {
				select {
				case <-ctx.Done():
					return
				case <-time.After(egressIdleInterval):
				}
				if n.ProxiedSandboxes() == 0 {
					idle++
				} else {
					idle = 0
				}
			}
			cancel()
		}()
	}
	h.log.Info("egress daemon serving", "address", gw)
	return d.Serve(ctx)
}

// ensureEgress makes sure the bridge's egress daemon runs and listens,
// starting it if no process does: as HostConfig.EgressCommand in the
// background, or else in this process until the Host closes.
func (h *Host) ensureEgress(ctx context.Context) error {
	n, err := h.network()
	if err != nil {
		return err
	}
	if !egressLocked(n) {
		if err := h.startEgress(); err != nil {
			return fmt.Errorf("start the egress daemon: %w", err)
		}
	}
	gw, err := n.EgressListen()
	if err != nil {
		return err
	}
	addr := netip.AddrPortFrom(gw, egress.ProxyPort).String()
	deadline := time.Now().Add(egressReadyTimeout)
	for {
		var c net.Conn
		err := n.InHostNS(func() (err error) {
			c, err = net.DialTimeout("tcp4", addr, time.Second)
			return err
		})
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the egress daemon does not listen on %s after %s (see sbx egressd, or the server's log): %w", addr, egressReadyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// egressLocked reports whether a process holds the bridge's egress lock.
func egressLocked(n *netns.Network) bool {
	unlock, err := n.LockEgress()
	if err != nil {
		return true
	}
	unlock()
	return false
}

func (h *Host) startEgress() error {
	if len(h.cfg.EgressCommand) > 0 {
		return SpawnDetached(h.cfg.EgressCommand)
	}
	h.egress.mu.Lock()
	defer h.egress.mu.Unlock()
	if h.egress.running {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.egress.running, h.egress.cancel, h.egress.done = true, cancel, make(chan struct{})
	go func() {
		defer close(h.egress.done)
		if _, err := h.RunEgress(ctx, false); err != nil {
			h.log.Error("egress daemon stopped; sandboxes that name hosts get no traffic until it runs again", "err", err)
		}
		h.egress.mu.Lock()
		h.egress.running = false
		h.egress.mu.Unlock()
	}()
	return nil
}

// stopEgress stops the in-process daemon (Close).
func (h *Host) stopEgress() {
	h.egress.mu.Lock()
	cancel, done := h.egress.cancel, h.egress.done
	h.egress.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// resumeEgress starts the daemon if sandboxes of the bridge need it (a
// server's start, sbx gc): after a reboot of sbx, they get traffic again.
func (h *Host) resumeEgress(ctx context.Context) {
	if !h.networkExists() {
		return
	}
	n, err := h.network()
	if err != nil || n.ProxiedSandboxes() == 0 {
		return
	}
	if err := h.ensureEgress(ctx); err != nil {
		h.log.Warn("egress daemon", "err", err)
	}
}

// egressAudit writes the daemon's audit events: to the Host's event
// stream and, as JSON lines, to a file capped at egressAuditMax bytes
// (the older half kept as FILE.1).
type egressAudit struct {
	mu   sync.Mutex
	path string
	f    *os.File
	size int64
	h    *Host
}

const egressAuditMax = 16 << 20

func newEgressAudit(path string, h *Host) *egressAudit {
	return &egressAudit{path: path, h: h}
}

func (a *egressAudit) record(ev egress.AuditEvent) {
	a.h.countEgress(ev.Kind, ev.Decision)
	a.h.events.bus.publish(sbx.Event{Type: sbx.EventEgress, Time: ev.Time, Sandbox: ev.Sandbox, Egress: &sbx.EgressAudit{
		Kind: ev.Kind, Name: ev.Name, Addr: ev.Addr, Rule: ev.Rule, Decision: ev.Decision, Reason: ev.Reason,
		Method: ev.Method, Path: ev.Path, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown}})
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil || a.size > egressAuditMax {
		if a.f != nil {
			a.f.Close()
			_ = os.Rename(a.path, a.path+".1")
		}
		f, err := os.OpenFile(a.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return
		}
		fi, _ := f.Stat()
		a.f, a.size = f, fi.Size()
	}
	n, _ := a.f.Write(append(line, '\n'))
	a.size += int64(n)
}

func (a *egressAudit) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		a.f.Close()
	}
}
