package inspect

import (
	"regexp"
	"testing"
)

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
