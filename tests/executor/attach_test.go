package executor

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
)

// TestExecutorAttach drives the executor's attach endpoint with the Go
// client: stdin in and stdout/stderr apart without a terminal; a terminal
// of the asked size owned by the command's user, resized by a frame; the
// timeout; and a request without the Upgrade header refused.
func TestExecutorAttach(t *testing.T) {
	e := startExecutor(t)
	ctx := context.Background()
	run := func(req api.AttachRequest, script func(a *client.Attachment)) (api.ExecResult, string, string) {
		t.Helper()
		a, err := e.client.Attach(ctx, req)
		if err != nil {
			t.Fatalf("attach %v: %v", req.Argv, err)
		}
		defer a.Close()
		if script != nil {
			script(a)
		}
		var out, errb bytes.Buffer
		res, err := a.Wait(&out, &errb)
		if err != nil {
			t.Fatalf("attach %v: wait: %v", req.Argv, err)
		}
		return res, out.String(), errb.String()
	}

	res, out, errs := run(api.AttachRequest{ExecRequest: api.ExecRequest{Argv: []string{"sh", "-c", `read a; echo "got $a"; echo err >&2; cat; exit 3`}}},
		func(a *client.Attachment) {
			_, _ = a.Write([]byte("hello\nrest\n"))
			_ = a.CloseStdin()
		})
	if res.ExitCode != 3 || out != "got hello\nrest\n" || errs != "err\n" {
		t.Fatalf("attach without a terminal: %+v %q %q", res, out, errs)
	}

	res, out, _ = run(api.AttachRequest{ExecRequest: api.ExecRequest{Argv: []string{"sh", "-c", `tty; stty size; stat -c %u "$(tty)"; echo "$TERM"`}, User: "65534"}, Tty: true, Cols: 90, Rows: 33}, nil)
	if res.ExitCode != 0 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "33 90\r\n65534\r\nxterm\r\n") {
		t.Fatalf("attach with a terminal: %+v %q", res, out)
	}

	res, out, _ = run(api.AttachRequest{ExecRequest: api.ExecRequest{Argv: []string{"sh", "-c", `stty -echo; read x; stty size`}}, Tty: true},
		func(a *client.Attachment) {
			_ = a.Resize(77, 22)
			_, _ = a.Write([]byte("\n"))
		})
	if res.ExitCode != 0 || !strings.Contains(out, "22 77") {
		t.Fatalf("attach after a resize: %+v %q", res, out)
	}

	res, _, _ = run(api.AttachRequest{ExecRequest: api.ExecRequest{Argv: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond}, Tty: true}, nil)
	if !res.TimedOut || res.Signal != "SIGTERM" || res.ExitCode != sbx.ExitTimeout {
		t.Fatalf("attach past its timeout: %+v", res)
	}

	resp, err := e.client.Do(ctx, "POST", api.PathExecAttach, strings.NewReader(`{"argv":["true"]}`), "application/json", 1<<20)
	if err == nil {
		resp.Body.Close()
		t.Fatal("attach without Upgrade succeeded")
	}
	if !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("attach without Upgrade: %v", err)
	}
}
