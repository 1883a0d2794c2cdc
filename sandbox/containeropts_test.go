package sandbox

import (
	"slices"
	"testing"

	"github.com/sbxrun/sbx"
)

// -P publishes each exposed port once, leaves the ports -p names to -p,
// skips what does not parse, and does the same when run again (a sandbox
// started again from its record).
func TestPublishExposed(t *testing.T) {
	o := &sbx.Options{PublishAll: true, Publish: []string{"127.0.0.1:8080:80"}}
	cfg := &sbx.ImageConfig{ExposedPorts: []string{"80/tcp", "53/udp", "8443", "nonsense/tcp", "99999/tcp"}}
	publishExposed(o, cfg)
	want := []string{"127.0.0.1:8080:80", "0:53/udp", "0:8443/tcp"}
	if !slices.Equal(o.Publish, want) {
		t.Fatalf("Publish = %q, want %q", o.Publish, want)
	}
	publishExposed(o, cfg)
	if !slices.Equal(o.Publish, want) {
		t.Fatalf("again: Publish = %q, want %q", o.Publish, want)
	}
	plain := &sbx.Options{}
	publishExposed(plain, cfg)
	if len(plain.Publish) != 0 {
		t.Fatalf("without PublishAll: %q", plain.Publish)
	}
}

func TestOCIRlimits(t *testing.T) {
	got := ociRlimits([]sbx.Ulimit{{Name: "nofile", Soft: 10, Hard: -1}})
	if len(got) != 1 || got[0].Type != "RLIMIT_NOFILE" || got[0].Soft != 10 || got[0].Hard != ^uint64(0) {
		t.Fatalf("%+v", got)
	}
}
