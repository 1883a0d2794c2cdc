package openhands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSettingsParse(t *testing.T) {
	s := Settings{Aliases: []string{"ghcr.io/x:*=local:1"}, Memory: "4g", CPUs: 2, Pids: 100, Env: []string{"A=1"}, AgentTree: "/srv/tree"}
	p, err := s.Parse("openhands-")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Aliases) != 1 || p.Aliases[0].Image != "local:1" || p.BaseLimits.MemoryBytes != 4<<30 || p.BaseLimits.CPUs != 2 || p.BaseLimits.Pids != 100 || p.Environment["A"] != "1" {
		t.Errorf("parsed: %+v", p)
	}
	if pol := s.Policy(); len(pol.AllowedHostDirs) != 1 || pol.AllowedHostDirs[0] != "/srv/tree" || pol.AllowHostNetwork || pol.AllowPrivileged {
		t.Errorf("policy: %+v", pol)
	}
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{Aliases: []string{"x"}}, "invalid --openhands-alias"},
		{Settings{Memory: "lots"}, "invalid --openhands-memory"},
		{Settings{CPUs: -1}, "invalid --openhands-cpus"},
		{Settings{Env: []string{"=v"}}, "invalid --openhands-env"},
		{Settings{AgentTree: "rel"}, "must be an absolute path"},
	} {
		if _, err := tc.s.Parse("openhands-"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
}

func TestServeOptionsConfig(t *testing.T) {
	if cfg, err := (&ServeOptions{}).Config(); err != nil || cfg.APIKey != "" {
		t.Errorf("nothing asked: %+v %v", cfg, err)
	}
	if _, err := (&ServeOptions{PublicHost: "h"}).Config(); err == nil || !strings.Contains(err.Error(), "need --openhands-listen") {
		t.Errorf("public host alone: %v", err)
	}
	if _, err := (&ServeOptions{Listen: "127.0.0.1:0"}).Config(); err == nil || !strings.Contains(err.Error(), "needs a key") {
		t.Errorf("no key: %v", err)
	}
	key := filepath.Join(t.TempDir(), "key")
	_ = os.WriteFile(key, []byte("0123456789abcdef0123\n"), 0o600)
	cfg, err := (&ServeOptions{Listen: "127.0.0.1:0", KeyFile: key, RotateKeyOnResume: true, Settings: Settings{Memory: "1g"}}).Config()
	if err != nil || cfg.APIKey != "0123456789abcdef0123" || !cfg.RotateKeyOnResume || cfg.BaseLimits.MemoryBytes != 1<<30 {
		t.Errorf("config: %+v %v", cfg, err)
	}
	_ = os.WriteFile(key, []byte("short"), 0o600)
	if _, err := (&ServeOptions{PortListen: "127.0.0.1:0", KeyFile: key}).Config(); err == nil || !strings.HasPrefix(err.Error(), "--openhands-key-file: ") {
		t.Errorf("short key: %v", err)
	}
}

func TestParseUser(t *testing.T) {
	var r StartRequest
	if err := r.ParseUser("1000:100"); err != nil || *r.RunAsUser != 1000 || *r.RunAsGroup != 100 {
		t.Errorf("1000:100: %v", err)
	}
	r = StartRequest{}
	if err := r.ParseUser(""); err != nil || r.RunAsUser != nil {
		t.Errorf("none: %v", err)
	}
	for _, bad := range []string{"root", "-1", "1:x", "1:-2"} {
		if err := (&StartRequest{}).ParseUser(bad); err == nil || !strings.Contains(err.Error(), "want UID or UID:GID") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestUpFlagsOptions checks sbx openhands up's flags: each bad one is
// refused naming it, and good ones reach UpOptions with the key read from
// its file.
func TestUpFlagsOptions(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    UpFlags
		want string
	}{
		{UpFlags{Settings: Settings{Aliases: []string{"noequals"}}}, "--alias"},
		{UpFlags{KeyFile: filepath.Join(dir, "none")}, "--key-file"},
		{UpFlags{User: "root"}, "--user"},
	} {
		if _, err := c.f.Options(nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %s", c.f, err, c.want)
		}
	}
	f := UpFlags{Settings: Settings{Memory: "1g", Env: []string{"A=1"}}, Image: "img", Name: "n", Address: "127.0.0.2", Port: 9000,
		WorkingDir: "/w", User: "1000:1001", KeyFile: keyFile, Pull: "Never", Timeout: time.Minute}
	o, err := f.Options(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != "0123456789abcdef0123" || o.Request.Image != "img" || o.Request.WorkingDir != "/w" || o.Request.ImagePullPolicy != "Never" ||
		o.Request.RunAsUser == nil || *o.Request.RunAsUser != 1000 || o.Name != "n" || o.Address != "127.0.0.2" || o.Port != 9000 ||
		o.ReadyTimeout != time.Minute || o.BaseLimits.MemoryBytes != 1<<30 || o.Environment["A"] != "1" {
		t.Fatalf("UpOptions %+v", o)
	}
}
