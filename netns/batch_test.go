package netns

import (
	"errors"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TestRuleBatchAllOrNothing: a claim's batch (one acknowledgement, of its
// last message) is in only when every message is: a message that fails
// in the middle (a missing chain) and a batch the kernel refuses as a
// whole (a jump loop) each fail sendBatch and
// leave nothing of the batch, and the next batch goes in (on a new
// socket: the old one is not used again), its rules in their order.
func TestRuleBatchAllOrNothing(t *testing.T) {
	e := newTestEnv(t)
	e.attach("sb-any", AttachOptions{}) // the tables exist
	_, nat, _ := e.net.tables()
	a := &nftables.Chain{Name: "test-a", Table: nat}
	b := &nftables.Chain{Name: "test-b", Table: nat}
	rule := func(ch *nftables.Chain, port uint16) *nftables.Rule {
		return &nftables.Rule{Table: nat, Chain: ch, Exprs: join(l4proto(unix.IPPROTO_TCP), dport(port), verdict(expr.VerdictAccept))}
	}
	rules := func(ch *nftables.Chain) (int, error) {
		c, err := e.net.nft()
		if err != nil {
			return 0, err
		}
		rs, err := c.GetRules(nat, ch)
		return len(rs), err
	}
	chainExists := func(ch *nftables.Chain) bool {
		c, err := e.net.nft()
		must(t, err)
		_, err = c.ListChain(nat, ch.Name)
		return err == nil
	}

	// A missing chain in the middle: nothing of the batch is in.
	bad := &ruleBatch{}
	bad.AddChain(a)
	bad.AddRule(rule(a, 1))
	bad.AddRule(rule(&nftables.Chain{Name: "test-missing", Table: nat}, 2))
	bad.AddRule(rule(a, 3))
	if err := e.net.sendBatch(bad); err == nil {
		t.Fatal("a batch with a rule of a missing chain went in")
	}
	if len(e.net.nfnl) != 0 {
		t.Fatal("the socket of a refused batch was kept")
	}
	if chainExists(a) {
		t.Fatal("a refused batch left its chain")
	}

	// A loop (a jumps to b, b to a) reached from a hook is refused by
	// the kernel's check of the chains a batch reaches, which it runs on
	// the whole batch.
	loop := &ruleBatch{}
	loop.AddChain(a)
	loop.AddChain(b)
	loop.AddRule(&nftables.Rule{Table: nat, Chain: a, Exprs: jump(b.Name)})
	loop.AddRule(&nftables.Rule{Table: nat, Chain: b, Exprs: jump(a.Name)})
	loop.AddRule(&nftables.Rule{Table: nat, Chain: &nftables.Chain{Name: "published", Table: nat}, Exprs: jump(a.Name)})
	err := e.net.sendBatch(loop)
	if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EMLINK) {
		t.Fatalf("a batch with a jump loop: %v, want refused (ELOOP or EMLINK)", err)
	}
	if chainExists(a) || chainExists(b) {
		t.Fatal("a batch refused at the commit left its chains")
	}

	// The next batches go in, rules appended and inserted in order.
	good := &ruleBatch{}
	good.AddChain(a)
	good.AddRule(rule(a, 2))
	good.InsertRule(rule(a, 1))
	good.AddRule(rule(a, 3))
	must(t, e.net.sendBatch(good))
	if len(e.net.nfnl) != 1 {
		t.Fatal("the socket of a batch that went in was not kept for the next")
	}
	if n, err := rules(a); err != nil || n != 3 {
		t.Fatalf("rules after a good batch: %d, %v; want 3", n, err)
	}
	c, err := e.net.nft()
	must(t, err)
	rs, err := c.GetRules(nat, a)
	must(t, err)
	for i, r := range rs {
		want := []byte{0, byte(i + 1)}
		if cmp, ok := r.Exprs[3].(*expr.Cmp); !ok || string(cmp.Data) != string(want) {
			t.Fatalf("rule %d of %s: %#v, want the port %d (inserted first, appended after)", i, a.Name, r.Exprs[3], i+1)
		}
	}
	clean := &ruleBatch{}
	clean.FlushChain(a)
	clean.DelChain(a)
	must(t, e.net.sendBatch(clean))
	if chainExists(a) {
		t.Fatal("the chain is left after a batch that deletes it")
	}
}
