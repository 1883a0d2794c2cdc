package imagecache

import (
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
