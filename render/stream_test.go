package render

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

func TestStreams(t *testing.T) {
	var out, errb bytes.Buffer
	logs := LogFrames(&out, &errb)
	for _, f := range []sbx.LogFrame{{Type: sbx.LogGap, Lost: 7}, {Type: sbx.LogStdout, Data: "o"}, {Type: sbx.LogStderr, Data: "e"}, {Type: sbx.LogEnd}} {
		if err := logs(f); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != "o" || errb.String() != "sbx: 7 bytes of output before this were dropped (the sandbox keeps a bounded window)\ne" {
		t.Errorf("logs: %q %q", out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	Exit(&out, &errb, "web", &sbx.Exit{ExitCode: 137, OOMKilled: true, Error: "boom"})
	if out.String() != "137\n" || errb.String() != "sbx: web: the command was killed for lack of memory (OOM)\nsbx: web: boom\n" {
		t.Errorf("exit: %q %q", out.String(), errb.String())
	}
}

func TestPorts(t *testing.T) {
	sb := &sbx.Sandbox{ID: "x", Network: &sbx.NetworkInfo{Ports: []sbx.PortMapping{
		{ContainerPort: 80, HostPort: 8080, Proto: "tcp"},
		{ContainerPort: 53, HostPort: 5353, Proto: "udp", HostIP: netip.MustParseAddr("127.0.0.1")},
	}}}
	var b bytes.Buffer
	if err := Ports(&b, "web", sb, ""); err != nil || b.String() != "80/tcp -> 0.0.0.0:8080\n53/udp -> 127.0.0.1:5353\n" {
		t.Errorf("all ports: %q %v", b.String(), err)
	}
	b.Reset()
	if err := Ports(&b, "web", sb, "53/udp"); err != nil || b.String() != "127.0.0.1:5353\n" {
		t.Errorf("53/udp: %q %v", b.String(), err)
	}
	if err := Ports(&b, "web", sb, "53"); !errors.Is(err, sbx.ErrNotFound) || !strings.HasSuffix(err.Error(), ": sandbox web publishes no port 53") {
		t.Errorf("53 (tcp): %v", err)
	}
	if err := Ports(&b, "web", &sbx.Sandbox{}, ""); err != nil {
		t.Errorf("no network: %v", err)
	}
}

func TestEventsChangesFormats(t *testing.T) {
	var b bytes.Buffer
	e := sbx.Event{Seq: 3, Type: "sandbox.created", Sandbox: "abc"}
	_ = Events(&b, "json")(e)
	if !strings.HasPrefix(b.String(), `{"seq":3,`) || !strings.HasSuffix(b.String(), "}\n") {
		t.Errorf("json event: %q", b.String())
	}
	b.Reset()
	_ = Events(&b, "text")(e)
	if b.String() != e.String()+"\n" {
		t.Errorf("text event: %q", b.String())
	}
	b.Reset()
	_ = Changes(&b, []sbx.Change{{Kind: "A", Path: "/x"}, {Kind: "D", Path: "/y"}}, "text")
	if b.String() != "A /x\nD /y\n" {
		t.Errorf("changes: %q", b.String())
	}
	b.Reset()
	_ = Changes(&b, nil, "json")
	if b.String() != "[]\n" {
		t.Errorf("no changes as json: %q", b.String())
	}
	if CheckFormat("json", "table", "json") != nil {
		t.Error("json refused")
	}
	if err := CheckFormat("yaml", "text", "json"); err == nil || err.Error() != `invalid --format "yaml": use text or json` {
		t.Errorf("yaml: %v", err)
	}
}

// LogFramesView drops what lies outside Since..Until (keeping what has no
// time), and with Timestamps puts the time before each line (none for
// output without one), a line split over two frames once.
func TestLogFramesView(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	frames := []sbx.LogFrame{
		{Type: sbx.LogStdout, Data: "old\n", Time: t0},
		{Type: sbx.LogStdout, Data: "a\nb", Time: t0.Add(time.Second)},
		{Type: sbx.LogStderr, Data: "e\n", Time: t0.Add(time.Second)},
		{Type: sbx.LogStdout, Data: "c\n", Time: t0.Add(2 * time.Second)},
		{Type: sbx.LogStdout, Data: "new\n", Time: t0.Add(3 * time.Second)},
		{Type: sbx.LogStdout, Data: "untimed\n"},
	}
	var out, errb strings.Builder
	fn := LogFramesView(&out, &errb, LogView{Timestamps: true, Since: t0.Add(time.Second), Until: t0.Add(2 * time.Second)})
	for _, f := range frames {
		if err := fn(f); err != nil {
			t.Fatal(err)
		}
	}
	want := "2026-11-28T08:00:01Z a\n2026-11-28T08:00:01Z bc\nuntimed\n"
	if out.String() != want || errb.String() != "2026-11-28T08:00:01Z e\n" {
		t.Fatalf("stdout %q (want %q), stderr %q", out.String(), want, errb.String())
	}
	out.Reset()
	fn = LogFramesView(&out, &errb, LogView{})
	_ = fn(frames[0])
	if out.String() != "old\n" {
		t.Fatalf("no view: %q", out.String())
	}
}
