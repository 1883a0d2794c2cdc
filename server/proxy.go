package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// executorProxy passes requests under /v1/sandboxes/{id}/ to the executor
// of the sandbox, unchanged but for the path prefix and the credentials.
// The executor is untrusted: dials and replies have deadlines, reply
// headers and bodies are capped, and the client's token never reaches it.
type executorProxy struct {
	s    *Server
	tr   *http.Transport
	rp   *httputil.ReverseProxy
	pids sync.Map // sandbox id -> PID 1 its pooled connections lead to
}

type proxyTarget struct {
	id   string
	path string // the executor's path, e.g. /v1/exec
}

type proxyTargetKey struct{}

func newExecutorProxy(s *Server) *executorProxy {
	p := &executorProxy{s: s}
	p.tr = &http.Transport{
		DialContext:            p.dial,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        60 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
		ExpectContinueTimeout:  time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      p.tr,
		FlushInterval:  -1, // streamed exec output goes out as it comes
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return p
}

// dial connects to the executor of the sandbox named by addr's host.
func (p *executorProxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	id, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return p.s.b.Dial(ctx, id)
}

func (p *executorProxy) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(proxyTargetKey{}).(proxyTarget)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = t.id // one connection pool per sandbox
	pr.Out.URL.Path = t.path
	pr.Out.URL.RawPath = ""
	pr.Out.Host = "executor"
	for _, h := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
		pr.Out.Header.Del(h)
	}
}

func (p *executorProxy) modifyResponse(resp *http.Response) error {
	max := p.s.cfg.MaxReplyBytes
	if resp.ContentLength > max {
		return &StatusError{Status: http.StatusBadGateway, Code: api.CodeBadGateway,
			Message: fmt.Sprintf("the executor's reply of %d bytes exceeds the server's cap of %d", resp.ContentLength, max)}
	}
	resp.Body = &cappedBody{rc: resp.Body, left: max}
	// The executor is untrusted: its replies are data, never a page a
	// browser should interpret or a cookie it should keep.
	resp.Header.Del("Set-Cookie")
	resp.Header.Set("X-Content-Type-Options", "nosniff")
	return nil
}

func (p *executorProxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	var se *StatusError
	switch {
	case errors.As(err, &se):
	case errors.As(err, &mbe):
		err = &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body exceeds the limit of %d bytes", mbe.Limit), Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		err = &StatusError{Status: http.StatusGatewayTimeout, Code: api.CodeBadGateway,
			Message: fmt.Sprintf("the executor did not finish within the server's proxy timeout of %s", p.s.cfg.ProxyTimeout), Err: err}
	case errors.Is(err, context.Canceled):
		return // the client went away
	default:
		err = &StatusError{Status: http.StatusBadGateway, Code: api.CodeBadGateway,
			Message: fmt.Sprintf("the sandbox's executor failed: %v", err), Err: err}
	}
	p.s.fail(w, err)
}

func (p *executorProxy) close() { p.tr.CloseIdleConnections() }

// proxyExecutor serves the executor routes under /v1/sandboxes/{id}/.
func (s *Server) proxyExecutor(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("id")
	prefix := "/v1/sandboxes/" + ref
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || !strings.HasPrefix(rest, "/") {
		s.fail(w, badRequest("bad sandbox path %q", r.URL.Path))
		return
	}
	sb, err := s.b.Get(r.Context(), ref)
	if err == nil && sb.Status == sbx.StatusStopped && sb.Idle {
		// Checkpointed by its idle timeout: the call restores it first.
		sb, err = s.b.Start(r.Context(), sb.ID)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	if sb.Status != sbx.StatusRunning {
		s.fail(w, fmt.Errorf("%w: sandbox %s is %s: its executor answers only while it runs", sbx.ErrState, sb.ShortID(), sb.Status))
		return
	}
	id := sb.ID
	if old, loaded := s.proxy.pids.Swap(id, sb.Pid); loaded && old.(int) != sb.Pid {
		// A new executor (the sandbox was restarted): pooled connections
		// lead to the old one.
		s.proxy.tr.CloseIdleConnections()
	}
	limit := proxyBodyLimit(r.Method, rest, s.cfg.MaxBodyBytes, s.cfg.MaxUploadBytes)
	if r.ContentLength > limit {
		s.fail(w, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body of %d bytes exceeds the limit of %d", r.ContentLength, limit)})
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	switch {
	case rest == "/exec":
		s.metrics.execs.Inc("exec")
	case strings.HasSuffix(rest, "/run"):
		s.metrics.execs.Inc("session")
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ProxyTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, proxyTargetKey{}, proxyTarget{id: id, path: "/v1" + rest})
	s.proxy.rp.ServeHTTP(w, r.WithContext(ctx))
}

// proxyBodyLimit is the request body cap of an executor route: file
// content (PUT of a file or archive, and the editor, whose file_text is a
// file's content) is an upload (MaxUploadBytes, the executor caps an edit
// at 16 MiB itself); every other body is JSON, held to the server's
// request limit (MaxBodyBytes) like the server's own routes.
func proxyBodyLimit(method, path string, maxBody, maxUpload int64) int64 {
	if method == http.MethodPut || path == "/files/edit" {
		return maxUpload
	}
	return maxBody
}

// cappedBody fails a read past its cap, so a hostile executor cannot
// stream without end.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("executor reply exceeds the server's cap")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
