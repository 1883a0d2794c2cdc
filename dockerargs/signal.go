package dockerargs

import (
	"fmt"
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
