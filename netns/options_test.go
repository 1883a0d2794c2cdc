package netns

import (
	"net/netip"
	"testing"
)

func TestParsePublish(t *testing.T) {
	good := map[string]PortMapping{
		"8080:80":               {HostPort: 8080, ContainerPort: 80, Proto: TCP},
		"0:80/udp":              {HostPort: 0, ContainerPort: 80, Proto: UDP},
		"127.0.0.1:8080:80/tcp": {HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 8080, ContainerPort: 80, Proto: TCP},
		"0.0.0.0:53:53/UDP":     {HostPort: 53, ContainerPort: 53, Proto: UDP},
		"192.0.2.1:65535:1":     {HostIP: netip.MustParseAddr("192.0.2.1"), HostPort: 65535, ContainerPort: 1, Proto: TCP},
		"80":                    {HostPort: 0, ContainerPort: 80, Proto: TCP}, // docker's -p CTRPORT: a free host port
		"53/udp":                {HostPort: 0, ContainerPort: 53, Proto: UDP},
		"127.0.0.1::80":         {HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 0, ContainerPort: 80, Proto: TCP},
	}
	for in, want := range good {
		got, err := ParsePublish(in)
		if err != nil || got != want {
			t.Errorf("ParsePublish(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "/udp", "a:80", "80:0", "80:70000", "80:80/sctp", "::1:80:80", "300.1.1.1:80:80", "80:80/"} {
		if in == "80:80/" {
			continue // empty protocol means tcp, like docker
		}
		if got, err := ParsePublish(in); err == nil {
			t.Errorf("ParsePublish(%q) = %+v, want an error", in, got)
		}
	}
	if s := (PortMapping{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 1, ContainerPort: 2, Proto: UDP}).String(); s != "127.0.0.1:1:2/udp" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseEgressAndHostPort(t *testing.T) {
	for in, kind := range map[string]EgressKind{"": EgressDefault, "default": EgressDefault, "none": EgressNone, "10.0.0.0/8, 192.0.2.7": EgressAllowList} {
		p, err := ParseEgress(in)
		if err != nil || p.Kind != kind {
			t.Errorf("ParseEgress(%q) = %+v, %v", in, p, err)
		}
	}
	p, _ := ParseEgress("10.1.2.3/8,192.0.2.7")
	if len(p.Allow) != 2 || p.Allow[0].String() != "10.0.0.0/8" || p.Allow[1].String() != "192.0.2.7/32" {
		t.Errorf("allow-list = %v", p.Allow)
	}
	for _, in := range []string{",", "10.0.0.0/33", "fe80::/10", "all"} {
		if _, err := ParseEgress(in); err == nil {
			t.Errorf("ParseEgress(%q) succeeded", in)
		}
	}
	if h, err := ParseHostPort("53/udp"); err != nil || h != (HostPort{Port: 53, Proto: UDP}) {
		t.Errorf("ParseHostPort(53/udp) = %+v, %v", h, err)
	}
	for _, in := range []string{"0", "x", "70000", "22/icmp"} {
		if _, err := ParseHostPort(in); err == nil {
			t.Errorf("ParseHostPort(%q) succeeded", in)
		}
	}
	if _, err := ParseMode("bridged"); err == nil {
		t.Error("ParseMode(bridged) succeeded")
	}
}

func TestAttachOptionsValidate(t *testing.T) {
	m := PortMapping{HostPort: 80, ContainerPort: 80, Proto: TCP}
	bad := []AttachOptions{
		{Mode: ModeNone, Publish: []PortMapping{m}},
		{Mode: ModeHost, Egress: EgressPolicy{Kind: EgressNone}},
		{Mode: ModeBridge, Publish: []PortMapping{m, {HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 80, ContainerPort: 81, Proto: TCP}}},
		{Mode: ModeBridge, Egress: EgressPolicy{Kind: EgressAllowList}},
		{Mode: ModeBridge, Hostname: "-bad-"},
		{Mode: ModeBridge, DNS: []netip.Addr{netip.MustParseAddr("::1")}},
		{Mode: "weird"},
	}
	for i, o := range bad {
		if err := o.validate(); err == nil {
			t.Errorf("case %d: %+v validated", i, o)
		}
	}
	ok := AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m, {HostPort: 80, ContainerPort: 80, Proto: UDP}}, Hostname: "a.b-c"}
	if err := ok.validate(); err != nil {
		t.Errorf("valid options rejected: %v", err)
	}
}

func TestLastAddr(t *testing.T) {
	if got := lastAddr(netip.MustParsePrefix("10.88.0.0/16")); got.String() != "10.88.255.255" {
		t.Errorf("lastAddr = %s", got)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := ParseFlags(Flags{Network: "bridge", Publish: []string{"8080:80", "0:53/udp"}, Egress: "203.0.113.0/24",
		AllowHostPorts: []string{"3128"}, DNS: []string{"192.0.2.53"}, Hostname: "box"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != ModeBridge || len(o.Publish) != 2 || o.Egress.Kind != EgressAllowList || len(o.AllowHostPorts) != 1 || len(o.DNS) != 1 || o.Hostname != "box" {
		t.Fatalf("ParseFlags = %+v", o)
	}
	for _, f := range []Flags{
		{Publish: []string{"8080:80"}},                    // needs bridge
		{Network: "bridge", DNS: []string{"resolver"}},    // not an address
		{Network: "bridge", Egress: "nonsense"},           // not a CIDR
		{Network: "bridge", AllowHostPorts: []string{""}}, // empty port
	} {
		if _, err := ParseFlags(f); err == nil {
			t.Errorf("ParseFlags(%+v) succeeded", f)
		}
	}
}
