// Package termsafe makes text that came out of a sandbox safe to print on
// the host's terminal or to put in a log line.
package termsafe

import (
	"strings"
	"unicode"
)

// String replaces control and format characters (escape sequences,
// carriage returns, bidirectional overrides) and invalid UTF-8 with '?',
// and cuts s to at most max bytes (max <= 0: no cut).
func String(s string, max int) string {
	if max > 0 && len(s) > max {
		s = s[:max]
	}
	return strings.Map(func(r rune) rune {
		if r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
