package dockerargs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]string{"KILL": "SIGKILL", "sigterm": "SIGTERM", "SIGUSR1": "SIGUSR1", "9": "SIGKILL", "15": "SIGTERM"} {
		if got, err := ParseSignal(in); got != want || err != nil {
			t.Errorf("ParseSignal(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"NOPE", "999", "", "-1"} {
		if got, err := ParseSignal(in); err == nil || !strings.HasPrefix(err.Error(), "invalid signal") {
			t.Errorf("ParseSignal(%q) = %q, %v; want an error", in, got, err)
		}
	}
}

func TestSeconds(t *testing.T) {
	for in, want := range map[string]time.Duration{"5": 5 * time.Second, "0.5": 500 * time.Millisecond, "500ms": 500 * time.Millisecond, "0": 0} {
		var s Seconds
		if err := s.Set(in); err != nil || time.Duration(s) != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, time.Duration(s), err, want)
		}
	}
	for _, in := range []string{"-1", "-2s", "soon"} {
		var s Seconds
		if err := s.Set(in); err == nil {
			t.Errorf("Set(%q) took it", in)
		}
	}
	s := Seconds(1500 * time.Millisecond)
	if s.String() != "1.5s" || s.Type() != "seconds" {
		t.Errorf("String/Type: %q %q", s.String(), s.Type())
	}
}

func TestSplitCopyPath(t *testing.T) {
	for in, want := range map[string][3]string{
		"web:/etc/hosts": {"web", "/etc/hosts", "true"}, "0123:rel/path": {"0123", "rel/path", "true"},
		"./a:b": {"", "", "false"}, "/x:y": {"", "", "false"}, "host.txt": {"", "", "false"}, ":/p": {"", "", "false"}, "id:": {"", "", "false"},
	} {
		ref, path, ok := SplitCopyPath(in)
		if got := [3]string{ref, path, fmt.Sprint(ok)}; got != want {
			t.Errorf("SplitCopyPath(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestKeyValues(t *testing.T) {
	if l, err := ParseLabels(nil); l != nil || err != nil {
		t.Errorf("no labels: %v %v", l, err)
	}
	if l, err := ParseLabels([]string{"a=1", "b=", "a=2"}); err != nil || len(l) != 2 || l["a"] != "2" || l["b"] != "" {
		t.Errorf("labels: %v %v", l, err)
	}
	if _, err := ParseLabels([]string{"=1"}); err == nil || !strings.Contains(err.Error(), "invalid --label") {
		t.Errorf("label without a key: %v", err)
	}
	if e, err := ParseEnv([]string{"A=x=y"}); err != nil || e["A"] != "x=y" {
		t.Errorf("env: %v %v", e, err)
	}
	if _, err := ParseEnv([]string{"A"}); err == nil || !strings.Contains(err.Error(), "invalid --env") {
		t.Errorf("env without a value: %v", err)
	}
	var f sbx.Filter
	if err := ParseFilters(&f, []string{"status=running", "name=web", "label=k=v"}); err != nil || f.Status != sbx.StatusRunning || f.Name != "web" || f.Labels["k"] != "v" {
		t.Errorf("filters: %+v %v", f, err)
	}
	if err := ParseFilters(&f, []string{"since=1h"}); err == nil || !strings.Contains(err.Error(), "invalid --filter") {
		t.Errorf("unknown filter: %v", err)
	}
}

func TestMatchPort(t *testing.T) {
	tcp := sbx.PortMapping{ContainerPort: 80, Proto: "tcp"}
	udp := sbx.PortMapping{ContainerPort: 53, Proto: "udp"}
	if !MatchPort(tcp, "80") || !MatchPort(tcp, "80/tcp") || MatchPort(tcp, "80/udp") || MatchPort(tcp, "8080") {
		t.Error("tcp port matching")
	}
	if MatchPort(udp, "53") || !MatchPort(udp, "53/udp") {
		t.Error("udp port matching: a bare number means TCP")
	}
}

func TestImageArgs(t *testing.T) {
	if err := CheckImageArg("busybox"); err != nil {
		t.Error(err)
	}
	for _, p := range []string{"/bin/true", "./x"} {
		if err := CheckImageArg(p); err == nil || !strings.Contains(err.Error(), "sbx run -- "+p) {
			t.Errorf("CheckImageArg(%q): %v", p, err)
		}
	}
	notFound := fmt.Errorf("image %q: %w", "ls", sbx.ErrImageNotFound)
	if err := WithImageHint(notFound, "ls"); !errors.Is(err, sbx.ErrImageNotFound) || !strings.Contains(err.Error(), "write sbx run -- ls") {
		t.Errorf("hint for a bare word: %v", err)
	}
	for _, img := range []string{"busybox:1", "r/x", ""} {
		if err := WithImageHint(notFound, img); err != notFound {
			t.Errorf("hint for %q: %v", img, err)
		}
	}
	if other := errors.New("boom"); WithImageHint(other, "ls") != other {
		t.Error("hint on an unrelated error")
	}
}

// images is a cache of one image that counts pulls.
type images struct {
	sbx.Images
	have  bool
	pulls int
}

func (im *images) InspectImage(ctx context.Context, ref string) (*sbx.Image, error) {
	if !im.have {
		return nil, fmt.Errorf("image %s: %w", ref, sbx.ErrImageNotFound)
	}
	return &sbx.Image{Name: ref, Config: &sbx.ImageConfig{Entrypoint: []string{"/ep"}, Cmd: []string{"def"}}}, nil
}

func (im *images) PullImage(ctx context.Context, ref string, progress func(sbx.PullProgress)) (*sbx.Image, error) {
	im.pulls++
	im.have = true
	return im.InspectImage(ctx, ref)
}

func TestImageCommand(t *testing.T) {
	ctx := context.Background()
	im := &images{}
	if _, err := ImageCommand(ctx, im, "x", "never", nil, nil, nil); !errors.Is(err, sbx.ErrImageNotFound) || im.pulls != 0 {
		t.Errorf("never pulls: %v, %d pulls", err, im.pulls)
	}
	argv, err := ImageCommand(ctx, im, "x", "", nil, []string{"a", "b"}, nil)
	if err != nil || strings.Join(argv, " ") != "/ep a b" || im.pulls != 1 {
		t.Errorf("missing: %q %v, %d pulls", argv, err, im.pulls)
	}
	if argv, _ = ImageCommand(ctx, im, "x", "missing", nil, nil, nil); strings.Join(argv, " ") != "/ep def" || im.pulls != 1 {
		t.Errorf("cached: %q, %d pulls", argv, im.pulls)
	}
	if argv, _ = ImageCommand(ctx, im, "x", "always", []string{}, []string{"sh"}, nil); strings.Join(argv, " ") != "sh" || im.pulls != 2 {
		t.Errorf("always, entrypoint cleared: %q, %d pulls", argv, im.pulls)
	}
}

func (im *images) RemoveImage(ctx context.Context, ref string) error {
	if !im.have {
		return fmt.Errorf("image %s: %w", ref, sbx.ErrImageNotFound)
	}
	im.have = false
	return nil
}

func TestRemoveImage(t *testing.T) {
	im := &images{have: true}
	if name, err := RemoveImage(context.Background(), im, "docker.io/library/x:1"); err != nil || name != sbx.FamiliarName("docker.io/library/x:1") || im.have {
		t.Errorf("remove: %q %v", name, err)
	}
	if name, err := RemoveImage(context.Background(), im, "gone"); !errors.Is(err, sbx.ErrImageNotFound) || name != "gone" {
		t.Errorf("remove of a missing image: %q %v", name, err)
	}
}

func TestParseSecrets(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "tok")
	if err := os.WriteFile(f, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SBX_TEST_SECRET", "from-env")
	got, err := ParseSecrets([]string{"id=a,src=" + f, "id=b,env=SBX_TEST_SECRET", "id=SBX_TEST_SECRET", "type=file,id=c,source=" + f})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "from-file", "b": "from-env", "SBX_TEST_SECRET": "from-env", "c": "from-file"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("secret %s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{"src=" + f, "id=x,src=" + filepath.Join(dir, "missing"), "id=x,env=SBX_TEST_UNSET_VAR", "id=x,bogus=1", "id=x,src"} {
		if _, err := ParseSecrets([]string{bad}); err == nil {
			t.Errorf("--secret %s was accepted", bad)
		}
	}
}

func TestParseSSH(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	key := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSH_AUTH_SOCK", sock)
	got, err := ParseSSH([]string{"default", "work=" + sock})
	if err != nil || !reflect.DeepEqual(got, map[string]string{"default": sock, "work": sock}) {
		t.Fatalf("ParseSSH: %v %v", got, err)
	}
	for _, bad := range []string{"k=" + key, "=" + sock, "a=" + sock + "," + sock, "gone=" + filepath.Join(dir, "none")} {
		if _, err := ParseSSH([]string{bad}); err == nil {
			t.Errorf("--ssh %s was accepted", bad)
		}
	}
	t.Setenv("SSH_AUTH_SOCK", "")
	if _, err := ParseSSH([]string{"default"}); err == nil || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
		t.Errorf("--ssh default without an agent: %v", err)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"10m":                  now.Add(-10 * time.Minute),
		"1h30m":                now.Add(-90 * time.Minute),
		"1700000000":           time.Unix(1700000000, 0),
		"1700000000.5":         time.Unix(1700000000, 5e8),
		"2026-11-28T07:00:00Z": now.Add(-time.Hour),
		"2026-11-28":           time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
	} {
		if got, err := ParseTime("since", in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-5m", "-1", ""} {
		if _, err := ParseTime("since", in, now); err == nil || !strings.Contains(err.Error(), "--since") {
			t.Errorf("ParseTime(%q): %v, want an error naming --since", in, err)
		}
	}
	if _, _, err := ParseTimeRange("5m", "10m", now); err == nil {
		t.Error("--until before --since was taken")
	}
	if f, u, err := ParseTimeRange("", "", now); err != nil || !f.IsZero() || !u.IsZero() {
		t.Errorf("no bounds: %v %v %v", f, u, err)
	}
}
