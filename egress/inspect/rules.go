package inspect

import (
	"path"
	"strings"
)

// Rule allows requests by method and path.
type Rule struct {
	// Method is an HTTP method ("GET", "POST"), or "" or "*" for any.
	Method string
	// Path is a glob over "/"-separated segments: "*" (or any
	// path.Match pattern) matches within one segment, "**" any number of
	// segments, e.g. "/repos/**" or "/v1/*/messages".
	Path string
}

// String is the rule as written in a policy: "POST /repos/**".
func (r Rule) String() string {
	m := r.Method
	if m == "" {
		m = "*"
	}
	return m + " " + r.Path
}

// Matches reports whether a request with method and (unescaped) path p
// is allowed by the rule.
func (r Rule) Matches(method, p string) bool {
	if r.Method != "" && r.Method != "*" && !strings.EqualFold(r.Method, method) {
		return false
	}
	return MatchPath(r.Path, p)
}

// MatchPath reports whether the request path p matches the glob pattern.
// Both are cleaned first, so "/a/../b" is "/b" for the rule as for most
// servers; a pattern of "" or "/**" matches every path.
func MatchPath(pattern, p string) bool {
	if pattern == "" {
		return true
	}
	return matchSegments(split(pattern), split(p))
}

// split cleans an absolute path and returns its segments.
func split(p string) []string {
	c := path.Clean("/" + p)
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// matchSegments matches pattern segments against path segments.
func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(segs); i++ {
				if matchSegments(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// MatchHost reports whether the host name matches a host pattern of a
// policy: "api.example.com" exactly, "*.example.com" one more label,
// "**.example.com" one or more labels (never the apex). Both are
// compared in lower case without a trailing dot.
func MatchHost(pattern, host string) bool {
	pattern = strings.ToLower(strings.TrimSuffix(pattern, "."))
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case strings.HasPrefix(pattern, "**."):
		return strings.HasSuffix(host, pattern[2:]) && len(host) > len(pattern)-2
	case strings.HasPrefix(pattern, "*."):
		rest, ok := strings.CutSuffix(host, pattern[1:])
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	return pattern == host
}
