package inspect

import (
	"regexp"
	"testing"
)

func TestMatchPath(t *testing.T) {
	for _, c := range []struct {
		pat, p string
		want   bool
	}{
		{"/repos/**", "/repos/a/b/c", true},
		{"/repos/**", "/repos", true},
		{"/repos/**", "/other", false},
		{"/v1/*/messages", "/v1/x/messages", true},
		{"/v1/*/messages", "/v1/x/y/messages", false},
		{"/v1/*.json", "/v1/a.json", true},
		{"/", "/", true},
		{"/", "/x", false},
		{"", "/anything", true},
		{"/**", "/a/b", true},
		{"/a/**/z", "/a/z", true},
		{"/a/**/z", "/a/b/c/z", true},
		{"/repos/**", "/repos/../admin", false},
	} {
		if got := MatchPath(c.pat, c.p); got != c.want {
			t.Errorf("MatchPath(%q, %q) = %v", c.pat, c.p, got)
		}
	}
}

func TestMatchHost(t *testing.T) {
	for _, c := range []struct {
		pat, h string
		want   bool
	}{
		{"api.test", "API.test.", true},
		{"api.test", "x.api.test", false},
		{"*.github.com", "api.github.com", true},
		{"*.github.com", "a.b.github.com", false},
		{"*.github.com", "github.com", false},
		{"*.github.com", "evilgithub.com", false},
		{"**.example.org", "a.b.example.org", true},
		{"**.example.org", "example.org", false},
		{"**.example.org", "evilexample.org", false},
	} {
		if got := MatchHost(c.pat, c.h); got != c.want {
			t.Errorf("MatchHost(%q, %q) = %v", c.pat, c.h, got)
		}
	}
}

func TestPlaceholderFormat(t *testing.T) {
	p, err := NewPlaceholder("sk-ant-")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sk-ant-sbx-ph-[a-z2-7]{32}$`).MatchString(p) {
		t.Fatalf("placeholder %q", p)
	}
	q, _ := NewPlaceholder("")
	if q == p[len("sk-ant-"):] {
		t.Fatal("two placeholders are equal")
	}
	if _, err := NewPlaceholder("a b"); err == nil {
		t.Fatal("accepted a prefix with a space")
	}
}
