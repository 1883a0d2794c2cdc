package driver

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
)

func TestTaskConfigDecodesEveryField(t *testing.T) {
	var tc TaskConfig
	// JSON, as the HCL1 parser of Nomad's test helper reads maps as lists
	// of maps (real jobs are HCL2).
	hclutils.NewConfigParser(taskConfigSpec).ParseJson(t, `{"Config": {
  "image": "busybox:1",
  "image_path": "/srv/images/busybox.tar",
  "command": "/bin/sh",
  "args": ["-c", "echo hi"],
  "entrypoint": ["/bin/tini", "--"],
  "env": {"A": "1", "B": "two"},
  "workdir": "/work",
  "user": "1000:1000",
  "network": "bridge",
  "userns": "host",
  "ports": ["http", "metrics"],
  "egress": "none",
  "seccomp": "unconfined",
  "cap_add": ["NET_ADMIN"],
  "cap_drop": ["ALL"],
  "read_only": true,
  "disk": "256m",
  "volumes": ["/srv/data:/data:ro", "/srv/cache:/cache"],
  "tmpfs": ["/scratch:64m", "/run"],
  "labels": {"team": "a"},
  "pids_limit": 64,
  "cpu_hard_limit": false
}}`, &tc)
	if tc.Image != "busybox:1" || tc.ImagePath != "/srv/images/busybox.tar" || tc.Command != "/bin/sh" ||
		strings.Join(tc.Args, " ") != "-c echo hi" || strings.Join(tc.Entrypoint, " ") != "/bin/tini --" ||
		tc.Env["B"] != "two" || tc.Workdir != "/work" || tc.User != "1000:1000" || tc.Network != "bridge" || tc.UserNS != "host" ||
		strings.Join(tc.Ports, ",") != "http,metrics" || tc.Egress != "none" || tc.Seccomp != "unconfined" ||
		tc.CapAdd[0] != "NET_ADMIN" || tc.CapDrop[0] != "ALL" || !tc.ReadOnly || tc.Disk != "256m" ||
		tc.Labels["team"] != "a" || tc.PidsLimit != 64 || tc.CPUHardLimit == nil || *tc.CPUHardLimit {
		t.Fatalf("decoded %+v", tc)
	}
	if err := tc.validate(); err != nil {
		t.Fatal(err)
	}
	vols, _ := tc.volumes()
	if len(vols) != 2 || vols[0] != (Volume{"/srv/data", "/data", true}) || vols[1] != (Volume{"/srv/cache", "/cache", false}) {
		t.Errorf("volumes %+v", vols)
	}
	tmpfs, _ := tc.tmpfs()
	if len(tmpfs) != 2 || tmpfs[0] != (Tmpfs{"/scratch", 64 << 20}) || tmpfs[1] != (Tmpfs{"/run", 0}) {
		t.Errorf("tmpfs %+v", tmpfs)
	}
	if n, _ := tc.diskBytes(); n != 256<<20 {
		t.Errorf("disk %d", n)
	}
	// pool goes with the fields a claim applies only.
	var pc TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseJson(t, `{"Config": {"image": "busybox:1", "pool": "warm", "command": "/bin/sh", "ports": ["http"], "env": {"A": "1"}}}`, &pc)
	if pc.Pool != "warm" {
		t.Fatalf("decoded %+v", pc)
	}
	if err := pc.validate(); err != nil {
		t.Fatal(err)
	}
	// What the pool fixes is checked against the pool when the task starts
	// (poolOptions), not here.
	tc.Pool = "warm"
	if err := tc.validate(); err != nil {
		t.Errorf("pool with fields of the pool's key: %v", err)
	}
}

func TestTaskConfigDefaults(t *testing.T) {
	var tc TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config { image = "busybox" }`, &tc)
	if tc.Network != "none" || tc.CPUHardLimit != nil || tc.ReadOnly {
		t.Fatalf("defaults %+v", tc)
	}
	if err := tc.validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTaskConfigRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		cfg  TaskConfig
		want string
	}{
		{TaskConfig{}, "image is required"},
		{TaskConfig{Image: "x", ImagePath: "rel/path"}, "image_path"},
		{TaskConfig{Image: "x", Workdir: "work"}, "workdir"},
		{TaskConfig{Image: "x", Network: "overlay"}, "network \"overlay\""},
		{TaskConfig{Image: "x", UserNS: "shared"}, "userns \"shared\""},
		{TaskConfig{Image: "x", Ports: []string{"http"}}, "ports need network = \"bridge\""},
		{TaskConfig{Image: "x", Network: "host", Egress: "none"}, "egress applies"},
		{TaskConfig{Image: "x", Disk: "lots"}, "disk \"lots\""},
		{TaskConfig{Image: "x", Volumes: []string{"/a"}}, "want host:container"},
		{TaskConfig{Image: "x", Volumes: []string{"a:/b"}}, "both paths must be absolute"},
		{TaskConfig{Image: "x", Volumes: []string{"/a:/b:rx"}}, "ro or rw"},
		{TaskConfig{Image: "x", Tmpfs: []string{"tmp"}}, "must be absolute"},
		{TaskConfig{Image: "x", Tmpfs: []string{"/tmp:big"}}, "want path:size"},
		{TaskConfig{Image: "x", PidsLimit: -1}, "pids_limit"},
		{TaskConfig{Image: "x", Env: map[string]string{"A=B": "c"}}, "env: name"},
	} {
		err := tc.cfg.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
}

func TestPluginConfigDefaultsAndChecks(t *testing.T) {
	var pc PluginConfig
	hclutils.NewConfigParser(configSpec).ParseHCL(t, `config {}`, &pc)
	if pc.Root != "/var/lib/sbx" || pc.RunRoot != "/run/sbx" || pc.PullPolicy != "missing" || pc.GCInterval != "5m" ||
		pc.AllowHostNetwork || pc.AllowPrivileged {
		t.Fatalf("defaults %+v", pc)
	}
	if err := pc.validate(); err != nil {
		t.Fatal(err)
	}
	if d, _ := pc.gcInterval(); d.Minutes() != 5 {
		t.Errorf("gc interval %s", d)
	}

	hclutils.NewConfigParser(configSpec).ParseHCL(t, `config {
  root = "var/sbx"
  pull_policy = "sometimes"
  gc_interval = "soon"
  allowed_host_paths = ["srv"]
  sbx_binary = "sbx"
  pids_limit = -1
}`, &pc)
	err := pc.validate()
	for _, want := range []string{`root "var/sbx"`, `pull_policy "sometimes"`, `gc_interval "soon"`, `allowed_host_paths: "srv"`, `sbx_binary "sbx"`, "pids_limit"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error with %q", err, want)
		}
	}
}
