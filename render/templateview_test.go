package render

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// Templates take docker's field names beside the record's own.
func TestDockerViewFields(t *testing.T) {
	sb := &sbx.Sandbox{ID: "0123456789abcdef", Name: "web", Status: sbx.StatusRunning,
		Image:   &sbx.ImageInfo{Ref: "busybox:latest", Digest: "sha256:ab"},
		Network: &sbx.NetworkInfo{Ports: []sbx.PortMapping{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 8080, ContainerPort: 80, Proto: "tcp"}, {HostPort: 5353, ContainerPort: 53, Proto: "udp"}}}}
	tmpl, err := ParseFormat("{{.ID}} {{.Names}} {{.Image}} {{.Image.Digest}} {{.State.Status}} {{.State.Running}} {{.State}} {{.Status}} {{.Ports}}")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Each(&b, tmpl, DockerViews([]*sbx.Sandbox{sb})); err != nil {
		t.Fatal(err)
	}
	want := "0123456789abcdef web busybox:latest sha256:ab running true running running 127.0.0.1:8080->80/tcp, 0.0.0.0:5353->53/udp\n"
	if b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
}
