package dockerargs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/sbxrun/sbx"
)

// SplitCopyPath splits "ID:PATH", as docker cp does: a ':' with no '/'
// before it marks a sandbox path (write ./a:b for a host file named a:b).
// ok is false for a host path.
func SplitCopyPath(s string) (ref, path string, ok bool) {
	ref, path, ok = strings.Cut(s, ":")
	if !ok || ref == "" || strings.Contains(ref, "/") || path == "" {
		return "", "", false
	}
	return ref, path, true
}

// ParseLabels parses --label KEY=VALUE entries; none is nil.
func ParseLabels(labels []string) (map[string]string, error) {
	return keyValues("label", labels)
}

// ParseEnv parses exec's --env KEY=VALUE entries into a map; none is nil.
func ParseEnv(env []string) (map[string]string, error) {
	return keyValues("env", env)
}

// ParseBuildArgs parses build's --build-arg entries: KEY=VALUE, or KEY
// alone for the value of KEY in this process's environment (skipped when
// unset), as docker build does.
func ParseBuildArgs(args []string) (map[string]string, error) {
	var out map[string]string
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if k == "" {
			return nil, fmt.Errorf("invalid --build-arg %q: use KEY=VALUE or KEY", a)
		}
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				continue
			}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

// ParseSSH parses build's --ssh entries as docker build does, for ssh
// agents: "default" or "ID" (the agent of $SSH_AUTH_SOCK) or ID=SOCKET.
// Each socket must be a unix socket: key files are not forwarded.
func ParseSSH(entries []string) (map[string]string, error) {
	var out map[string]string
	for _, e := range entries {
		id, sock, ok := strings.Cut(e, "=")
		if !ok {
			sock = os.Getenv("SSH_AUTH_SOCK")
			if sock == "" {
				return nil, fmt.Errorf("--ssh %s: SSH_AUTH_SOCK is not set; give --ssh %s=SOCKET", e, e)
			}
		}
		if id == "" || strings.Contains(sock, ",") {
			return nil, fmt.Errorf("invalid --ssh %q: use ID or ID=SOCKET (one ssh agent's socket)", e)
		}
		if err := sbx.CheckSSHAgent(sock); err != nil {
			return nil, fmt.Errorf("--ssh %s: %w", id, err)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[id] = sock
	}
	return out, nil
}

// maxSecret caps one build secret.
const maxSecret = sbx.MaxBuildSecretBytes

// ParseSecrets parses build's --secret entries as docker build does:
// id=ID,src=FILE (the file's content), id=ID,env=VAR (the variable's
// value), or id=ID alone (the variable ID, else the file ID).
func ParseSecrets(entries []string) (map[string]string, error) {
	var out map[string]string
	for _, e := range entries {
		var id, src, env string
		for _, f := range strings.Split(e, ",") {
			k, v, ok := strings.Cut(f, "=")
			switch {
			case !ok:
				return nil, fmt.Errorf("invalid --secret %q: use id=ID,src=FILE or id=ID,env=VAR", e)
			case k == "id":
				id = v
			case k == "src" || k == "source":
				src = v
			case k == "env":
				env = v
			case k == "type" && (v == "file" || v == "env"):
			default:
				return nil, fmt.Errorf("invalid --secret %q: unknown key %q (use id, src, env)", e, k)
			}
		}
		if id == "" {
			return nil, fmt.Errorf("invalid --secret %q: it needs an id", e)
		}
		var val string
		switch {
		case src != "":
			data, err := readSecretFile(src)
			if err != nil {
				return nil, fmt.Errorf("--secret id=%s: %w", id, err)
			}
			val = data
		case env != "":
			v, ok := os.LookupEnv(env)
			if !ok {
				return nil, fmt.Errorf("--secret id=%s: the variable %s is not set", id, env)
			}
			val = v
		default:
			if v, ok := os.LookupEnv(id); ok {
				val = v
			} else if data, err := readSecretFile(id); err == nil {
				val = data
			} else {
				return nil, fmt.Errorf("--secret id=%s: no variable or file %s; give src=FILE or env=VAR", id, id)
			}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[id] = val
	}
	return out, nil
}

func readSecretFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxSecret {
		return "", fmt.Errorf("%s is larger than %d bytes", p, maxSecret)
	}
	return string(data), nil
}

// keyValues parses the KEY=VALUE entries of --flag, later ones winning.
func keyValues(flag string, entries []string) (map[string]string, error) {
	var out map[string]string
	for _, e := range entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid --%s %q: use KEY=VALUE", flag, e)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

// ParseFilters parses ps's --filter terms (label=KEY[=VALUE],
// status=STATUS, name=NAME) into f.
func ParseFilters(f *sbx.Filter, filters []string) error {
	for _, fl := range filters {
		k, v, _ := strings.Cut(fl, "=")
		switch k {
		case "label":
			if err := f.ParseLabel(v); err != nil {
				return err
			}
		case "status":
			f.Status = sbx.Status(v)
		case "name":
			f.Name = v
		default:
			return fmt.Errorf("invalid --filter %q: use label=KEY=VALUE, status=STATUS or name=NAME", fl)
		}
	}
	return nil
}

// MatchPort reports whether a published port is the one docker port's
// query names: "80/udp", or "80" for TCP.
func MatchPort(p sbx.PortMapping, query string) bool {
	return query == fmt.Sprintf("%d/%s", p.ContainerPort, p.Proto) ||
		(query == strconv.Itoa(int(p.ContainerPort)) && p.Proto == "tcp")
}

// CheckImageArg refuses a first argument of run that cannot be an image
// (a path), saying what to write instead.
func CheckImageArg(ref string) error {
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
		return fmt.Errorf("%q is a path, not an image: to run a host command in a sandbox write sbx run -- %s ..., or give --rootfs DIR", ref, ref)
	}
	return nil
}

// WithImageHint adds to a failure to find or pull image that a bare word
// may have been meant as a host command.
func WithImageHint(err error, image string) error {
	if image == "" || strings.ContainsAny(image, ":/@") {
		return err
	}
	for _, e := range []error{sbx.ErrImageNotFound, sbx.ErrRegistryUnreachable, sbx.ErrRegistryAuth} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w; %q was taken as an image (not cached, not pulled): to run the host command %s in a sandbox, write sbx run -- %s", err, image, image, image)
		}
	}
	return err
}

// ImageCommand is the argv docker runs for image with CMD args: the
// image's Entrypoint (or entrypoint when not nil) followed by args or the
// image's Cmd (ImageConfig.Process). The image is pulled first as pull
// says: "always", "never", or else when it is missing; an empty pull is
// $SBX_PULL's, as for the create that follows.
func ImageCommand(ctx context.Context, im sbx.Images, image, pull string, entrypoint, args []string, progress func(sbx.PullProgress)) ([]string, error) {
	if pull == "" {
		pull = os.Getenv("SBX_PULL")
	}
	img, err := im.InspectImage(ctx, image)
	if pull == "always" || (err != nil && errors.Is(err, sbx.ErrImageNotFound) && pull != "never") {
		if _, err = im.PullImage(ctx, image, progress); err == nil {
			img, err = im.InspectImage(ctx, image)
		}
	}
	if err != nil {
		return nil, err
	}
	var cfg sbx.ImageConfig
	if img.Config != nil {
		cfg = *img.Config
	}
	p, err := cfg.Process(entrypoint, args, nil, "", "")
	return p.Args, err
}

// Kill is docker kill: sig to the sandbox's main command; SIGKILL to a
// sandbox without one (or a backend that cannot signal) stops the sandbox
// at once instead.
func Kill(ctx context.Context, s sbx.Sandboxes, ref, sig string) error {
	err := s.Signal(ctx, ref, sig)
	if sig == "SIGKILL" && (errors.Is(err, sbx.ErrUnsupported) || noMainCommand(ctx, s, ref)) {
		_, err = s.Stop(ctx, ref, sbx.StopOptions{Signal: sig, Timeout: time.Second})
	}
	return err
}

// noMainCommand reports whether the sandbox has no main command.
func noMainCommand(ctx context.Context, s sbx.Sandboxes, ref string) bool {
	sb, err := s.Get(ctx, ref)
	return err == nil && len(sb.Options.Cmd) == 0
}

// Entrypoint is docker's --entrypoint: nil when the flag was not given
// (the image's), none for an empty value, else the one program.
func Entrypoint(given bool, value string) []string {
	switch {
	case !given:
		return nil
	case value == "":
		return []string{}
	}
	return []string{value}
}

// SplitCreateArgs splits docker create's arguments into the image (none
// with a root directory) and the command: IMAGE [--] CMD..., or with
// rootfs set and the arguments after "--" (dashAt 0), all of them the
// command.
func SplitCreateArgs(args []string, rootfs bool, dashAt int) (image, cmd []string) {
	image = args
	if rootfs && dashAt == 0 {
		image, cmd = nil, args // --rootfs DIR -- CMD...
	} else if len(args) > 1 {
		image, cmd = args[:1], args[1:]
	}
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	return image, cmd
}

// ReadScript is a setup script given as exactly one of its text (-c) and
// a file holding it (--script).
func ReadScript(text, file string) (string, error) {
	if (text == "") == (file == "") {
		return "", errors.New("give the setup script with exactly one of -c SCRIPT and --script FILE")
	}
	if file == "" {
		return text, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read --script: %w", err)
	}
	return string(data), nil
}

// ParseSize parses a size flag in docker's forms ("16m", "1g"); flag
// names it in the error.
func ParseSize(flag, v string) (int64, error) {
	n, err := units.RAMInBytes(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid --%s %q: want a size like 16m", flag, v)
	}
	return n, nil
}

// CompleteSandboxes are the names and short IDs of s's sandboxes that
// start with prefix, for shell completion.
func CompleteSandboxes(ctx context.Context, s sbx.Sandboxes, prefix string) []string {
	var out []string
	list, _ := s.List(ctx, sbx.Filter{})
	for _, sb := range list {
		if sb.Name != "" {
			out = append(out, sb.Name)
		}
		out = append(out, sb.ShortID())
	}
	return withPrefix(out, prefix)
}

// CompleteImages are the familiar names of im's images that start with
// prefix, for shell completion.
func CompleteImages(ctx context.Context, im sbx.Images, prefix string) []string {
	var out []string
	imgs, _ := im.ListImages(ctx)
	for _, img := range imgs {
		out = append(out, sbx.FamiliarName(img.Name))
	}
	return withPrefix(out, prefix)
}

func withPrefix(names []string, prefix string) []string {
	kept := names[:0]
	for _, s := range names {
		if strings.HasPrefix(s, prefix) {
			kept = append(kept, s)
		}
	}
	return kept
}

// PsFlags are docker ps's flags: the selection (-a, -n N, -l, --filter,
// and sbx's --pooled) and the output (-q, --no-trunc, --format).
type PsFlags struct {
	All, Latest, Pooled bool
	Last                int
	Filters             []string
	Quiet, NoTrunc      bool
	Format              string // table, json or a Go template
}

// Filter is what the flags ask List for; keep is how many of the newest
// to show (0: all; Newest). Without -a, -n, -l or a status filter only
// running sandboxes are listed.
func (p *PsFlags) Filter() (f sbx.Filter, keep int, err error) {
	if err := ParseFilters(&f, p.Filters); err != nil {
		return f, 0, err
	}
	keep = p.Last
	if p.Latest {
		keep = 1
	}
	if keep < 0 {
		return f, 0, fmt.Errorf("invalid -n %d: a number of sandboxes", keep)
	}
	f.Running = !p.All && f.Status == "" && keep == 0
	f.Pooled = p.Pooled
	return f, keep, nil
}

// Newest keeps the last keep sandboxes of list (oldest first); 0 keeps all.
func Newest(list []*sbx.Sandbox, keep int) []*sbx.Sandbox {
	if keep > 0 && len(list) > keep {
		return list[len(list)-keep:]
	}
	return list
}

// SplitRunArgs splits docker run's arguments: IMAGE [--] CMD..., or with
// a root directory (rootfs) or in host mode (everything after "--", dashAt
// 0) the whole command, which must then be given.
func SplitRunArgs(args []string, rootfs bool, dashAt int) (image string, cmd []string, err error) {
	if rootfs || dashAt == 0 {
		if len(args) == 0 {
			return "", nil, errors.New("no command given: sbx run --rootfs DIR CMD..., or sbx run -- CMD... in host mode")
		}
		return "", args, nil
	}
	if err := CheckImageArg(args[0]); err != nil {
		return "", nil, err
	}
	cmd = args[1:]
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	return args[0], cmd, nil
}

// Restart is docker restart: the sandbox stopped as o says, then started
// again on its kept root.
func Restart(ctx context.Context, s sbx.Sandboxes, ref string, o sbx.StopOptions) error {
	if _, err := s.Stop(ctx, ref, o); err != nil {
		return err
	}
	_, err := s.Start(ctx, ref)
	return err
}

// RemoveImage is docker rmi of one reference: the image removed from the
// cache, and its familiar name (ref when it cannot be read) for the
// "Untagged:" line.
func RemoveImage(ctx context.Context, im sbx.Images, ref string) (name string, err error) {
	name = ref
	if img, err := im.InspectImage(ctx, ref); err == nil {
		name = sbx.FamiliarName(img.Name)
	}
	return name, im.RemoveImage(ctx, ref)
}

// ExecFlags are docker exec's flags.
type ExecFlags struct {
	Interactive, Tty, Detach bool
	Env                      []string // KEY=VALUE
	Workdir, User            string
	Timeout                  time.Duration
}

// Request is the exec request the flags ask for to run argv; -d does not
// go with -i or -t.
func (f *ExecFlags) Request(argv []string) (sbx.ExecRequest, error) {
	req := sbx.ExecRequest{Argv: argv, Cwd: f.Workdir, User: f.User, Timeout: f.Timeout, Detach: f.Detach}
	if _, err := ParseEnv(f.Env); err != nil {
		return req, err
	}
	req.Env = slices.Clone(f.Env)
	if f.Timeout < 0 {
		return req, errors.New("invalid --timeout: must be positive")
	}
	if f.Detach && (f.Interactive || f.Tty) {
		return req, errors.New("-d does not go with -i or -t: a detached command has no input or terminal")
	}
	return req, nil
}
