package render

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/sbxrun/sbx"
)

// Bytes is n in decimal units as sbx shows sizes: "512 B", "1.5 MB".
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// Age is how long ago t was, as docker says it ("5 minutes ago"), or
// "unknown" for the zero time.
func Age(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return units.HumanDuration(time.Since(t)) + " ago"
}

// ShortID is the first 12 hex digits of a digest, without "sha256:".
func ShortID(digest string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// Truncate shortens s to n runes, ending with "…" when it cut.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Labels is the labels as "k1=v1,k2=v2", sorted by key.
func Labels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return strings.Join(keys, ",")
}

// ImageOf is what listings show as a sandbox's image: the reference, or
// the root directory.
func ImageOf(o *sbx.Options) string {
	if o.Image != "" {
		return o.Image
	}
	return o.Rootfs
}

// JSON writes v as indented JSON and a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
