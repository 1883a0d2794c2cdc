package sbx

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Duration is a time span in JSON: written as a Go duration string
// ("10m0s"), read from a duration string or a number of seconds.
type Duration time.Duration

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a duration string ("90s", "30m", "2h") or a number
// of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		*d = Duration(f * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"30m\" or a number of seconds")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a string like \"30m\" or a number of seconds", s)
	}
	*d = Duration(v)
	return nil
}

// Size is a byte count in JSON: written as an integer, read from an
// integer or a string with a binary unit ("512m", "1GiB", "64k").
type Size int64

// UnmarshalJSON accepts a number of bytes or a string with a unit.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size: want a number of bytes or a string like \"512m\"")
	}
	v, err := ParseSize(str)
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// ParseSize parses a byte count with an optional binary unit: k, m, g or t,
// alone or followed by "b" or "ib" ("512m", "512MiB" and "512mb" are all
// 512 MiB). A bare number is bytes.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	units := []struct {
		suffix string
		mult   int64
	}{{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}}
	found := false
	for _, u := range units {
		for _, suf := range []string{u.suffix + "ib", u.suffix + "b", u.suffix} {
			if !found && strings.HasSuffix(t, suf) {
				t, mult, found = strings.TrimSpace(strings.TrimSuffix(t, suf)), u.mult, true
			}
		}
	}
	if !found {
		t = strings.TrimSuffix(t, "b")
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want bytes or a number with k, m, g or t (e.g. 512m)", s)
	}
	return int64(f * float64(mult)), nil
}

// strictUnmarshal decodes data into v, refusing unknown fields: a typo in
// a request is an error, not a silently ignored option.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// EnvMap turns KEY=VALUE entries into a map, a later entry of a key
// winning; an entry without "=" or with an empty key is ErrInvalid. It is
// how ExecRequest.Env goes on the wire.
func EnvMap(env []string) (map[string]string, error) {
	if len(env) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: env entry %q: want KEY=VALUE", ErrInvalid, kv)
		}
		m[k] = v
	}
	return m, nil
}

// envList is the KEY=VALUE entries of m, sorted by key.
func envList(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// maxWireDuration bounds a duration read as seconds, so that a huge
// number cannot overflow time.Duration.
const maxWireDuration = 100 * 365 * 24 * time.Hour

// secondsDuration is s seconds as a time.Duration, at most
// maxWireDuration; a negative s stays negative (for the caller to refuse).
func secondsDuration(s float64) time.Duration {
	switch d := s * float64(time.Second); {
	case d >= float64(maxWireDuration):
		return maxWireDuration
	case d <= -float64(maxWireDuration):
		return -maxWireDuration
	default:
		return time.Duration(d)
	}
}
