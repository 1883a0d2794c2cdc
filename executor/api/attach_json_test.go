package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// An AttachRequest is one JSON object with the fields of ExecRequest
// (stop_grace a duration) and of the terminal, and unknown fields are
// refused.
func TestAttachRequestJSON(t *testing.T) {
	in := AttachRequest{ExecRequest: ExecRequest{Argv: []string{"sh"}, StopSignal: "SIGINT", StopGrace: 1500 * time.Millisecond}, Tty: true, Cols: 90, Rows: 33}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"argv":["sh"],"stop_signal":"SIGINT","stop_grace":"1.5s","tty":true,"cols":90,"rows":33}`; string(data) != want {
		t.Fatalf("marshal: %s, want %s", data, want)
	}
	var out AttachRequest
	if err := json.Unmarshal(data, &out); err != nil || out.StopGrace != in.StopGrace || !out.Tty || out.Cols != 90 || out.Rows != 33 || out.Argv[0] != "sh" || out.StopSignal != "SIGINT" {
		t.Fatalf("unmarshal: %+v %v", out, err)
	}
	if data, _ := json.Marshal(AttachRequest{}); string(data) != "{}" {
		t.Fatalf("empty: %s", data)
	}
	if data, _ := json.Marshal(AttachRequest{Tty: true}); string(data) != `{"tty":true}` {
		t.Fatalf("terminal only: %s", data)
	}
	if err := json.Unmarshal([]byte(`{"argv":["sh"],"ttyy":true}`), &out); err == nil || !strings.Contains(err.Error(), "ttyy") {
		t.Fatalf("unknown field: %v", err)
	}
	var req ExecRequest
	if err := json.Unmarshal([]byte(`{"command":"x","stop_grace":3}`), &req); err != nil || req.StopGrace != 3*time.Second {
		t.Fatalf("stop_grace in seconds: %+v %v", req, err)
	}
}
