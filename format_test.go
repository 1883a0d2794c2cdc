package sbx

import (
	"net/netip"
	"strings"
	"testing"
)

func TestLastLines(t *testing.T) {
	frames := []LogFrame{
		{Type: LogStdout, Offset: 0, Data: "one\ntwo\n"},
		{Type: LogStderr, Offset: 8, Data: "err\n"},
		{Type: LogStdout, Offset: 12, Data: "three\nfour"},
	}
	join := func(fs []LogFrame) string {
		var b strings.Builder
		for _, f := range fs {
			b.WriteString(f.Type[:3] + ":" + f.Data + "|")
		}
		return b.String()
	}
	for n, want := range map[int]string{
		0: "",
		1: "std:four|",
		2: "std:three\nfour|",
		3: "std:err\n|std:three\nfour|",
		4: "std:two\n|std:err\n|std:three\nfour|",
		9: "std:one\ntwo\n|std:err\n|std:three\nfour|",
	} {
		if got := join(LastLines(frames, n)); got != want {
			t.Errorf("LastLines(%d) = %q, want %q", n, got, want)
		}
	}
	if got := LastLines(frames, 1); got[0].Offset != 18 {
		t.Errorf("the cut frame starts at offset %d, want 18", got[0].Offset)
	}
	if frames[2].Data != "three\nfour" {
		t.Error("LastLines changed its input")
	}
}

func TestPortMappingString(t *testing.T) {
	p := PortMapping{HostPort: 8080, ContainerPort: 80, Proto: "tcp"}
	if s := p.String(); s != "80/tcp -> 0.0.0.0:8080" {
		t.Errorf("%q", s)
	}
	p.HostIP = netip.MustParseAddr("127.0.0.1")
	if s := p.HostAddr(); s != "127.0.0.1:8080" {
		t.Errorf("%q", s)
	}
}
