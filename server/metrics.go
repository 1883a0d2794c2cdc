package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sbxrun/sbx"
)

// metrics are the server's Prometheus metrics, all named sbx_*, in a
// registry of their own.
type metrics struct {
	reg           *prometheus.Registry
	handler       http.Handler
	createSeconds prometheus.Histogram
	creates       *prometheus.CounterVec
	execs         *prometheus.CounterVec
	errors        *prometheus.CounterVec
	requests      *prometheus.CounterVec
	reqSeconds    *prometheus.HistogramVec
	pulls         *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		createSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sbx_sandbox_create_duration_seconds",
			Help:    "Time from a create request to a ready executor, for successful creates.",
			Buckets: []float64{.01, .025, .05, .1, .2, .35, .5, .75, 1, 2, 5, 10, 30},
		}),
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sbx_sandbox_creates_total",
			Help: "Sandbox creates through the server, by result (ok, error).",
		}, []string{"result"}),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sbx_exec_requests_total",
			Help: "Commands sent to executors: exec (POST .../exec) and session runs (POST .../sessions/{id}/run).",
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sbx_errors_total",
			Help: "Error replies of the server's own routes, by error code.",
		}, []string{"code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sbx_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		reqSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sbx_http_request_duration_seconds",
			Help:    "HTTP request duration by route (until the handler returns; streams included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sbx_image_pulls_total",
			Help: "Image pulls through the server, by result.",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.createSeconds, m.creates, m.execs, m.errors, m.requests, m.reqSeconds, m.pulls)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// statusCounter is a backend that knows how many sandboxes it has in each
// status and how many OOM kills it has seen (sandbox.Host).
type statusCounter interface {
	StatusCounts() (map[sbx.Status]int, uint64)
}

// backendCollector reports sbx_sandboxes{state} and sbx_oom_kills_total
// from the backend.
type backendCollector struct {
	c         statusCounter
	sandboxes *prometheus.Desc
	oomKills  *prometheus.Desc
}

func (g backendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.sandboxes
	ch <- g.oomKills
}

func (g backendCollector) Collect(ch chan<- prometheus.Metric) {
	counts, oom := g.c.StatusCounts()
	for _, st := range []sbx.Status{sbx.StatusCreating, sbx.StatusRunning, sbx.StatusPaused, sbx.StatusStopped, sbx.StatusRemoving} {
		ch <- prometheus.MustNewConstMetric(g.sandboxes, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(g.oomKills, prometheus.CounterValue, float64(oom))
}

func (m *metrics) registerBackend(c statusCounter) {
	m.reg.MustRegister(backendCollector{c: c,
		sandboxes: prometheus.NewDesc("sbx_sandboxes", "Sandboxes by state, as the server last saw them.", []string{"state"}, nil),
		oomKills:  prometheus.NewDesc("sbx_oom_kills_total", "OOM kills seen in the server's sandboxes.", nil, nil),
	})
}

// instrument counts and times the requests of one route.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		m.reqSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.metrics.handler.ServeHTTP(w, r)
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
