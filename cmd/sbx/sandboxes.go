package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/sandbox"
)

// Exit codes of the sandbox commands besides exitSbxFailed, following
// docker: 1 when the sandbox does not exist or is in the wrong state.
const exitNoSuchSandbox = 1

// openManager opens the sandbox state under --root and --run-root. The
// limits come from SBX_MAX_SANDBOXES and SBX_MEMORY_BUDGET (bytes or a size
// like 8g), so every CLI process and a server enforce the same ones.
func openManager() (*sandbox.Manager, error) {
	return openManagerImages(nil, "")
}

// openManagerImages is openManager with the image flags and --pull policy
// of sbx create.
func openManagerImages(images *imageFlags, pull string) (*sandbox.Manager, error) {
	cfg := sandbox.Config{Root: global.root, RunRoot: global.runRoot}
	if v := os.Getenv("SBX_MAX_SANDBOXES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid SBX_MAX_SANDBOXES %q: want a count", v)
		}
		cfg.MaxSandboxes = n
	}
	if v := os.Getenv("SBX_MEMORY_BUDGET"); v != "" {
		n, err := units.RAMInBytes(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid SBX_MEMORY_BUDGET %q: want a size like 8g", v)
		}
		cfg.MemoryBudget = n
	}
	subnet, err := subnetFromEnv()
	if err != nil {
		return nil, err
	}
	cfg.Subnet = subnet
	if cfg.Images, err = imageSource(images, pull); err != nil {
		return nil, err
	}
	return sandbox.New(cfg)
}

// sbxError maps a Manager error to sbx's exit codes.
func sbxError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	code := exitSbxFailed
	if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrState) || errors.Is(err, sandbox.ErrAmbiguous) || errors.Is(err, sandbox.ErrNoSuchFile) {
		code = exitNoSuchSandbox
	}
	return &exitError{code: code, msg: err.Error()}
}

type createOptions struct {
	sandboxFlags
	images  imageFlags
	pull    string
	name    string
	volumes []string
	tmpfs   []string
	labels  []string
	ttl     time.Duration
}

func init() {
	o := &createOptions{}
	cmd := &cobra.Command{
		Use:   "create [flags] (IMAGE | --rootfs DIR)",
		Short: "Create a long-lived sandbox and print its ID once it is ready",
		Long: `Create a long-lived sandbox whose PID 1 is the sbx executor, and print its ID
once the executor answers. Run commands in it with sbx exec and sbx shell;
remove it with sbx rm (or let --ttl remove it).

Every flag of sbx run applies, plus --name, --volume, --tmpfs, --label and
--ttl. --timeout does not: a sandbox's lifetime is --ttl, a command's is
sbx exec --timeout.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := o.options(args)
			if err != nil {
				return &exitError{code: exitSbxFailed, msg: err.Error()}
			}
			if err := rejectRemoteImageFlags(cmd, "pull", "platform", "insecure-registry"); err != nil {
				return err
			}
			var m sandboxBackend
			if remoteHost != "" {
				m, err = openSandboxes()
			} else {
				m, err = openManagerImages(&o.images, o.pull)
			}
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			sb, err := m.Create(ctx, opts)
			if err != nil {
				return sbxError(err)
			}
			if lm, ok := m.(*sandbox.Manager); ok && sb.ExpiresAt != nil {
				startExpiryReaper(lm) // a server reaps its own
			}
			fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
			return nil
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&o.name, "name", "", "a unique name for the sandbox")
	f.StringArrayVarP(&o.volumes, "volume", "v", nil, "mount a host directory: HOST:CONTAINER[:ro|rw]")
	f.StringArrayVar(&o.tmpfs, "tmpfs", nil, "mount an empty tmpfs: CONTAINER[:size=SIZE]")
	f.StringArrayVarP(&o.labels, "label", "l", nil, "set a label: KEY=VALUE")
	f.DurationVar(&o.ttl, "ttl", 0, "remove the sandbox this long after its creation (e.g. 30m)")
	o.images.register(cmd)
	f.StringVar(&o.pull, "pull", "", "pull the image: missing, always or never (default SBX_PULL, else missing)")
	rootCmd.AddCommand(cmd)
}

// options turns the flags into sandbox.Options.
func (o *createOptions) options(args []string) (sandbox.Options, error) {
	var opts sandbox.Options
	if o.timeout != 0 {
		return opts, errors.New("--timeout applies to sbx run and sbx exec; a sandbox's lifetime is --ttl")
	}
	switch {
	case len(args) == 1 && o.rootfs != "":
		return opts, errors.New("give either an image or --rootfs, not both")
	case len(args) == 1:
		opts.Image = args[0]
	case o.rootfs != "":
		abs, err := filepath.Abs(o.rootfs)
		if err != nil {
			return opts, fmt.Errorf("--rootfs: %w", err)
		}
		opts.Rootfs = abs
	default:
		return opts, errors.New("give an image or --rootfs DIR")
	}
	limits, err := o.limits()
	if err != nil {
		return opts, err
	}
	disk, err := o.diskBytes()
	if err != nil {
		return opts, err
	}
	opts.Limits = sandbox.Limits{MemoryBytes: limits.MemoryBytes, CPUs: limits.CPUs, Pids: limits.Pids, DiskBytes: disk}
	if _, err := o.networkOptions(); err != nil {
		return opts, err
	}
	opts.Network, opts.Publish, opts.Egress = o.network, o.publish, o.egress
	opts.AllowHostPorts, opts.DNS = o.hostPorts, o.dns
	if opts.Env, err = o.environ(); err != nil {
		return opts, err
	}
	opts.Name = o.name
	opts.Workdir = o.workdir
	opts.User = o.user
	opts.Hostname = o.hostname
	opts.ReadonlyRootfs = o.readOnly
	opts.Seccomp = o.seccomp
	opts.CapAdd, opts.CapDrop = o.capAdd, o.capDrop
	opts.TTL = o.ttl
	if o.ttl < 0 {
		return opts, fmt.Errorf("invalid --ttl %v: must be positive", o.ttl)
	}
	for _, v := range o.volumes {
		vol, err := parseVolume(v)
		if err != nil {
			return opts, err
		}
		opts.Volumes = append(opts.Volumes, vol)
	}
	for _, t := range o.tmpfs {
		tm, err := parseTmpfs(t)
		if err != nil {
			return opts, err
		}
		opts.Tmpfs = append(opts.Tmpfs, tm)
	}
	for _, l := range o.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return opts, fmt.Errorf("invalid --label %q: use KEY=VALUE", l)
		}
		if opts.Labels == nil {
			opts.Labels = map[string]string{}
		}
		opts.Labels[k] = v
	}
	return opts, nil
}

// parseVolume parses HOST:CONTAINER[:ro|rw]. The host directory must exist.
func parseVolume(s string) (sandbox.Volume, error) {
	parts := strings.Split(s, ":")
	var v sandbox.Volume
	switch {
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		v.ReadOnly = parts[2] == "ro"
	case len(parts) == 2:
	default:
		return v, fmt.Errorf("invalid --volume %q: use HOST:CONTAINER[:ro|rw]", s)
	}
	host, err := filepath.Abs(parts[0])
	if err != nil || parts[0] == "" {
		return v, fmt.Errorf("invalid --volume %q: bad host path", s)
	}
	if _, err := os.Stat(host); err != nil {
		return v, fmt.Errorf("invalid --volume %q: %w", s, err)
	}
	v.HostPath, v.Path = host, parts[1]
	return v, nil
}

// parseTmpfs parses CONTAINER[:size=SIZE].
func parseTmpfs(s string) (sandbox.Tmpfs, error) {
	p, opt, hasOpt := strings.Cut(s, ":")
	t := sandbox.Tmpfs{Path: p}
	if hasOpt {
		v, ok := strings.CutPrefix(opt, "size=")
		if !ok {
			return t, fmt.Errorf("invalid --tmpfs %q: use PATH[:size=SIZE]", s)
		}
		n, err := units.RAMInBytes(v)
		if err != nil || n <= 0 {
			return t, fmt.Errorf("invalid --tmpfs %q: bad size", s)
		}
		t.SizeBytes = n
	}
	return t, nil
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func init() {
	var all, quiet bool
	var format string
	var filters []string
	for _, name := range []string{"ps", "ls"} {
		cmd := &cobra.Command{
			Use:   name + " [-a] [-q] [--format table|json] [--filter label=K=V|status=S]",
			Short: "List sandboxes (running ones; -a for all)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				var f sandbox.Filter
				for _, fl := range filters {
					k, v, _ := strings.Cut(fl, "=")
					switch k {
					case "label":
						if err := f.ParseLabelFilter(v); err != nil {
							return sbxError(err)
						}
					case "status":
						f.Status = sandbox.Status(v)
					case "name":
						// handled below
					default:
						return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("invalid --filter %q: use label=KEY=VALUE, status=STATUS or name=NAME", fl)}
					}
				}
				f.Running = !all && f.Status == ""
				m, err := openSandboxes()
				if err != nil {
					return sbxError(err)
				}
				list, err := m.List(context.Background(), f)
				if err != nil {
					return sbxError(err)
				}
				for _, fl := range filters {
					if k, v, _ := strings.Cut(fl, "="); k == "name" {
						list = filterName(list, v)
					}
				}
				return printList(cmd.OutOrStdout(), list, quiet, format)
			},
		}
		cmd.Flags().BoolVarP(&all, "all", "a", false, "show all sandboxes, also stopped ones")
		cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only IDs")
		cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
		cmd.Flags().StringArrayVarP(&filters, "filter", "f", nil, "filter: label=KEY[=VALUE], status=STATUS, name=NAME")
		rootCmd.AddCommand(cmd)
	}
}

func filterName(list []*sandbox.Sandbox, name string) []*sandbox.Sandbox {
	var out []*sandbox.Sandbox
	for _, sb := range list {
		if sb.Name == name {
			out = append(out, sb)
		}
	}
	return out
}

func printList(w io.Writer, list []*sandbox.Sandbox, quiet bool, format string) error {
	switch {
	case quiet:
		for _, sb := range list {
			fmt.Fprintln(w, sb.ID)
		}
		return nil
	case format == "json":
		if list == nil {
			list = []*sandbox.Sandbox{}
		}
		return writeJSON(w, list)
	case format != "table":
		return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("invalid --format %q: use table or json", format)}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "SANDBOX ID\tIMAGE\tSTATUS\tCREATED\tNAME\tLABELS")
	for _, sb := range list {
		img := sb.Options.Image
		if img == "" {
			img = sb.Options.Rootfs
		}
		created := "-"
		if !sb.Created.IsZero() {
			created = units.HumanDuration(time.Since(sb.Created)) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sb.ShortID(), img, sb.Status, created, sb.Name, labelString(sb.Options.Labels))
	}
	return tw.Flush()
}

func labelString(l map[string]string) string {
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

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "inspect ID...",
		Short: "Print sandboxes as JSON: spec, state, times, PIDs, network, socket, resources",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := openSandboxes()
			if err != nil {
				return sbxError(err)
			}
			var out []*sandbox.Info
			for _, ref := range args {
				info, err := m.Inspect(context.Background(), ref)
				if err != nil {
					return sbxError(err)
				}
				out = append(out, info)
			}
			return writeJSON(cmd.OutOrStdout(), out)
		},
	})
}

func init() {
	var noStream bool
	var format string
	cmd := &cobra.Command{
		Use:   "stats ID [--no-stream] [--format table|json]",
		Short: "Show a sandbox's CPU, memory, peak memory, pids and OOM kills",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("invalid --format %q: use table or json", format)}
			}
			m, err := openSandboxes()
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			w := cmd.OutOrStdout()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for first := true; ; first = false {
				u, err := m.Stats(ctx, args[0])
				if err != nil {
					if !first && ctx.Err() != nil {
						return nil
					}
					return sbxError(err)
				}
				if format == "json" {
					if err := json.NewEncoder(w).Encode(u); err != nil {
						return err
					}
				} else {
					tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
					if first || !noStream {
						fmt.Fprintln(tw, "CPU TIME\tMEMORY\tPEAK MEMORY\tLIMIT\tPIDS\tOOM KILLS")
					}
					limit := "-"
					if u.MemoryLimit > 0 {
						limit = units.BytesSize(float64(u.MemoryLimit))
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", u.CPUTime.Round(time.Millisecond),
						units.BytesSize(float64(u.MemoryCurrent)), units.BytesSize(float64(u.MemoryPeak)), limit, u.Pids, u.OOMKills)
					_ = tw.Flush()
				}
				if noStream {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
		},
	}
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "print once and exit")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json (one object per line)")
	rootCmd.AddCommand(cmd)
}

// eachSandbox runs op for every argument, printing the ID of each success
// (as docker does) and going on after errors.
func eachSandbox(cmd *cobra.Command, args []string, op func(context.Context, sandboxBackend, string) error) error {
	m, err := openSandboxes()
	if err != nil {
		return sbxError(err)
	}
	ctx, cancel := signalContext()
	defer cancel()
	var last error
	for _, ref := range args {
		if err := op(ctx, m, ref); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", err)
			last = sbxError(err)
			continue
		}
		fmt.Fprintln(cmd.OutOrStdout(), ref)
	}
	if last != nil {
		var ee *exitError
		if errors.As(last, &ee) {
			return &exitError{code: ee.code} // already printed
		}
	}
	return nil
}

func init() {
	simple := []struct {
		use, short string
		op         func(context.Context, sandboxBackend, string) error
	}{
		{"pause ID...", "Freeze every process of sandboxes (cgroup freezer)", func(ctx context.Context, m sandboxBackend, ref string) error {
			_, err := m.Pause(ctx, ref)
			return err
		}},
		{"resume ID...", "Thaw paused sandboxes", func(ctx context.Context, m sandboxBackend, ref string) error {
			_, err := m.Resume(ctx, ref)
			return err
		}},
		{"start ID...", "Start stopped sandboxes again on their kept root", func(ctx context.Context, m sandboxBackend, ref string) error {
			_, err := m.Start(ctx, ref)
			return err
		}},
	}
	for _, s := range simple {
		op := s.op
		rootCmd.AddCommand(&cobra.Command{
			Use:   s.use,
			Short: s.short,
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return eachSandbox(cmd, args, op)
			},
		})
	}

	var stopTime time.Duration
	stop := &cobra.Command{
		Use:   "stop [--time D] ID...",
		Short: "Stop sandboxes: SIGTERM to PID 1, then SIGKILL after --time",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachSandbox(cmd, args, func(ctx context.Context, m sandboxBackend, ref string) error {
				_, err := m.Stop(ctx, ref, stopTime)
				return err
			})
		},
	}
	stop.Flags().DurationVarP(&stopTime, "time", "t", sandbox.DefaultStopTimeout, "grace period before SIGKILL")
	rootCmd.AddCommand(stop)

	var force bool
	rm := &cobra.Command{
		Use:   "rm [-f] ID...",
		Short: "Remove sandboxes and everything they created on the host",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachSandbox(cmd, args, func(ctx context.Context, m sandboxBackend, ref string) error {
				return m.Remove(ctx, ref, force)
			})
		},
	}
	rm.Flags().BoolVarP(&force, "force", "f", false, "kill running sandboxes instead of refusing")
	rootCmd.AddCommand(rm)
}
