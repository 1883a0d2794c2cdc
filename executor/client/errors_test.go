package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
)

// An executor's 400 reply (a user or working directory the sandbox lacks,
// a bad signal) is the contract's sbx.ErrInvalid, whether it comes as the
// reply's status or as an error frame of a streamed reply; other replies
// are not.
func TestClientRefusalIsErrInvalid(t *testing.T) {
	c := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "" {
			w.Header().Set("Content-Type", api.ContentTypeNDJSON)
			io.WriteString(w, `{"type":"error","error":{"code":"bad_request","message":"unknown user \"nobody2\""}}`+"\n")
			return
		}
		switch r.URL.Path {
		case api.PathExec:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"bad_request","message":"unknown user \"nobody2\""}}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"code":"internal","message":"broken"}}`)
		}
	})
	_, err := c.Exec(context.Background(), api.ExecRequest{Argv: []string{"true"}, User: "nobody2"})
	var e *Error
	if !errors.Is(err, sbx.ErrInvalid) || !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("exec as a missing user: %v (%#v)", err, err)
	}
	_, err = c.ExecStream(context.Background(), api.ExecRequest{Argv: []string{"true"}, User: "nobody2"}, func(api.ExecFrame) error { return nil })
	if !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("streamed exec as a missing user: %v", err)
	}
	if _, err := c.Health(context.Background()); err == nil || errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("a 500 reply: %v", err)
	}
}
