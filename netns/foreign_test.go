package netns

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TestForeignRulesSurvive checks that sbx only ever touches its own
// nftables tables: a table, chain and rule of another program in the host
// namespace (a firewall, Docker) are untouched by attach, detach, pool
// fill and drain, GC and Reset.
func TestForeignRulesSurvive(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	c, err := nftables.New(nftables.WithNetNSFd(openNS(t, e.hostNS)))
	must(t, err)
	// Same families as sbx's tables, names of its own; one of them hooks
	// where sbx hooks (forward, prerouting nat).
	type foreign struct {
		table *nftables.Table
		chain *nftables.Chain
		rule  []expr.Any
	}
	var tables []foreign
	for i, fam := range []nftables.TableFamily{nftables.TableFamilyINet, nftables.TableFamilyIPv4, nftables.TableFamilyBridge} {
		tb := c.AddTable(&nftables.Table{Name: fmt.Sprintf("foreign%d", i), Family: fam})
		hook, typ := nftables.ChainHookForward, nftables.ChainTypeFilter
		if fam == nftables.TableFamilyIPv4 {
			hook, typ = nftables.ChainHookPrerouting, nftables.ChainTypeNAT
		}
		accept := nftables.ChainPolicyAccept
		ch := c.AddChain(&nftables.Chain{Name: "fwd", Table: tb, Type: typ, Hooknum: hook, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		if typ == nftables.ChainTypeNAT {
			ch.Priority = nftables.ChainPriorityNATDest
			ch.Policy = nil
		}
		// meta l4proto tcp, tcp dport 9999: counter
		rule := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(9999)},
			&expr.Counter{},
		}
		c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: rule})
		tables = append(tables, foreign{tb, ch, rule})
	}
	must(t, c.Flush())
	t.Cleanup(func() {
		for _, f := range tables {
			c.DelTable(f.table)
		}
		_ = c.Flush()
	})
	check := func(step string) {
		t.Helper()
		for _, f := range tables {
			rules, err := c.GetRules(f.table, f.chain)
			if err != nil {
				t.Fatalf("after %s: foreign table %s (family %d) or its chain is gone: %v", step, f.table.Name, f.table.Family, err)
			}
			if len(rules) != 1 {
				t.Fatalf("after %s: foreign chain %s/%s has %d rules, want 1", step, f.table.Name, f.chain.Name, len(rules))
			}
			got := rules[0].Exprs
			if len(got) != len(f.rule) || !reflect.DeepEqual(got[:4], f.rule[:4]) {
				t.Fatalf("after %s: foreign rule in %s changed: %#v", step, f.table.Name, got)
			}
		}
	}
	check("setup")
	pub, _ := ParsePublish("0:80")
	a := e.attach("fg-a", AttachOptions{Publish: []PortMapping{pub}, Egress: mustEgress(t, "none")})
	e.attach("fg-b", AttachOptions{})
	check("attach")
	e.expectBlocked(a.NetNSPath, webIP+":80")
	_, err = e.net.Prepare(ctx, 2)
	must(t, err)
	check("prefill")
	must(t, e.net.Detach(ctx, "fg-a"))
	check("detach")
	_, err = e.net.GC(ctx, nil) // fg-b is not live: GC removes it
	must(t, err)
	check("gc")
	must(t, e.net.DiscardPrepared(ctx))
	check("drain")
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("left after gc and drain: %v", left)
	}
	must(t, e.net.Reset(ctx))
	check("reset")
}
