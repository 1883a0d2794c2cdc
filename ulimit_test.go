package sbx_test

import (
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

func TestParseUlimit(t *testing.T) {
	good := map[string]sbx.Ulimit{
		"nofile=1024:2048":  {Name: "nofile", Soft: 1024, Hard: 2048},
		"nproc=64":          {Name: "nproc", Soft: 64, Hard: 64},
		"core=0:unlimited":  {Name: "core", Soft: 0, Hard: -1},
		"memlock=-1:-1":     {Name: "memlock", Soft: -1, Hard: -1},
		"stack=8192:-1":     {Name: "stack", Soft: 8192, Hard: -1},
		"rtprio=0":          {Name: "rtprio"},
		"sigpending=10:100": {Name: "sigpending", Soft: 10, Hard: 100},
	}
	for in, want := range good {
		if got, err := sbx.ParseUlimit(in); err != nil || got != want {
			t.Errorf("ParseUlimit(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"nofile": "NAME=SOFT", "nofiles=1": "unknown", "nofile=2:1": "above the hard limit", "nofile=-1:10": "above the hard limit",
		"nofile=-2": "at least 0", "nofile=x": "numbers", "=1": "unknown",
	} {
		if _, err := sbx.ParseUlimit(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseUlimit(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

func TestParseExtraHost(t *testing.T) {
	for in, want := range map[string]string{"db:10.1.2.3": "10.1.2.3\tdb\n", "v6=::1": "::1\tv6\n", "a.b-c_d:[fe80::1]": "fe80::1\ta.b-c_d\n"} {
		if _, _, err := sbx.ParseExtraHost(in); err != nil {
			t.Errorf("ParseExtraHost(%q): %v", in, err)
		}
		if got := sbx.ExtraHostsLines([]string{in}); got != want {
			t.Errorf("ExtraHostsLines(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"db", ":10.0.0.1", "db:host-gateway", "db:10.0.0", "d b:10.0.0.1", "db\n1.2.3.4 evil:10.0.0.1"} {
		if _, _, err := sbx.ParseExtraHost(in); err == nil {
			t.Errorf("ParseExtraHost(%q) succeeded", in)
		}
	}
}

// Validate refuses what the container options cannot be: a bad ulimit
// or extra host, a ulimit twice, a tiny /dev/shm, -P without a bridge.
func TestValidateContainerExtras(t *testing.T) {
	ok := sbx.Options{Image: "x", Network: sbx.NetworkBridge, PublishAll: true, ShmSizeBytes: 1 << 20,
		Ulimits: []sbx.Ulimit{{Name: "nofile", Soft: 1, Hard: 2}}, ExtraHosts: []string{"a:1.2.3.4"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for why, o := range map[string]sbx.Options{
		"given twice":    {Ulimits: []sbx.Ulimit{{Name: "nofile"}, {Name: "nofile"}}},
		"unknown":        {Ulimits: []sbx.Ulimit{{Name: "files"}}},
		"not an IP":      {ExtraHosts: []string{"a:b"}},
		"at least 4k":    {ShmSizeBytes: 100},
		"needs bridge":   {PublishAll: true},
		"publish_all: t": {PublishAll: true, Network: sbx.NetworkBridge, IdleTimeout: 1},
	} {
		o.Image = "x"
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), strings.TrimSuffix(why, ": t")) {
			t.Errorf("%+v: %v, want %q", o, err, why)
		}
	}
}

// shm_size_bytes takes a number or a size with a unit, as the limits do.
func TestOptionsShmSizeJSON(t *testing.T) {
	var o sbx.Options
	if err := o.UnmarshalJSON([]byte(`{"image":"x","shm_size_bytes":"8m","ulimits":[{"name":"nofile","soft":1,"hard":2}]}`)); err != nil {
		t.Fatal(err)
	}
	if o.ShmSizeBytes != 8<<20 || o.Ulimits[0].Hard != 2 {
		t.Fatalf("%+v", o)
	}
	b, _ := o.MarshalJSON()
	if !strings.Contains(string(b), `"shm_size_bytes":8388608`) {
		t.Fatalf("%s", b)
	}
}
