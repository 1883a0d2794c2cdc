package dockerargs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ParseSignal turns KILL, SIGKILL, kill or 9 into "SIGKILL", the form the
// contract takes.
func ParseSignal(s string) (string, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if name := unix.SignalName(unix.Signal(n)); name != "" {
			return name, nil
		}
		return "", fmt.Errorf("invalid signal %q: no such signal number", s)
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if unix.SignalNum(name) == 0 {
		return "", fmt.Errorf("invalid signal %q: use a name like SIGTERM or KILL, or a number", s)
	}
	return name, nil
}

// Seconds is a duration flag value that also takes a plain number of
// seconds, as docker stop -t does: "5", "0.5" or "500ms". It implements
// flag.Value (and pflag.Value).
type Seconds time.Duration

func (s *Seconds) String() string { return time.Duration(*s).String() }

// Type is the value's name in help texts.
func (s *Seconds) Type() string { return "seconds" }

// Set parses seconds or a duration; negative ones are refused.
func (s *Seconds) Set(v string) error {
	d, err := time.ParseDuration(v)
	if n, nerr := strconv.ParseFloat(v, 64); nerr == nil {
		d, err = time.Duration(n*float64(time.Second)), nil
	}
	if err != nil || d < 0 {
		return fmt.Errorf("use seconds (5) or a duration (500ms)")
	}
	*s = Seconds(d)
	return nil
}

// ParseTime reads docker's --since and --until values: an RFC 3339 time
// (2026-11-28T08:00:00Z, or a date 2026-11-28), Unix seconds
// (1700000000, 1700000000.5), or a duration before now (10m, 1h30m).
func ParseTime(flag, s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("invalid --%s %q: a duration before now must be positive", flag, s)
		}
		return now.Add(-d), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid --%s %q: give an RFC 3339 time (2026-11-28T08:00:00Z), Unix seconds, or a duration before now (10m)", flag, s)
}

// ParseTimeRange reads --since and --until (ParseTime; empty: no bound).
func ParseTimeRange(since, until string, now time.Time) (from, to time.Time, err error) {
	if since != "" {
		if from, err = ParseTime("since", since, now); err != nil {
			return from, to, err
		}
	}
	if until != "" {
		if to, err = ParseTime("until", until, now); err != nil {
			return from, to, err
		}
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		return from, to, fmt.Errorf("--until %s is before --since %s", until, since)
	}
	return from, to, nil
}
