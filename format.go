package sbx

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// How front-ends show the contract's values as text, one way for all.

// String is the event as one line: time, type, then what it names
// (sandbox, name=, status=, exit_code=, oom_kills=, image=).
func (e Event) String() string {
	parts := []string{e.Time.Local().Format(time.RFC3339Nano), e.Type}
	if e.Sandbox != "" {
		parts = append(parts, e.Sandbox)
	}
	if e.Name != "" {
		parts = append(parts, "name="+e.Name)
	}
	if e.Status != "" {
		parts = append(parts, "status="+string(e.Status))
	}
	if e.ExitCode != nil {
		parts = append(parts, "exit_code="+strconv.Itoa(*e.ExitCode))
	}
	if e.OOMKills > 0 {
		parts = append(parts, fmt.Sprintf("oom_kills=%d", e.OOMKills))
	}
	if e.Image != "" {
		parts = append(parts, "image="+e.Image)
	}
	return strings.Join(parts, " ")
}

// HostAddr is the host side of a published port, "IP:PORT" (0.0.0.0 for
// every address).
func (p PortMapping) HostAddr() string {
	host := "0.0.0.0"
	if p.HostIP.IsValid() {
		host = p.HostIP.String()
	}
	return fmt.Sprintf("%s:%d", host, p.HostPort)
}

// String is the mapping as docker port prints it: "80/tcp -> 0.0.0.0:8080".
func (p PortMapping) String() string {
	return fmt.Sprintf("%d/%s -> %s", p.ContainerPort, p.Proto, p.HostAddr())
}

// LastLines keeps the output frames (stdout and stderr, in the order they
// were written) of the last n lines, the first kept frame cut at its line
// start: what docker logs --tail n shows.
func LastLines(frames []LogFrame, n int) []LogFrame {
	lines := 0
	for i := len(frames) - 1; i >= 0; i-- {
		data := frames[i].Data
		if i == len(frames)-1 {
			data = strings.TrimSuffix(data, "\n")
		}
		for j := len(data) - 1; j >= 0; j-- {
			if data[j] != '\n' {
				continue
			}
			if lines++; lines == n {
				if j == len(frames[i].Data)-1 { // the cut falls between frames
					return append([]LogFrame{}, frames[i+1:]...)
				}
				kept := append([]LogFrame{}, frames[i:]...)
				kept[0].Data = frames[i].Data[j+1:]
				kept[0].Offset += int64(j + 1)
				return kept
			}
		}
	}
	if n <= 0 {
		return nil
	}
	return frames
}
