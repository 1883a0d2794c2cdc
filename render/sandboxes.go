package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	units "github.com/docker/go-units"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
)

// ListOptions say how Sandboxes shows a list.
type ListOptions struct {
	// Quiet prints only the full IDs, one a line.
	Quiet bool
	// NoTrunc prints full IDs and commands.
	NoTrunc bool
	// Format is "table" or "json"; Template, when set, is run per sandbox
	// instead (ParseFormat).
	Format   string
	Template *template.Template
}

// Sandboxes writes list as sbx ps shows it: a table, IDs, JSON (an array,
// [] for none) or a template per sandbox.
func Sandboxes(w io.Writer, list []*sbx.Sandbox, o ListOptions) error {
	switch {
	case o.Quiet: // full IDs, as sbx always printed them
		for _, sb := range list {
			fmt.Fprintln(w, sb.ID)
		}
		return nil
	case o.Template != nil:
		return Each(w, o.Template, DockerViews(list))
	case o.Format == "json":
		if list == nil {
			list = []*sbx.Sandbox{}
		}
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "SANDBOX ID\tIMAGE\tCOMMAND\tSTATUS\tCREATED\tNAME\tLABELS")
	for _, sb := range list {
		id := sb.ShortID()
		if o.NoTrunc {
			id = sb.ID
		}
		created := "-"
		if !sb.Created.IsZero() {
			created = Age(sb.Created)
		}
		command := strings.Join(sb.Options.Cmd, " ")
		if !o.NoTrunc {
			command = Truncate(command, 20)
		}
		if command != "" {
			command = strconv.Quote(command)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, ImageOf(&sb.Options), command, StatusOf(sb), created, sb.Name, Labels(sb.Options.Labels))
	}
	return tw.Flush()
}

// StatusOf is a sandbox's status as sbx ps shows it, in docker's words:
// "Up 3 minutes" (with " (Paused)"), "Exited (5) 3 seconds ago" for a
// stopped sandbox and for a running one whose main command ended for good,
// "Restarting (1) 2 seconds ago" while its main command waits to be
// restarted; sbx's own statuses (creating, pooled, ...) as they are.
func StatusOf(sb *sbx.Sandbox) string {
	if sb.Idle {
		return string(sb.Status) + " (idle, checkpointed)"
	}
	switch st := sb.State(); st {
	case sbx.StatusExited, sbx.StatusRestarting:
		word := "Exited"
		if st == sbx.StatusRestarting {
			word = "Restarting"
		}
		e := sb.LastExit()
		if e == nil {
			if sb.Stopped == nil {
				return word
			}
			return word + " " + Age(*sb.Stopped)
		}
		at := e.FinishedAt
		if at.IsZero() && sb.Stopped != nil {
			at = *sb.Stopped
		}
		return fmt.Sprintf("%s (%d) %s", word, e.ExitCode, Age(at))
	case sbx.StatusRunning, sbx.StatusPaused:
		up := "Up"
		if sb.Started != nil {
			up += " " + units.HumanDuration(time.Since(*sb.Started))
		}
		if st == sbx.StatusPaused {
			up += " (Paused)"
		}
		return up
	}
	return string(sb.Status)
}

// StatsHeader is the header line of StatsRows' table.
const StatsHeader = "ID\tNAME\tCPU %\tCPU TIME\tMEMORY\tLIMIT\tPEAK MEMORY\tPIDS\tOOM KILLS"

// StatsRows writes one reading of sbx stats: with format "json" one
// object per sandbox a line, else a table's rows, after the header when
// header is set (streaming prints it once, not with every reading).
func StatsRows(w io.Writer, rows []sbx.StatsRow, format string, header bool) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if header {
		fmt.Fprintln(tw, StatsHeader)
	}
	for _, r := range rows {
		u := r.Usage
		limit := "-"
		if u.MemoryLimitBytes > 0 {
			limit = units.BytesSize(float64(u.MemoryLimitBytes))
		}
		name := r.Name
		if name == "" {
			name = "-"
		}
		cpu := time.Duration(u.CPUTimeS * float64(time.Second)).Round(time.Millisecond)
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%s\t%s\t%s\t%s\t%d\t%d\n", r.ID[:min(12, len(r.ID))], name, r.CPUPercent, cpu,
			units.BytesSize(float64(u.MemoryCurrentBytes)), limit, units.BytesSize(float64(u.MemoryPeakBytes)), u.Pids, u.OOMKills)
	}
	return tw.Flush()
}

// Processes writes a sandbox's processes as sbx top's table.
func Processes(w io.Writer, ps []sbx.ProcessInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tPPID\tHOST PID\tUID\tSTATE\tTIME\tRSS\tCOMMAND")
	for _, p := range ps {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", p.PID, p.PPID, p.HostPID, p.UID, p.State,
			time.Duration(p.CPUTimeS*float64(time.Second)).Round(10*time.Millisecond), Bytes(p.RSSBytes), p.Command)
	}
	return tw.Flush()
}

// Pools writes warm pools as sbx pool ls's table.
func Pools(w io.Writer, list []*sbx.Pool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tIMAGE\tSIZE\tREADY\tSTARTING\tKEY")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.12s\n", p.Name, ImageOf(&p.Options), p.Size, len(p.Ready), p.Starting, p.Key)
	}
	return tw.Flush()
}

// GCReport writes what sbx gc did, one line per sandbox or orphan.
func GCReport(w io.Writer, rep *sbx.GCReport) {
	for _, done := range []struct {
		what string
		ids  []string
	}{
		{"removed", rep.Runs}, {"removed expired", rep.Expired}, {"removed interrupted", rep.Interrupted},
		{"marked stopped", rep.Stopped}, {"removed orphan", rep.Orphans}, {"removed pool member", rep.Pooled},
		{"removed (--rm, its command ended)", rep.AutoRemoved},
	} {
		for _, id := range done.ids {
			fmt.Fprintln(w, done.what, id)
		}
	}
	if rep.PartialSnapshots > 0 {
		fmt.Fprintln(w, "removed partial snapshots:", rep.PartialSnapshots)
	}
}

// Info writes the host facts as sbx info's text.
func Info(w io.Writer, info *sbx.HostInfo) {
	fmt.Fprintf(w, "sbx:          %s\nkernel:       %s\ncgroups:      %s (%s)\ncgroup parent: /%s\nswap limit:   %v\nseccomp:      %v %s\noverlayfs:    %v\nuser ns:      %v\nroot:         %s\nrun root:     %s\n",
		info.Version, info.Kernel, info.CgroupMode, strings.Join(info.CgroupControllers, ","), strings.TrimPrefix(info.CgroupParent, "/"),
		info.SwapLimit, info.Seccomp, info.LibseccompVersion, info.Overlayfs, info.UserNamespaces, info.Root, info.RunRoot)
	if info.Checkpoints != "" {
		fmt.Fprintln(w, "checkpoints: ", info.Checkpoints)
	}
	fmt.Fprintln(w, "uses:")
	for _, u := range info.Uses {
		fmt.Fprintln(w, "  -", u)
	}
	for _, warn := range info.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
}

// Ports writes a sandbox's published ports as docker port does: every
// mapping ("80/tcp -> 0.0.0.0:8080"), or with a query ("80", "53/udp":
// dockerargs.MatchPort) the host address of each mapping it matches; a
// query that matches none is sbx.ErrNotFound, naming the sandbox as ref.
func Ports(w io.Writer, ref string, sb *sbx.Sandbox, query string) error {
	var ports []sbx.PortMapping
	if sb.Network != nil {
		ports = sb.Network.Ports
	}
	found := false
	for _, p := range ports {
		switch {
		case query == "":
			fmt.Fprintln(w, p)
		case dockerargs.MatchPort(p, query):
			fmt.Fprintln(w, p.HostAddr())
			found = true
		}
	}
	if query != "" && !found {
		return fmt.Errorf("%w: sandbox %s publishes no port %s", sbx.ErrNotFound, ref, query)
	}
	return nil
}
