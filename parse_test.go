package sbx

import (
	"strings"
	"testing"
)

func TestParseVolumeAndTmpfs(t *testing.T) {
	if v, err := ParseVolume("/src:/work:ro"); err != nil || v != (Volume{HostPath: "/src", Path: "/work", ReadOnly: true}) {
		t.Errorf("ro volume: %+v %v", v, err)
	}
	// A bare name is a named volume, as in docker; a path binds.
	if v, err := ParseVolume("data:/data:ro"); err != nil || v != (Volume{Name: "data", Path: "/data", ReadOnly: true}) {
		t.Errorf("named volume: %+v %v", v, err)
	}
	if v, err := ParseVolume("./data:/data"); err != nil || v != (Volume{HostPath: "./data", Path: "/data"}) {
		t.Errorf("relative bind: %+v %v", v, err)
	}
	for _, bad := range []string{"x:/data", "-x:/data", "a b:/data"} {
		if _, err := ParseVolume(bad); err == nil || !strings.Contains(err.Error(), "volume name") {
			t.Errorf("ParseVolume(%q): %v, want a volume name error", bad, err)
		}
	}
	o := Options{Image: "x", Volumes: []Volume{{Name: "data", Path: "rel"}, {Name: "x", Path: "/y"}}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "must be absolute") || !strings.Contains(err.Error(), `volume name "x"`) {
		t.Errorf("Validate of bad named volumes: %v", err)
	}
	for s, want := range map[string]Volume{
		"/a:/b:idmap=host":    {HostPath: "/a", Path: "/b", IDMap: VolumeIDMapHost},
		"/a:/b:ro,idmap=host": {HostPath: "/a", Path: "/b", ReadOnly: true, IDMap: VolumeIDMapHost},
		"/a:/b:idmap=host,rw": {HostPath: "/a", Path: "/b", IDMap: VolumeIDMapHost},
	} {
		if v, err := ParseVolume(s); err != nil || v != want {
			t.Errorf("ParseVolume(%q) = %+v, %v; want %+v", s, v, err, want)
		}
	}
	for _, bad := range []string{"/src", "/a:/b:rx", ":/b", "/a:", "/a:/b:ro:x", "/a:/b:ro,rw", "/a:/b:idmap=sandbox",
		"/a:/b:idmap", "/a:/b:idmap=host,idmap=host", "/a:/b:", "/a:/b:ro,"} {
		if _, err := ParseVolume(bad); err == nil {
			t.Errorf("ParseVolume(%q) accepted", bad)
		}
	}
	if tm, err := ParseTmpfs("/scratch:size=64m"); err != nil || tm != (Tmpfs{Path: "/scratch", SizeBytes: 64 << 20}) {
		t.Errorf("tmpfs: %+v %v", tm, err)
	}
	for _, bad := range []string{"/t:mode=1777", "/t:size=0", "/t:size=lots"} {
		if _, err := ParseTmpfs(bad); err == nil {
			t.Errorf("ParseTmpfs(%q) accepted", bad)
		}
	}
}

func TestReadEnvFile(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "FROM_HOST" {
			return "h", true
		}
		return "", false
	}
	got, err := ReadEnvFile(strings.NewReader("# comment\n\nA=1\n  B=two words  \nFROM_HOST\nUNSET\n"), "env", lookup)
	if err != nil || strings.Join(got, ",") != "A=1,B=two words,FROM_HOST=h" {
		t.Errorf("ReadEnvFile: %q %v", got, err)
	}
	if _, err := ReadEnvFile(strings.NewReader("A=1\nBAD KEY=2\n"), "env", lookup); err == nil || !strings.Contains(err.Error(), "env:2:") {
		t.Errorf("a bad line: %v", err)
	}
}
