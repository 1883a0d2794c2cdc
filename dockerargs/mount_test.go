package dockerargs

import (
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

func TestParseMount(t *testing.T) {
	dir := t.TempDir()
	v, tm, err := ParseMount("type=bind,src="+dir+",dst=/data,readonly", true)
	if err != nil || tm != nil || *v != (sbx.Volume{HostPath: dir, Path: "/data", ReadOnly: true}) {
		t.Fatalf("bind: %+v %+v %v", v, tm, err)
	}
	v, _, err = ParseMount("type=bind,source="+dir+",target=/data,ro=false", true)
	if err != nil || v.ReadOnly {
		t.Fatalf("bind ro=false: %+v %v", v, err)
	}
	v, tm, err = ParseMount("type=tmpfs,destination=/t,tmpfs-size=1m", true)
	if err != nil || v != nil || *tm != (sbx.Tmpfs{Path: "/t", SizeBytes: 1 << 20}) {
		t.Fatalf("tmpfs: %+v %+v %v", v, tm, err)
	}
	for _, in := range []string{"type=volume,source=cache,target=/c,ro", "source=cache,target=/c,readonly"} { // volume is docker's default type
		v, _, err := ParseMount(in, true)
		if err != nil || *v != (sbx.Volume{Name: "cache", Path: "/c", ReadOnly: true}) {
			t.Fatalf("%s: %+v %v", in, v, err)
		}
	}
	for in, why := range map[string]string{
		"type=volume,target=/v":                                 "source=NAME",
		"type=volume,source=/h,target=/v":                       "type=bind",
		"type=bind,source=v,target=/v":                          "type=volume",
		"source=x,target=/v":                                    "volume name",
		"type=bind,target=/v":                                   "source",
		"type=bind,source=/nonexistent-x,target=/v":             "nonexistent",
		"type=tmpfs,source=x,target=/t":                         "no source",
		"type=tmpfs,target=/t,tmpfs-mode=1777":                  "not supported",
		"type=bind,source=" + dir:                               "target",
		"type=nfs,target=/t":                                    "bind, volume or tmpfs",
		"type=bind,source=" + dir + ",target=/v,readonly=maybe": "true or false",
	} {
		if _, _, err := ParseMount(in, true); err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "--mount") {
			t.Errorf("ParseMount(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

// The run flags of docker's container options reach the options.
func TestSandboxFlagsContainerExtras(t *testing.T) {
	f := SandboxFlags{PublishAll: true, AddHosts: []string{"db:10.0.0.1"}, Ulimits: []string{"nofile=10:20"}, ShmSize: "8m"}
	o, err := f.Options(true)
	if err != nil || !o.PublishAll || o.ExtraHosts[0] != "db:10.0.0.1" || o.Ulimits[0] != (sbx.Ulimit{Name: "nofile", Soft: 10, Hard: 20}) || o.ShmSizeBytes != 8<<20 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []SandboxFlags{{AddHosts: []string{"db"}}, {Ulimits: []string{"x=1"}}, {ShmSize: "1"}, {ShmSize: "lots"}} {
		if _, err := bad.Options(true); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
