package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/promtext"
)

// metrics are the server's Prometheus metrics, all named sbx_*, in a
// registry of their own. They are written by internal/promtext, whose
// output is the Prometheus client's for the same metrics: the client's
// package initialisation would cost every sbx process (every CLI command
// and one-shot run) about 1.3 ms at start.
type metrics struct {
	reg           *promtext.Registry
	createSeconds *promtext.Family
	creates       *promtext.Family
	execs         *promtext.Family
	errors        *promtext.Family
	requests      *promtext.Family
	reqSeconds    *promtext.Family
	pulls         *promtext.Family
}

func newMetrics() *metrics {
	reg := promtext.NewRegistry()
	return &metrics{
		reg: reg,
		createSeconds: reg.NewHistogram("sbx_sandbox_create_duration_seconds",
			"Time from a create request to a ready executor, for successful creates.",
			[]float64{.01, .025, .05, .1, .2, .35, .5, .75, 1, 2, 5, 10, 30}),
		creates: reg.NewCounter("sbx_sandbox_creates_total",
			"Sandbox creates through the server, by result (ok, error).", "result"),
		execs: reg.NewCounter("sbx_exec_requests_total",
			"Commands sent to executors: exec (POST .../exec) and session runs (POST .../sessions/{id}/run).", "kind"),
		errors: reg.NewCounter("sbx_errors_total",
			"Error replies of the server's own routes, by error code.", "code"),
		requests: reg.NewCounter("sbx_http_requests_total",
			"HTTP requests by route and status code.", "route", "code"),
		reqSeconds: reg.NewHistogram("sbx_http_request_duration_seconds",
			"HTTP request duration by route (until the handler returns; streams included).",
			promtext.ExponentialBuckets(0.0005, 4, 10), "route"),
		pulls: reg.NewCounter("sbx_image_pulls_total",
			"Image pulls through the server, by result.", "result"),
	}
}

// registerBackend reports sbx_sandboxes{state} and sbx_oom_kills_total
// from the backend, read at each scrape.
func (m *metrics) registerBackend(c Background) {
	sandboxes := m.reg.NewGauge("sbx_sandboxes", "Sandboxes by state, as the server last saw them.", "state")
	oomKills := m.reg.NewCounter("sbx_oom_kills_total", "OOM kills seen in the server's sandboxes.")
	m.reg.OnScrape(func() {
		counts, oom := c.StatusCounts()
		for _, st := range []sbx.Status{sbx.StatusCreating, sbx.StatusRunning, sbx.StatusPaused, sbx.StatusStopped, sbx.StatusRemoving} {
			sandboxes.Set(float64(counts[st]), string(st))
		}
		oomKills.Set(float64(oom))
	})
}

// instrument counts and times the requests of one route.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.requests.Inc(route, strconv.Itoa(sw.status))
		m.reqSeconds.Observe(time.Since(start).Seconds(), route)
	})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.metrics.reg.ServeHTTP(w, r)
}

// statusWriter remembers the status code. Unwrap lets
// http.ResponseController reach Flush and deadlines underneath.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Flush passes flushes through (httputil.ReverseProxy asserts http.Flusher).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
