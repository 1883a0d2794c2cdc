package termsafe

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"plain text: ok":                  "plain text: ok",
		"\x1b]0;owned\x07x\u202e":         "?]0;owned?x?",
		"ok: \x00\x1b[2J\xff\r\n\t\u0085": "ok: ??[2J?????",
		"héllo 世界":                        "héllo 世界",
	} {
		if got := String(in, 0); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	if got := String(strings.Repeat("a", 600), 512); len(got) != 512 {
		t.Errorf("len %d", len(got))
	}
}
