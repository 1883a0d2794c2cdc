package promtext

import (
	"compress/gzip"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// twin is one family built twice: here and with the Prometheus client.
type twin struct {
	ours *Family
	add  func(v float64, values ...string) // the client's Add/Observe/Set
	kind Kind
	n    int // label count
}

// twins builds the same families in both registries: every kind, with
// and without labels, labels given out of name order, awkward values.
func twins(t *testing.T) (*Registry, *prometheus.Registry, []twin) {
	ours, theirs := NewRegistry(), prometheus.NewRegistry()
	var out []twin
	buckets := ExponentialBuckets(0.0005, 4, 10)
	if got := prometheus.ExponentialBuckets(0.0005, 4, 10); fmt.Sprint(got) != fmt.Sprint(buckets) {
		t.Fatalf("buckets %v, client %v", buckets, got)
	}
	lin := []float64{.01, .025, .05, .1, .2, .35, .5, .75, 1, 2, 5, 10, 30}

	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_requests_total", Help: "Requests by route\\code.\nSecond line."}, []string{"route", "code"})
	out = append(out, twin{ours.NewCounter("b_requests_total", "Requests by route\\code.\nSecond line.", "route", "code"),
		func(v float64, l ...string) { c.WithLabelValues(l...).Add(v) }, Counter, 2})
	c0 := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "Plain."})
	out = append(out, twin{ours.NewCounter("a_total", "Plain."), func(v float64, _ ...string) { c0.Add(v) }, Counter, 0})
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "c_sandboxes", Help: "By state."}, []string{"state"})
	out = append(out, twin{ours.NewGauge("c_sandboxes", "By state.", "state"),
		func(v float64, l ...string) { g.WithLabelValues(l...).Set(v) }, Gauge, 1})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "d_seconds", Help: "Plain histogram.", Buckets: lin})
	out = append(out, twin{ours.NewHistogram("d_seconds", "Plain histogram.", lin), func(v float64, _ ...string) { h.Observe(v) }, Histogram, 0})
	hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "e_seconds", Help: "By route.", Buckets: buckets}, []string{"zroute", "alpha"})
	out = append(out, twin{ours.NewHistogram("e_seconds", "By route.", buckets, "zroute", "alpha"),
		func(v float64, l ...string) { hv.WithLabelValues(l...).Observe(v) }, Histogram, 2})
	unused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f_unused_total", Help: "Never counted."}, []string{"x"})
	ours.NewCounter("f_unused_total", "Never counted.", "x")
	theirs.MustRegister(c, c0, g, h, hv, unused)
	return ours, theirs, out
}

// TestSameTextAsPrometheusClient replays the same random updates into
// both registries and compares what a scrape returns, byte for byte, with
// the headers a scraper sends (none, curl, Go's client, Prometheus).
func TestSameTextAsPrometheusClient(t *testing.T) {
	ours, theirs, tw := twins(t)
	handler := promhttp.HandlerFor(theirs, promhttp.HandlerOpts{})
	values := []string{"GET /v1/sandboxes/{id}", "POST /v1/sandboxes", `quote " and \ backslash`, "new\nline", "", "ü"}
	rng := rand.New(rand.NewSource(1))
	headers := []http.Header{
		{},
		{"Accept": {"*/*"}},
		{"Accept-Encoding": {"gzip"}},
		{"Accept": {"text/plain;version=0.0.4;q=0.3,*/*;q=0.2"}, "Accept-Encoding": {"gzip, deflate"}},
		{"Accept": {"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"}},
		{"Accept-Encoding": {"gzip;q=0, identity"}},
		{"Accept-Encoding": {"*"}},
	}
	for round := 0; round < 40; round++ {
		for i := 0; i < 1+rng.Intn(30); i++ {
			x := tw[rng.Intn(len(tw))]
			labels := make([]string, x.n)
			for j := range labels {
				labels[j] = values[rng.Intn(len(values))]
			}
			// Multiples of 1/1024 add up exactly in any order, so the
			// sums agree whatever order the client adds its parts in.
			v := float64(rng.Intn(40000)) / 1024
			if x.kind == Histogram && rng.Intn(3) == 0 {
				v = []float64{0.0005, 0.002, 1, 30, 31, 0}[rng.Intn(6)] // on and past the bounds
			}
			switch x.kind {
			case Counter:
				x.ours.Add(v, labels...)
			case Gauge:
				v -= 10
				x.ours.Set(v, labels...)
			case Histogram:
				x.ours.Observe(v, labels...)
			}
			x.add(v, labels...)
		}
		h := headers[round%len(headers)]
		want, wantHdr := scrape(t, handler, h)
		got, gotHdr := scrape(t, ours, h)
		if got != want {
			t.Fatalf("round %d, headers %v: text differs\n--- ours:\n%s\n--- client:\n%s", round, h, got, want)
		}
		for _, k := range []string{"Content-Type", "Content-Encoding"} {
			if gotHdr.Get(k) != wantHdr.Get(k) {
				t.Fatalf("round %d, headers %v: %s %q, client %q", round, h, k, gotHdr.Get(k), wantHdr.Get(k))
			}
		}
	}
}

func scrape(t *testing.T, h http.Handler, hdr http.Header) (string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var body io.Reader = rec.Body
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), rec.Header()
}

func TestOnScrapeAndEmptyFamilies(t *testing.T) {
	r := NewRegistry()
	g := r.NewGauge("g", "Set when scraped.", "state")
	r.NewCounter("never_total", "Never counted.", "x")
	n := 0
	r.OnScrape(func() { n++; g.Set(float64(n), "running") })
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	_, _ = r.WriteTo(&b)
	want := "# HELP g Set when scraped.\n# TYPE g gauge\ng{state=\"running\"} 2\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

func TestMisuse(t *testing.T) {
	r := NewRegistry()
	f := r.NewCounter("x_total", "X.", "a")
	for name, fn := range map[string]func(){
		"wrong label count": func() { f.Inc() },
		"registered twice":  func() { r.NewCounter("x_total", "again") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
}
