package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/executor/api"
)

// A detached exec's reply is held to what a detached start can say: a pid
// the kernel could hand out, or a failed start; anything else is an error,
// and what is passed on is safe to print.
func TestExecDetachedHostileReplies(t *testing.T) {
	for _, c := range []struct{ reply, err string }{
		{`{"exit_code":0}`, "no pid"},
		{`{"exit_code":1}`, "no pid"},
		{`{"pid":-1}`, "pid -1"},
		{`{"pid":99999999}`, "pid 99999999"},
		{`{"pid":12,"exit_code":3}`, "exit code 3"},
		{`{"pid":12,"stderr":"x"}`, "pid 12"},
		{`{"pid":12,"stdout":"out"}`, "carries output"},
		{`{"pid":12,"timed_out":true}`, "carries output"},
		{`{"pid":12,"stdout":"` + strings.Repeat("x", 100<<10) + `"}`, "exceeds"},
	} {
		ex := hostile(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, c.reply) })
		_, err := ex.Exec(context.Background(), api.ExecRequest{Argv: []string{"x"}, Detach: true})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("reply %.60s: error %v, want %q", c.reply, err, c.err)
		}
	}
	ex := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"exit_code":127,"stderr":"\u001b[2Jnot found `+strings.Repeat("m", 9000)+`","duration_s":-5}`)
	})
	res, err := ex.ExecStream(context.Background(), api.ExecRequest{Argv: []string{"x"}, Detach: true}, nil)
	if err != nil || res.Pid != 0 || res.ExitCode != 127 || strings.ContainsRune(res.Stderr, 0x1b) || len(res.Stderr) > 4096 || res.DurationS != 0 {
		t.Fatalf("failed start: %+v %v", res, err)
	}
	ex = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"exit_code":127,"stderr":"nosuch: not found in PATH\n"}`)
	})
	if res, err := ex.Exec(context.Background(), api.ExecRequest{Argv: []string{"x"}, Detach: true}); err != nil || res.Stderr != "nosuch: not found in PATH\n" {
		t.Fatalf("failed start's reason: %q %v", res.Stderr, err)
	}
	ex = hostile(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"pid":4242}`) })
	if res, err := ex.Exec(context.Background(), api.ExecRequest{Argv: []string{"x"}, Detach: true}); err != nil || res.Pid != 4242 {
		t.Fatalf("good reply: %+v %v", res, err)
	}
}
