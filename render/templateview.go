package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
)

// DockerView is a sandbox's record as the templates of ps --format and
// inspect -f see it: every field of the record (.ID, .Name, .Status,
// .Options, .Network...), and docker's names for what docker users type:
// .Names (the name), .Ports ("0.0.0.0:32768->80/tcp, ..."), .State with
// docker's .State.Status, .State.Running, .State.Paused, .State.ExitCode,
// .State.StartedAt and .State.FinishedAt ({{.State}} alone prints the
// status), and .Image, which prints the image's reference (.Image.Digest
// still reads the record's).
type DockerView struct {
	*sbx.Sandbox
	Names string
	Ports string
	State DockerState
}

// DockerState is docker's .State of a container, from a sandbox's record.
type DockerState struct {
	Status                string
	Running, Paused       bool
	ExitCode              int
	StartedAt, FinishedAt time.Time
}

// String is the status, what {{.State}} prints.
func (s DockerState) String() string { return s.Status }

// DockerViews wraps each sandbox of list for a template.
func DockerViews(list []*sbx.Sandbox) []DockerView {
	out := make([]DockerView, 0, len(list))
	for _, sb := range list {
		v := DockerView{Sandbox: sb, Names: sb.Name}
		st := sb.State()
		v.State = DockerState{Status: string(st), Running: st == sbx.StatusRunning, Paused: st == sbx.StatusPaused}
		if e := sb.LastExit(); e != nil {
			v.State.ExitCode, v.State.StartedAt, v.State.FinishedAt = e.ExitCode, e.StartedAt, e.FinishedAt
		}
		if sb.Network != nil {
			var ports []string
			for _, p := range sb.Network.Ports {
				ports = append(ports, fmt.Sprintf("%s->%d/%s", p.HostAddr(), p.ContainerPort, p.Proto))
			}
			v.Ports = strings.Join(ports, ", ")
		}
		out = append(out, v)
	}
	return out
}
