package dockerargs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

func TestSandboxFlagsOptions(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte("A=file\nB=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SBX_TEST_COPIED", "copied")
	f := SandboxFlags{Memory: "256m", Disk: "1g", CPUs: 0.5, PidsLimit: -1, Env: []string{"B=flag", "SBX_TEST_COPIED", "SBX_TEST_UNSET_XYZ"},
		EnvFiles: []string{envFile}, Workdir: "/w", Rootfs: ".", Network: "bridge", Publish: []string{"8080:80"}, UserNS: "private"}
	o, err := f.Options(true)
	if err != nil {
		t.Fatal(err)
	}
	if o.Limits.MemoryBytes != 256<<20 || o.Limits.DiskBytes != 1<<30 || o.Limits.CPUs != 0.5 || o.Limits.Pids != 0 {
		t.Errorf("limits: %+v", o.Limits)
	}
	if !filepath.IsAbs(o.Rootfs) || o.Network != "bridge" || o.Publish[0] != "8080:80" || o.UserNS != "private" || o.Workdir != "/w" {
		t.Errorf("options: %+v", o)
	}
	if got := strings.Join(o.Env, " "); got != "A=file B=flag SBX_TEST_COPIED=copied" {
		t.Errorf("env: %q", got)
	}
	for _, bad := range []SandboxFlags{{Memory: "lots"}, {CPUs: 1e6}, {PidsLimit: -2}, {Timeout: -time.Second}, {Disk: "1k"}, {Workdir: "rel"},
		{Rootfs: filepath.Join(dir, "missing")}, {EnvFiles: []string{filepath.Join(dir, "missing")}}} {
		if _, err := bad.Options(true); err == nil {
			t.Errorf("%+v was taken", bad)
		}
	}
	// For a server a root directory is a path on its host: kept as given.
	if o, err := (&SandboxFlags{Rootfs: "srv/root"}).Options(false); err != nil || o.Rootfs != "srv/root" {
		t.Errorf("remote rootfs: %q %v", o.Rootfs, err)
	}
}

func TestCreateFlagsOptions(t *testing.T) {
	dir := t.TempDir()
	c := CreateFlags{Name: "web", TTL: time.Minute, Labels: []string{"k=v"}, Volumes: []string{dir + ":/data:ro"}, Tmpfs: []string{"/scratch:size=64m"}}
	o, err := c.Options([]string{"busybox"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if o.Image != "busybox" || o.Name != "web" || time.Duration(o.TTL) != time.Minute || o.Labels["k"] != "v" ||
		len(o.Volumes) != 1 || !o.Volumes[0].ReadOnly || len(o.Tmpfs) != 1 || o.Tmpfs[0].SizeBytes != 64<<20 {
		t.Errorf("options: %+v", o)
	}
	for _, tc := range []struct {
		c    CreateFlags
		args []string
		want string
	}{
		{CreateFlags{SandboxFlags: SandboxFlags{Timeout: time.Second}}, []string{"i"}, "--timeout applies"},
		{CreateFlags{SandboxFlags: SandboxFlags{Rootfs: dir}}, []string{"i"}, "not both"},
		{CreateFlags{}, nil, "give an image or --rootfs"},
		{CreateFlags{TTL: -time.Second}, []string{"i"}, "invalid --ttl"},
		{CreateFlags{Volumes: []string{filepath.Join(dir, "missing") + ":/x"}}, []string{"i"}, "invalid --volume"},
		{CreateFlags{Tmpfs: []string{"/x:size=lots"}}, []string{"i"}, "invalid --tmpfs"},
		{CreateFlags{Labels: []string{"nokey"}}, []string{"i"}, "invalid --label"},
	} {
		if _, err := tc.c.Options(tc.args, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	// A server's host path is not checked here.
	if v, err := ParseVolume("/not/here:/x", false); err != nil || v.HostPath != "/not/here" {
		t.Errorf("remote volume: %+v %v", v, err)
	}
}

func TestArgumentForms(t *testing.T) {
	if Entrypoint(false, "x") != nil || Entrypoint(true, "") == nil || len(Entrypoint(true, "")) != 0 || Entrypoint(true, "/ep")[0] != "/ep" {
		t.Error("Entrypoint")
	}
	for _, tc := range []struct {
		args      []string
		rootfs    bool
		dashAt    int
		img, argv string
	}{
		{[]string{"busybox"}, false, -1, "busybox", ""},
		{[]string{"busybox", "sleep", "9"}, false, -1, "busybox", "sleep 9"},
		{[]string{"busybox", "--", "ls", "-l"}, false, -1, "busybox", "ls -l"},
		{[]string{"sleep", "9"}, true, 0, "", "sleep 9"},
		{nil, true, -1, "", ""},
	} {
		img, argv := SplitCreateArgs(tc.args, tc.rootfs, tc.dashAt)
		if strings.Join(img, " ") != tc.img || strings.Join(argv, " ") != tc.argv {
			t.Errorf("SplitCreateArgs(%q, %v, %d) = %q, %q", tc.args, tc.rootfs, tc.dashAt, img, argv)
		}
	}
	file := filepath.Join(t.TempDir(), "s.sh")
	_ = os.WriteFile(file, []byte("echo hi\n"), 0o600)
	if s, err := ReadScript("", file); err != nil || s != "echo hi\n" {
		t.Errorf("script file: %q %v", s, err)
	}
	if s, err := ReadScript("true", ""); err != nil || s != "true" {
		t.Errorf("script text: %q %v", s, err)
	}
	for _, in := range [][2]string{{"", ""}, {"a", file}} {
		if _, err := ReadScript(in[0], in[1]); err == nil || !strings.Contains(err.Error(), "exactly one") {
			t.Errorf("ReadScript(%q): %v", in, err)
		}
	}
	if _, err := ReadScript("", file+".missing"); err == nil || !strings.HasPrefix(err.Error(), "read --script: ") {
		t.Errorf("missing script: %v", err)
	}
	if n, err := ParseSize("max-body-size", "1m"); n != 1<<20 || err != nil {
		t.Errorf("ParseSize: %d %v", n, err)
	}
	if _, err := ParseSize("max-body-size", "0"); err == nil || err.Error() != `invalid --max-body-size "0": want a size like 16m` {
		t.Errorf("ParseSize(0): %v", err)
	}
}

// sandboxes is a backend of fixed sandboxes that records Signal and Stop.
type sandboxes struct {
	sbx.Sandboxes
	list      []*sbx.Sandbox
	signalErr error
	did       []string
}

func (s *sandboxes) List(ctx context.Context, f sbx.Filter) ([]*sbx.Sandbox, error) {
	return s.list, nil
}

func (s *sandboxes) Get(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	for _, sb := range s.list {
		if sb.ID == ref {
			return sb, nil
		}
	}
	return nil, sbx.ErrNotFound
}

func (s *sandboxes) Signal(ctx context.Context, ref, sig string) error {
	s.did = append(s.did, "signal "+sig)
	return s.signalErr
}

func (s *sandboxes) Stop(ctx context.Context, ref string, o sbx.StopOptions) (*sbx.Sandbox, error) {
	s.did = append(s.did, "stop "+o.Signal+" "+o.Timeout.String())
	return nil, nil
}

func TestKillAndCompletion(t *testing.T) {
	ctx := context.Background()
	s := &sandboxes{list: []*sbx.Sandbox{
		{ID: "aaaaaaaaaaaaaaaa", Name: "web", Options: sbx.Options{Cmd: []string{"sleep"}}},
		{ID: "bbbbbbbbbbbbbbbb"},
	}}
	for _, tc := range []struct {
		ref, sig  string
		signalErr error
		want      string
	}{
		{"aaaaaaaaaaaaaaaa", "SIGTERM", nil, "signal SIGTERM"},
		{"aaaaaaaaaaaaaaaa", "SIGKILL", nil, "signal SIGKILL"},
		{"bbbbbbbbbbbbbbbb", "SIGKILL", nil, "signal SIGKILL,stop SIGKILL 1s"},
		{"aaaaaaaaaaaaaaaa", "SIGKILL", sbx.ErrUnsupported, "signal SIGKILL,stop SIGKILL 1s"},
	} {
		s.did, s.signalErr = nil, tc.signalErr
		_ = Kill(ctx, s, tc.ref, tc.sig)
		if got := strings.Join(s.did, ","); got != tc.want {
			t.Errorf("Kill(%s, %s): %s, want %s", tc.ref, tc.sig, got, tc.want)
		}
	}
	if got := strings.Join(CompleteSandboxes(ctx, s, ""), " "); got != "web aaaaaaaaaaaa bbbbbbbbbbbb" {
		t.Errorf("all sandboxes: %q", got)
	}
	if got := strings.Join(CompleteSandboxes(ctx, s, "b"), " "); got != "bbbbbbbbbbbb" {
		t.Errorf("sandboxes b: %q", got)
	}
}

func TestSplitRunArgs(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		rootfs    bool
		dashAt    int
		img, argv string
		err       string
	}{
		{[]string{"busybox"}, false, -1, "busybox", "", ""},
		{[]string{"busybox", "--", "ls"}, false, -1, "busybox", "ls", ""},
		{[]string{"busybox", "--", "ls"}, false, 1, "busybox", "ls", ""},
		{[]string{"ls", "-l"}, false, 0, "", "ls -l", ""},
		{[]string{"true"}, true, -1, "", "true", ""},
		{nil, true, -1, "", "", "no command given"},
		{[]string{"/bin/ls"}, false, -1, "", "", "is a path, not an image"},
	} {
		img, argv, err := SplitRunArgs(tc.args, tc.rootfs, tc.dashAt)
		if img != tc.img || strings.Join(argv, " ") != tc.argv || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("SplitRunArgs(%q, %v, %d) = %q, %q, %v", tc.args, tc.rootfs, tc.dashAt, img, argv, err)
		}
	}
}

func TestPsFlags(t *testing.T) {
	f, keep, err := (&PsFlags{}).Filter()
	if err != nil || !f.Running || keep != 0 {
		t.Errorf("default: %+v %d %v", f, keep, err)
	}
	if f, keep, _ = (&PsFlags{Latest: true, Pooled: true}).Filter(); f.Running || keep != 1 || !f.Pooled {
		t.Errorf("-l: %+v %d", f, keep)
	}
	if f, _, _ = (&PsFlags{Filters: []string{"status=stopped"}}).Filter(); f.Running || f.Status != sbx.StatusStopped {
		t.Errorf("status filter: %+v", f)
	}
	if f, _, _ = (&PsFlags{All: true}).Filter(); f.Running {
		t.Errorf("-a: %+v", f)
	}
	if _, _, err = (&PsFlags{Last: -1}).Filter(); err == nil || !strings.Contains(err.Error(), "invalid -n -1") {
		t.Errorf("-n -1: %v", err)
	}
	list := []*sbx.Sandbox{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	if got := Newest(list, 2); len(got) != 2 || got[0].ID != "b" {
		t.Errorf("Newest 2: %v", got)
	}
	if got := Newest(list, 0); len(got) != 3 {
		t.Errorf("Newest 0: %v", got)
	}
}

func (s *sandboxes) Start(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	s.did = append(s.did, "start")
	return nil, nil
}

func TestRestart(t *testing.T) {
	s := &sandboxes{}
	if err := Restart(context.Background(), s, "x", sbx.StopOptions{Signal: "SIGINT", Timeout: time.Second}); err != nil || strings.Join(s.did, ",") != "stop SIGINT 1s,start" {
		t.Errorf("restart: %v %v", err, s.did)
	}
}

func TestExecFlagsRequest(t *testing.T) {
	f := ExecFlags{Env: []string{"A=1"}, Workdir: "/w", User: "1000", Timeout: 1500 * time.Millisecond, Detach: true}
	req, err := f.Request([]string{"ls"})
	if err != nil || req.Argv[0] != "ls" || len(req.Env) != 1 || req.Env[0] != "A=1" || req.Cwd != "/w" || req.User != "1000" || req.Timeout != 1500*time.Millisecond || !req.Detach {
		t.Errorf("request: %+v %v", req, err)
	}
	for _, tc := range []struct {
		f    ExecFlags
		want string
	}{
		{ExecFlags{Env: []string{"A"}}, "invalid --env"},
		{ExecFlags{Timeout: -time.Second}, "invalid --timeout"},
		{ExecFlags{Detach: true, Tty: true}, "-d does not go with -i or -t"},
		{ExecFlags{Detach: true, Interactive: true}, "-d does not go with -i or -t"},
	} {
		if _, err := tc.f.Request([]string{"ls"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
}

// TestRunFlagsOptions checks run's split between a one-shot run and -d:
// the flags of a sandbox that outlives its command need -d, the flags of
// a command that is waited for refuse it, and -d fills the sandbox's name,
// labels, TTL and auto-removal.
func TestRunFlagsOptions(t *testing.T) {
	none := func(string) bool { return false }
	f := RunFlags{TTL: time.Minute}
	if _, _, err := f.Options([]string{"alpine", "true"}, -1, true, none); err == nil || !strings.Contains(err.Error(), "add -d") {
		t.Fatalf("--ttl without -d: %v; want the hint to add -d", err)
	}
	// --name without -d: a named sandbox whose output is followed; the
	// flags of a one-shot run's own report and terminal do not go with it.
	f = RunFlags{Name: "web"}
	if opts, _, err := f.Options([]string{"alpine", "true"}, -1, true, none); err != nil || opts.Name != "web" || opts.AutoRemove || !f.Named() {
		t.Fatalf("--name without -d: %+v %v", opts, err)
	}
	if _, _, err := f.Options([]string{"alpine"}, -1, true, func(n string) bool { return n == "interactive" }); err == nil || !strings.Contains(err.Error(), "--interactive does not go with --name") {
		t.Fatalf("-i with --name: %v", err)
	}
	if (&RunFlags{}).Named() {
		t.Fatal("a plain run is not named")
	}
	f = RunFlags{Detach: true}
	if _, _, err := f.Options([]string{"alpine"}, -1, true, func(n string) bool { return n == "tty" }); err == nil || !strings.Contains(err.Error(), "--tty does not go with -d") {
		t.Fatalf("-t with -d: %v", err)
	}
	f = RunFlags{Detach: true, TTL: -time.Second}
	if _, _, err := f.Options([]string{"alpine"}, -1, true, none); err == nil || !strings.Contains(err.Error(), "--ttl") {
		t.Fatalf("negative --ttl: %v", err)
	}
	f = RunFlags{Detach: true}
	f.Timeout = time.Second
	if _, _, err := f.Options([]string{"alpine"}, -1, true, none); err == nil || !strings.Contains(err.Error(), "--timeout does not go with -d") {
		t.Fatalf("--timeout with -d: %v", err)
	}
	f = RunFlags{Detach: true, Rm: true, Name: "web", Labels: []string{"a=b"}, TTL: time.Minute, Tmpfs: []string{"/scratch"}}
	opts, cmd, err := f.Options([]string{"alpine", "sleep", "9"}, -1, true, none)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Image != "alpine" || !slices.Equal(cmd, []string{"sleep", "9"}) || opts.Name != "web" || opts.Labels["a"] != "b" ||
		opts.TTL != time.Minute || !opts.AutoRemove || len(opts.Tmpfs) != 1 {
		t.Fatalf("run -d options %+v, command %q", opts, cmd)
	}
	f = RunFlags{}
	if opts, cmd, err = f.Options([]string{"echo", "hi"}, 0, true, none); err != nil || opts.Image != "" || !slices.Equal(cmd, []string{"echo", "hi"}) {
		t.Fatalf("host mode: %+v %q %v", opts, cmd, err)
	}
}
