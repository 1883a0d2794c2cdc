package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseEntries(t *testing.T) {
	p, err := Parse("api.openai.com, *.github.com:22, **.example.org,10.1.0.0/16, 203.0.113.7, !evil.example.org, !10.1.2.0/24, API.Upper.COM.")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"api.openai.com", "*.github.com:22", "**.example.org", "10.1.0.0/16", "203.0.113.7", "api.upper.com"}
	if len(p.Allow) != len(want) {
		t.Fatalf("allow = %v, want %v", p.Allow, want)
	}
	for i, r := range p.Allow {
		if r.String() != want[i] {
			t.Errorf("allow[%d] = %q, want %q", i, r, want[i])
		}
	}
	if len(p.Deny) != 2 || p.Deny[0].String() != "evil.example.org" || p.Deny[1].String() != "10.1.2.0/24" {
		t.Errorf("deny = %v", p.Deny)
	}
	if p.All || !p.HasNames() {
		t.Errorf("All = %v, HasNames = %v", p.All, p.HasNames())
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"", ",", "**", "!*", "*.com", "**.co.uk", "*.*.example.com", "exa*mple.com", "localhost",
		"example.com:0", "example.com:99999", "example.com:x", "::1", "2001:db8::/32", "10.0.0.0/33",
		"-bad.example.com", "bad_.example.com:", "ex ample.com", "b\u00fccher.de", "!evil.com",
		strings.Repeat("a", 64) + ".com",
	} {
		if p, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", s, p)
		}
	}
}

func TestAllOnlyExplicit(t *testing.T) {
	p, err := Parse("*,!evil.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !p.All {
		t.Fatal("* did not set All")
	}
	if _, ok := p.DecideName("anything.example.net", 443); !ok {
		t.Error("* does not allow a name")
	}
	if _, ok := p.DecideName("evil.example.com", 443); ok {
		t.Error("deny lost against *")
	}
	if p.ResolveName("evil.example.com") {
		t.Error("a denied name is resolved")
	}
}

func TestDecideName(t *testing.T) {
	p, err := Parse("api.example.com,*.one.example.com,**.any.example.com,ssh.example.com:22,!bad.any.example.com,!x.one.example.com:80")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		port uint16
		ok   bool
	}{
		{"api.example.com", 443, true},
		{"api.example.com", 80, true},
		{"api.example.com", 8443, false},
		{"evilapi.example.com", 443, false},
		{"api.example.com.evil.test", 443, false},
		{"example.com", 443, false},
		{"a.one.example.com", 443, true},
		{"one.example.com", 443, false}, // not the apex
		{"a.b.one.example.com", 443, false},
		{"xone.example.com", 443, false},
		{"a.any.example.com", 443, true},
		{"a.b.c.any.example.com", 80, true},
		{"any.example.com", 443, false},
		{"bad.any.example.com", 443, false}, // deny wins
		{"x.bad.any.example.com", 443, true},
		{"ssh.example.com", 22, true},
		{"ssh.example.com", 443, false},
		{"x.one.example.com", 80, false}, // deny on a port
		{"x.one.example.com", 443, true},
	}
	for _, c := range cases {
		if _, ok := p.DecideName(c.name, c.port); ok != c.ok {
			t.Errorf("DecideName(%s, %d) = %v, want %v", c.name, c.port, ok, c.ok)
		}
	}
	if !p.ResolveName("ssh.example.com") || p.ResolveName("bad.any.example.com") || !p.ResolveName("x.one.example.com") || p.ResolveName("other.example.com") {
		t.Error("ResolveName disagrees with the entries")
	}
}

func TestDecideAddr(t *testing.T) {
	p, err := Parse("10.1.0.0/16,!10.1.2.0/24,api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]bool{"10.1.0.9": true, "10.1.2.3": false, "10.2.0.1": false, "::ffff:10.1.0.9": true} {
		if _, ok := p.DecideAddr(netip.MustParseAddr(a)); ok != want {
			t.Errorf("DecideAddr(%s) = %v, want %v", a, ok, want)
		}
	}
	if !p.DeniedAddr(netip.MustParseAddr("::ffff:10.1.2.3")) || p.DeniedAddr(netip.MustParseAddr("10.1.0.1")) {
		t.Error("DeniedAddr wrong")
	}
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{"Api.Example.COM.": "api.example.com", "_srv.example.com": "_srv.example.com", "xn--bcher-kva.de": "xn--bcher-kva.de"} {
		if got, ok := NormalizeName(in); !ok || got != want {
			t.Errorf("NormalizeName(%q) = %q, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", ".", "203.0.113.1", "a..b", "b\u00fccher.de", "single", "a.b.", "x y.com", "a.-b.com"} {
		if got, ok := NormalizeName(in); ok && in != "a.b." {
			t.Errorf("NormalizeName(%q) = %q, want rejected", in, got)
		}
	}
}

func TestL7Rules(t *testing.T) {
	cases := []struct {
		rule, method, path string
		ok                 bool
	}{
		{"GET /repos/**", "GET", "/repos/a/b/c", true},
		{"GET /repos/**", "GET", "/repos", true},
		{"GET /repos/**", "POST", "/repos/a", false},
		{"GET /repos/**", "GET", "/reposx/a", false},
		{"* /v1/*/messages", "POST", "/v1/x/messages", true},
		{"* /v1/*/messages", "POST", "/v1/x/y/messages", false},
		{"POST /a/**/z", "POST", "/a/b/c/z", true},
		{"POST /a/**/z", "POST", "/a/z", true},
		{"POST /a/**/z", "POST", "/a/b/c", false},
		{"GET /", "GET", "/", true},
		{"GET /", "GET", "/x", false},
	}
	for _, c := range cases {
		r, err := ParseL7Rule(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Match(c.method, c.path); got != c.ok {
			t.Errorf("%q.Match(%s %s) = %v, want %v", c.rule, c.method, c.path, got, c.ok)
		}
	}
	for _, bad := range []string{"get /x", "GET x", "GET", "GET /x?y", "G3T /x"} {
		if _, err := ParseL7Rule(bad); err == nil {
			t.Errorf("ParseL7Rule(%q) accepted", bad)
		}
	}
}

const file = `
allow: [api.openai.com, "**.github.com", github.com, 10.1.0.0/16]
deny: [gist.github.com]
hosts:
  api.github.com:
    rules: ["GET /repos/**", "POST /repos/*/*/issues"]
  "*.github.com":
    rules: ["* /**"]
    mode: audit
secrets:
  - {name: GITHUB_TOKEN, hosts: [api.github.com, github.com], prefix: ghp_}
  - {name: OPENAI_API_KEY, hosts: [api.openai.com]}
`

func TestParseFile(t *testing.T) {
	p, err := ParseFile([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Allow) != 4 || len(p.Deny) != 1 || len(p.Hosts) != 2 || len(p.Secrets) != 2 {
		t.Fatalf("parsed %+v", p)
	}
	h, ok := p.Host("api.github.com")
	if !ok || len(h.Rules) != 2 || h.Audit {
		t.Errorf("Host(api.github.com) = %+v, %v", h, ok)
	}
	if h, _ := p.Host("x.github.com"); !h.Audit {
		t.Error("*.github.com is not in audit mode")
	}
	if !p.Inspected("github.com") || !p.Inspected("api.openai.com") || p.Inspected("a.b.github.com") {
		t.Error("Inspected disagrees with hosts and secrets")
	}
	if s := p.SecretsFor("github.com"); len(s) != 1 || s[0].Name != "GITHUB_TOKEN" || s[0].Prefix != "ghp_" {
		t.Errorf("SecretsFor(github.com) = %+v", s)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("a parsed policy does not validate: %v", err)
	}
	// JSON is YAML too.
	if _, err := ParseFile([]byte(`{"allow": ["api.openai.com"], "secrets": [{"name": "K", "hosts": ["api.openai.com"]}]}`)); err != nil {
		t.Errorf("JSON file: %v", err)
	}
}

func TestParseFileRejects(t *testing.T) {
	for name, f := range map[string]string{
		"unknown key":          "allow: [a.example.com]\nallwo: [b.example.com]\n",
		"host not allowed":     "allow: [a.example.com]\nhosts:\n  b.example.com: {rules: [\"GET /\"]}\n",
		"no rules":             "allow: [a.example.com]\nhosts:\n  a.example.com: {mode: audit}\n",
		"bad mode":             "allow: [a.example.com]\nhosts:\n  a.example.com: {rules: [\"GET /\"], mode: log}\n",
		"secret host":          "allow: [a.example.com]\nsecrets: [{name: K, hosts: [b.example.com]}]\n",
		"secret no hosts":      "allow: [a.example.com]\nsecrets: [{name: K}]\n",
		"secret bad name":      "allow: [a.example.com]\nsecrets: [{name: 1K, hosts: [a.example.com]}]\n",
		"secret twice":         "allow: [a.example.com]\nsecrets: [{name: K, hosts: [a.example.com]}, {name: K, hosts: [a.example.com]}]\n",
		"secret bad prefix":    "allow: [a.example.com]\nsecrets: [{name: K, hosts: [a.example.com], prefix: \"a b\"}]\n",
		"wildcard not covered": "allow: [\"*.example.com\"]\nhosts:\n  \"**.example.com\": {rules: [\"GET /\"]}\n",
		"deny in allow":        "allow: [\"!a.example.com\"]\n",
		"nothing allowed":      "deny: [a.example.com]\n",
	} {
		if _, err := ParseFile([]byte(f)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := "allow: [\"**.example.com\"]\nhosts:\n  \"*.a.example.com\": {rules: [\"GET /\"]}\n  \"**.b.example.com\": {rules: [\"GET /\"]}\n  c.example.com: {rules: [\"GET /\"]}\n"
	if _, err := ParseFile([]byte(ok)); err != nil {
		t.Errorf("wildcards covered by **: %v", err)
	}
}

func TestValidateValues(t *testing.T) {
	bad := []Policy{
		{Allow: []Rule{{Host: "API.example.com"}}},
		{Allow: []Rule{{Host: "a.example.com", CIDR: netip.MustParsePrefix("10.0.0.0/8")}}},
		{Allow: []Rule{{CIDR: netip.MustParsePrefix("10.0.0.1/8")}}},
		{Allow: []Rule{{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Port: 22}}},
		{},
	}
	for _, p := range bad {
		if err := p.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", p)
		}
	}
}
