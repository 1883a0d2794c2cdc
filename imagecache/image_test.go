package imagecache

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestProcess(t *testing.T) {
	cfg := ImageConfig{
		Entrypoint: []string{"/entry", "-x"},
		Cmd:        []string{"default", "args"},
		Env:        []string{"PATH=/img/bin", "A=1", "B=2"},
		WorkingDir: "/work",
		User:       "app",
	}
	cases := []struct {
		name string
		cfg  ImageConfig
		o    ProcessOverrides
		want Process
	}{
		{"image config", cfg, ProcessOverrides{},
			Process{Args: []string{"/entry", "-x", "default", "args"}, Env: []string{"PATH=/img/bin", "A=1", "B=2"}, Cwd: "/work", User: "app"}},
		{"cmd override keeps entrypoint", cfg, ProcessOverrides{Cmd: []string{"mine"}},
			Process{Args: []string{"/entry", "-x", "mine"}, Env: cfg.Env, Cwd: "/work", User: "app"}},
		{"entrypoint override drops image cmd", cfg, ProcessOverrides{Entrypoint: []string{"/bin/sh"}},
			Process{Args: []string{"/bin/sh"}, Env: cfg.Env, Cwd: "/work", User: "app"}},
		{"empty entrypoint override with cmd", cfg, ProcessOverrides{Entrypoint: []string{}, Cmd: []string{"ls", "-l"}},
			Process{Args: []string{"ls", "-l"}, Env: cfg.Env, Cwd: "/work", User: "app"}},
		{"env, cwd and user overrides", cfg, ProcessOverrides{Env: []string{"A=9", "C=3", "B"}, WorkingDir: "/tmp", User: "0:0"},
			Process{Args: []string{"/entry", "-x", "default", "args"}, Env: []string{"PATH=/img/bin", "A=9", "C=3"}, Cwd: "/tmp", User: "0:0"}},
		{"defaults", ImageConfig{Cmd: []string{"sh"}}, ProcessOverrides{},
			Process{Args: []string{"sh"}, Env: []string{"PATH=" + DefaultPath}, Cwd: "/"}},
		{"relative working dir", ImageConfig{Cmd: []string{"sh"}, WorkingDir: "app/../srv"}, ProcessOverrides{},
			Process{Args: []string{"sh"}, Env: []string{"PATH=" + DefaultPath}, Cwd: "/srv"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.cfg.Process(c.o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Args, c.want.Args) || !slices.Equal(got.Env, c.want.Env) || got.Cwd != c.want.Cwd || got.User != c.want.User {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
	if _, err := (ImageConfig{}).Process(ProcessOverrides{}); err == nil {
		t.Error("an image without a command and no override gave a process")
	}
}

func TestMergeEnv(t *testing.T) {
	got := MergeEnv([]string{"A=1", "B=2", "A=3"}, []string{"B=", "D=4", "A"})
	want := []string{"B=", "D=4"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
}

func TestLookupUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\napp:x:1001:\nextra:x:2000:app\n"), 0o644)
	cases := []struct {
		spec string
		want User
	}{
		{"", User{UID: 0, GID: 0, Home: "/root"}},
		{"app", User{UID: 1000, GID: 1001, AdditionalGroups: []int{2000}, Home: "/home/app"}},
		{"1000", User{UID: 1000, GID: 1001, AdditionalGroups: []int{2000}, Home: "/home/app"}},
		{"app:root", User{UID: 1000, GID: 0, Home: "/home/app"}},
		{"4242:4343", User{UID: 4242, GID: 4343, Home: "/"}},
	}
	for _, c := range cases {
		got, err := LookupUser(root, c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		if got.UID != c.want.UID || got.GID != c.want.GID || got.Home != c.want.Home || !slices.Equal(got.AdditionalGroups, c.want.AdditionalGroups) {
			t.Errorf("%q: got %+v want %+v", c.spec, got, c.want)
		}
	}
	if _, err := LookupUser(root, "nobody-here"); err == nil {
		t.Error("unknown user name resolved")
	}
	// /etc/passwd as a symlink out of the root resolves inside it.
	evil := t.TempDir()
	os.MkdirAll(filepath.Join(evil, "etc"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(evil, "etc/passwd"))
	if _, err := LookupUser(evil, "root"); err == nil {
		t.Error("a symlinked /etc/passwd was read from the host")
	}
}

func TestNames(t *testing.T) {
	if p, err := ParsePullPolicy(""); err != nil || p != PullMissing {
		t.Errorf("default policy %q %v", p, err)
	}
	if _, err := ParsePullPolicy("sometimes"); err == nil {
		t.Error("bad policy accepted")
	}
	if got := FamiliarName("index.docker.io/library/busybox:latest"); got != "busybox:latest" {
		t.Error(got)
	}
	if got := FamiliarName("index.docker.io/me/app:1"); got != "me/app:1" {
		t.Error(got)
	}
	if !isDigestRef("sha256:0123456789ab") || isDigestRef("busybox") || isDigestRef("abc") {
		t.Error("isDigestRef")
	}
	ids := chainIDs([]string{"sha256:a", "sha256:b"})
	if ids[0] != "sha256:a" || len(ids[1]) != 71 {
		t.Errorf("chainIDs %v", ids)
	}
}
