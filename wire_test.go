package sbx

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOptionsJSONRoundTrip(t *testing.T) {
	in := Options{
		Name: "dev", Image: "busybox", Cmd: []string{"sleep", "1"}, Env: []string{"A=1"},
		Limits:  Limits{MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 10, DiskBytes: 16 << 20},
		Volumes: []Volume{{HostPath: "/src", Path: "/work", ReadOnly: true}},
		Tmpfs:   []Tmpfs{{Path: "/tmp", SizeBytes: 1 << 20}},
		Labels:  map[string]string{"team": "a"},
		TTL:     90 * time.Minute,
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{`"ttl":"1h30m0s"`, `"memory_bytes":67108864`, `"disk_bytes":16777216`, `"size_bytes":1048576`, `"host_path":"/src"`} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON %s lacks %s", s, want)
		}
	}
	var out Options
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed options:\n in %+v\nout %+v", in, out)
	}
}

// A create body may give sizes as strings with a unit and the ttl in
// seconds.
func TestOptionsAcceptSizesWithUnitsAndSeconds(t *testing.T) {
	var o Options
	body := `{"rootfs":"/r","limits":{"memory_bytes":"48m","disk_bytes":16777216,"cpus":1},"tmpfs":[{"path":"/t","size_bytes":"1m"}],"ttl":3600}`
	if err := json.Unmarshal([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	want := Options{Rootfs: "/r", Limits: Limits{MemoryBytes: 48 << 20, DiskBytes: 16 << 20, CPUs: 1},
		Tmpfs: []Tmpfs{{Path: "/t", SizeBytes: 1 << 20}}, TTL: time.Hour}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got %+v, want %+v", o, want)
	}
	if err := json.Unmarshal([]byte(`{"ttl":"2h"}`), &o); err != nil || o.TTL != 2*time.Hour {
		t.Fatalf("ttl string: %v %v", o.TTL, err)
	}
}

func TestOptionsRefuseUnknownFields(t *testing.T) {
	for _, body := range []string{
		`{"imgae":"busybox"}`,
		`{"limits":{"memroy":"1m"}}`,
		`{"limits":{"memory":"1m"}}`,
		`{"limits":{"disk":1048576}}`,
		`{"tmpfs":[{"path":"/t","sizee":1}]}`,
		`{"tmpfs":[{"path":"/t","size":1}]}`,
		`{"limits":{"memory_bytes":"lots"}}`,
		`{"ttl":"soon"}`,
	} {
		var o Options
		if err := json.Unmarshal([]byte(body), &o); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "512b": 512, "1k": 1024, "64KiB": 64 << 10,
		"512m": 512 << 20, "512mb": 512 << 20, "1.5g": 3 << 29, "2GiB": 2 << 30, "1t": 1 << 40} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1m", "1x", "1e30t"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestValidate(t *testing.T) {
	good := Options{Image: "busybox", Workdir: "/w", Env: []string{"A=1"}, Volumes: []Volume{{HostPath: "/h", Path: "/h", IDMap: VolumeIDMapHost}}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for name, o := range map[string]Options{
		"image and rootfs":  {Image: "a", Rootfs: "/r"},
		"relative rootfs":   {Rootfs: "r"},
		"small memory":      {Image: "a", Limits: Limits{MemoryBytes: 1 << 20}},
		"negative pids":     {Image: "a", Limits: Limits{Pids: -1}},
		"bad network":       {Image: "a", Network: "wifi"},
		"relative workdir":  {Image: "a", Workdir: "w"},
		"env without =":     {Image: "a", Env: []string{"A"}},
		"volume on /.sbx":   {Image: "a", Volumes: []Volume{{HostPath: "/h", Path: "/.sbx/x"}}},
		"tmpfs on /":        {Image: "a", Tmpfs: []Tmpfs{{Path: "/"}}},
		"label with =":      {Image: "a", Labels: map[string]string{"a=b": "c"}},
		"negative ttl":      {Image: "a", TTL: -time.Second},
		"pull sometimes":    {Image: "a", Pull: "sometimes"},
		"NUL in cmd":        {Image: "a", Cmd: []string{"a\x00b"}},
		"relative hostpath": {Image: "a", Volumes: []Volume{{HostPath: "h", Path: "/h"}}},
		"unknown idmap":     {Image: "a", Volumes: []Volume{{HostPath: "/h", Path: "/h", IDMap: "sandbox"}}},
	} {
		if err := o.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	data, _ := json.Marshal(Duration(10 * time.Minute))
	if string(data) != `"10m0s"` {
		t.Fatalf("Duration marshals to %s", data)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`1.5`), &d); err != nil || time.Duration(d) != 1500*time.Millisecond {
		t.Fatalf("seconds: %v %v", time.Duration(d), err)
	}
}

func TestReportSignalIsAName(t *testing.T) {
	data, _ := json.Marshal(Report{Status: RunSignaled, ExitCode: 137, Signal: "SIGKILL"})
	if !strings.Contains(string(data), `"signal":"SIGKILL"`) {
		t.Fatalf("report %s", data)
	}
	data, _ = json.Marshal(ExecResult{ExitCode: 143, Signal: "SIGTERM"})
	if !strings.Contains(string(data), `"signal":"SIGTERM"`) {
		t.Fatalf("exec result %s", data)
	}
}

func TestFilterMatch(t *testing.T) {
	sb := &Sandbox{Name: "a", Status: StatusStopped, Options: Options{Labels: map[string]string{"team": "x"}}}
	var f Filter
	if err := f.ParseLabel("team=x"); err != nil || !f.Match(sb) {
		t.Fatalf("label filter: %v", err)
	}
	if (Filter{Running: true}).Match(sb) || (Filter{Name: "b"}).Match(sb) || (Filter{Labels: map[string]string{"team": "y"}}).Match(sb) {
		t.Fatal("filter selected a sandbox it should not")
	}
	if err := f.ParseLabel("=x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty label key: %v", err)
	}
}

func TestImageProcess(t *testing.T) {
	c := ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"serve"}, Env: []string{"A=1", "B=2"}, WorkingDir: "app", User: "nobody"}
	p, err := c.Process(nil, nil, []string{"B=3", "A"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Args, []string{"/entry", "serve"}) || !reflect.DeepEqual(p.Env, []string{"PATH=" + DefaultPath, "B=3"}) || p.Cwd != "/app" || p.User != "nobody" {
		t.Fatalf("process %+v", p)
	}
	p, _ = c.Process([]string{}, []string{"sh"}, nil, "/w", "0")
	if !reflect.DeepEqual(p.Args, []string{"sh"}) || p.Cwd != "/w" || p.User != "0" {
		t.Fatalf("overridden process %+v", p)
	}
	if _, err := (ImageConfig{}).Process(nil, nil, nil, "", ""); err == nil {
		t.Fatal("an image with no command and no cmd ran")
	}
}

func TestImageHealthCommand(t *testing.T) {
	for _, c := range []struct {
		cfg  ImageConfig
		want []string
	}{
		{ImageConfig{}, nil},
		{ImageConfig{Healthcheck: &Healthcheck{Test: []string{"NONE"}}}, nil},
		{ImageConfig{Healthcheck: &Healthcheck{Test: []string{"CMD"}}}, nil},
		{ImageConfig{Healthcheck: &Healthcheck{Test: []string{"CMD", "test", "-f", "/up"}}}, []string{"test", "-f", "/up"}},
		{ImageConfig{Healthcheck: &Healthcheck{Test: []string{"CMD-SHELL", "test -f /up"}}}, []string{"/bin/sh", "-c", "test -f /up"}},
		{ImageConfig{Shell: []string{"/bin/bash", "-ec"}, Healthcheck: &Healthcheck{Test: []string{"CMD-SHELL", "true"}}}, []string{"/bin/bash", "-ec", "true"}},
		{ImageConfig{Healthcheck: &Healthcheck{Test: []string{"BOGUS", "x"}}}, nil},
	} {
		if got := c.cfg.HealthCommand(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.cfg.Healthcheck, got, c.want)
		}
	}
}

// requestTypes are the contract's types a caller fills in.
var requestTypes = []reflect.Type{
	reflect.TypeFor[Options](), reflect.TypeFor[Limits](), reflect.TypeFor[Volume](), reflect.TypeFor[Tmpfs](),
	reflect.TypeFor[RunOptions](), reflect.TypeFor[ExecRequest](), reflect.TypeFor[AttachOptions](),
	reflect.TypeFor[StopOptions](), reflect.TypeFor[RemoveOptions](), reflect.TypeFor[LogOptions](),
	reflect.TypeFor[PoolSpec](), reflect.TypeFor[ReadyCheck](), reflect.TypeFor[BuildOptions](),
	reflect.TypeFor[ImportOptions](), reflect.TypeFor[PrepareOptions](), reflect.TypeFor[PruneOptions](),
	reflect.TypeFor[CheckpointOptions](), reflect.TypeFor[RestoreOptions](), reflect.TypeFor[ForkOptions](),
	reflect.TypeFor[ImageConfig](), reflect.TypeFor[Healthcheck](), reflect.TypeFor[Policy](), reflect.TypeFor[Filter](),
}

// One type per concept in what a caller gives: a span of time is a
// time.Duration (never float seconds or the JSON helper Duration), an
// environment is KEY=VALUE entries ([]string, as Options.Env).
func TestRequestShapes(t *testing.T) {
	durationType, wireDuration := reflect.TypeFor[time.Duration](), reflect.TypeFor[Duration]()
	for _, typ := range requestTypes {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || f.Anonymous {
				continue
			}
			where := typ.Name() + "." + f.Name
			switch {
			case f.Type == wireDuration:
				t.Errorf("%s is the JSON helper Duration: make it a time.Duration", where)
			case f.Type.Kind() == reflect.Float64 && strings.HasSuffix(f.Name, "S") && f.Type != durationType:
				t.Errorf("%s is float seconds: make it a time.Duration", where)
			case strings.HasSuffix(f.Name, "Env") && f.Type != reflect.TypeFor[[]string]() && f.Name != "KeyEnv":
				t.Errorf("%s is %s: an environment is KEY=VALUE entries ([]string)", where, f.Type)
			}
		}
	}
}

// The Go shapes changed; the wire did not: an exec request's env is an
// object, its timeout timeout_s seconds; a health check's durations are
// seconds; a ready check's timeout a duration string.
func TestRequestWireUnchanged(t *testing.T) {
	req := ExecRequest{Command: "env", Env: []string{"A=1", "B=x=y", "A=2"}, Timeout: 1500 * time.Millisecond, StopGrace: 3 * time.Second}
	data, err := json.Marshal(req)
	if err != nil || string(data) != `{"command":"env","env":{"A":"2","B":"x=y"},"timeout_s":1.5,"stop_grace":"3s"}` {
		t.Fatalf("exec request: %s %v", data, err)
	}
	var back ExecRequest
	if err := json.Unmarshal([]byte(`{"command":"env","env":{"B":"x=y","A":"2"},"timeout_s":1.5,"stop_grace":3}`), &back); err != nil ||
		strings.Join(back.Env, " ") != "A=2 B=x=y" || back.Timeout != 1500*time.Millisecond || back.StopGrace != 3*time.Second {
		t.Fatalf("exec request read back: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"timeout_s":1e300}`), &back); err != nil || back.Timeout <= 0 {
		t.Fatalf("a huge timeout_s: %v %v", back.Timeout, err)
	}
	if _, err := json.Marshal(ExecRequest{Env: []string{"NOVALUE"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an env entry without =: %v", err)
	}

	h := Healthcheck{Test: []string{"CMD", "true"}, Interval: 30 * time.Second, Timeout: 2500 * time.Millisecond, Retries: 3}
	data, err = json.Marshal(h)
	if err != nil || string(data) != `{"test":["CMD","true"],"retries":3,"interval_s":30,"timeout_s":2.5}` {
		t.Fatalf("health check: %s %v", data, err)
	}
	var hb Healthcheck
	if err := json.Unmarshal(data, &hb); err != nil || !reflect.DeepEqual(hb, h) {
		t.Fatalf("health check read back: %+v %v", hb, err)
	}

	var rc ReadyCheck
	if err := json.Unmarshal([]byte(`{"port":8000,"path":"/alive","timeout":"90s"}`), &rc); err != nil || rc.Timeout != 90*time.Second {
		t.Fatalf("ready check: %+v %v", rc, err)
	}
	if err := json.Unmarshal([]byte(`{"port":8000,"path":"/alive","timout":"90s"}`), &rc); err == nil {
		t.Fatal("a ready check's unknown field was accepted")
	}
	if data, err := json.Marshal(rc); err != nil || string(data) != `{"port":8000,"path":"/alive","timeout":"1m30s"}` {
		t.Fatalf("ready check: %s %v", data, err)
	}
}
