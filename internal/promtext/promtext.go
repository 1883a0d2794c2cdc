// Package promtext serves counters, gauges and histograms in the Prometheus
// text exposition format (version 0.0.4), byte for byte as the Prometheus
// Go client's promhttp handler writes them for a registry of the same
// metrics: families sorted by name, series by label values, histogram
// buckets cumulative with a "+Inf" bucket, "_sum" and "_count".
//
// sbx links it instead of the Prometheus client because the client's
// package initialisation (its default registry's Go and process
// collectors, procfs, runtime/metrics, protobuf) cost every sbx process,
// CLI commands and one-shot runs included, about 1.3 ms of CPU at start,
// for a handful of metrics only the server serves.
package promtext

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Kind is a metric family's type.
type Kind int

// The kinds of metric a Registry holds.
const (
	Counter Kind = iota
	Gauge
	Histogram
)

func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	default:
		return "histogram"
	}
}

// Registry holds metric families and writes them out.
type Registry struct {
	mu       sync.Mutex
	families map[string]*Family
	hooks    []func()
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*Family{}} }

// Family is one metric family: a name, a help text, a kind, label names,
// and one series per combination of label values seen.
type Family struct {
	reg     *Registry
	name    string
	help    string
	kind    Kind
	labels  []string  // label names, in the order values are given
	order   []int     // indexes of labels sorted by name
	buckets []float64 // upper bounds, histograms only, ascending, without +Inf
	series  map[string]*series
}

type series struct {
	values []string // label values, in the order of labels
	value  float64  // counters and gauges
	counts []uint64 // histograms: per bucket (not cumulative), then +Inf
	sum    float64
	count  uint64
}

// NewCounter adds a counter family with the given label names.
func (r *Registry) NewCounter(name, help string, labels ...string) *Family {
	return r.add(name, help, Counter, nil, labels)
}

// NewGauge adds a gauge family with the given label names.
func (r *Registry) NewGauge(name, help string, labels ...string) *Family {
	return r.add(name, help, Gauge, nil, labels)
}

// NewHistogram adds a histogram family with the given bucket upper bounds
// (ascending) and label names. A histogram without labels is written even
// before its first observation, as the Prometheus client does.
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Family {
	b := append([]float64{}, buckets...)
	if n := len(b); n > 0 && math.IsInf(b[n-1], +1) {
		b = b[:n-1]
	}
	return r.add(name, help, Histogram, b, labels)
}

func (r *Registry) add(name, help string, kind Kind, buckets []float64, labels []string) *Family {
	f := &Family{reg: r, name: name, help: help, kind: kind, labels: labels, buckets: buckets, series: map[string]*series{}}
	f.order = make([]int, len(labels))
	for i := range f.order {
		f.order[i] = i
	}
	sort.SliceStable(f.order, func(i, j int) bool { return labels[f.order[i]] < labels[f.order[j]] })
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[name]; dup {
		panic("promtext: metric " + name + " registered twice")
	}
	r.families[name] = f
	if kind == Histogram && len(labels) == 0 {
		f.get(nil)
	}
	return f
}

// OnScrape registers fn to run before each write, outside the registry's
// lock: it can Set the values that are computed when scraped.
func (r *Registry) OnScrape(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, fn)
}

// get returns the series of the label values, creating it; r.mu is held.
func (f *Family) get(values []string) *series {
	if len(values) != len(f.labels) {
		panic("promtext: metric " + f.name + ": " + strconv.Itoa(len(values)) + " label values for " + strconv.Itoa(len(f.labels)) + " labels")
	}
	key := strings.Join(values, "\xff")
	s := f.series[key]
	if s == nil {
		s = &series{values: append([]string{}, values...)}
		if f.kind == Histogram {
			s.counts = make([]uint64, len(f.buckets)+1)
		}
		f.series[key] = s
	}
	return s
}

// Add adds v to the series of the label values (counters and gauges).
func (f *Family) Add(v float64, values ...string) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	f.get(values).value += v
}

// Inc adds 1 to the series of the label values.
func (f *Family) Inc(values ...string) { f.Add(1, values...) }

// Set sets the series of the label values to v (gauges, and counters whose
// value is read from elsewhere when scraped).
func (f *Family) Set(v float64, values ...string) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	f.get(values).value = v
}

// Observe records v in the histogram series of the label values: it counts
// in the first bucket whose upper bound is at least v.
func (f *Family) Observe(v float64, values ...string) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	s := f.get(values)
	s.counts[sort.SearchFloat64s(f.buckets, v)]++
	s.sum += v
	s.count++
}

// ExponentialBuckets returns count bucket bounds: start, start*factor, ...
func ExponentialBuckets(start, factor float64, count int) []float64 {
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// WriteTo writes every family that has a series, in the text format. The
// text is rendered under the registry's lock and written out after it, so
// that a slow reader never holds up the metrics' updates.
func (r *Registry) WriteTo(out io.Writer) (int64, error) {
	r.mu.Lock()
	hooks := append([]func(){}, r.hooks...)
	r.mu.Unlock()
	for _, h := range hooks {
		h()
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n, f := range r.families {
		if len(f.series) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		r.families[n].write(w)
	}
	r.mu.Unlock()
	_ = w.Flush() // into memory: cannot fail
	return buf.WriteTo(out)
}

func (f *Family) write(w *bufio.Writer) {
	w.WriteString("# HELP " + f.name + " ")
	helpEscaper.WriteString(w, f.help)
	w.WriteString("\n# TYPE " + f.name + " " + f.kind.String() + "\n")
	all := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool {
		for _, k := range f.order {
			if a, b := all[i].values[k], all[j].values[k]; a != b {
				return a < b
			}
		}
		return false
	})
	for _, s := range all {
		if f.kind != Histogram {
			f.sample(w, "", s, "", s.value)
			continue
		}
		var cum uint64
		for i, ub := range f.buckets {
			cum += s.counts[i]
			f.sample(w, "_bucket", s, formatFloat(ub), float64(cum))
		}
		f.sample(w, "_bucket", s, "+Inf", float64(s.count))
		f.sample(w, "_sum", s, "", s.sum)
		f.sample(w, "_count", s, "", float64(s.count))
	}
}

// sample writes one line: name+suffix, the labels sorted by name, le
// last when given, and the value.
func (f *Family) sample(w *bufio.Writer, suffix string, s *series, le string, v float64) {
	w.WriteString(f.name + suffix)
	sep := byte('{')
	for _, k := range f.order {
		w.WriteByte(sep)
		w.WriteString(f.labels[k] + `="`)
		valueEscaper.WriteString(w, s.values[k])
		w.WriteByte('"')
		sep = ','
	}
	if le != "" {
		w.WriteByte(sep)
		w.WriteString(`le="` + le + `"`)
		sep = ','
	}
	if sep == ',' {
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// ServeHTTP writes the registry as promhttp does for a scrape in the text
// format: its Content-Type (with the name escaping scheme the Accept header
// asks for), gzip when Accept-Encoding prefers it to identity. It always
// writes the text format: a scraper that asks for the protocol-buffer
// format gets text too, which every Prometheus version reads.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8; escaping="+escaping(req.Header.Get("Accept")))
	var out io.Writer = w
	switch encoding(req.Header.Get("Accept-Encoding")) {
	case "gzip":
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	_, _ = r.WriteTo(out)
}

// escaping is the name escaping scheme an Accept header asks for, as
// expfmt.Negotiate reads it: the last one named up to the first entry
// that accepts the text format, "underscores" when none.
func escaping(accept string) string {
	scheme := "underscores"
	for _, part := range strings.Split(accept, ",") {
		fields := strings.Split(part, ";")
		typ := strings.TrimSpace(fields[0])
		version := ""
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.TrimSpace(k) {
			case "escaping":
				switch v = strings.TrimSpace(v); v {
				case "allow-utf-8", "underscores", "dots", "values":
					scheme = v
				}
			case "version":
				version = strings.TrimSpace(v)
			}
		}
		if typ == "text/plain" && (version == "" || version == "0.0.4") {
			break
		}
	}
	return scheme
}

// encoding is what promhttp picks from Accept-Encoding among identity and
// gzip, in that order of preference on equal quality; "identity" when
// nothing matches or gzip is refused.
func encoding(accept string) string {
	best, bestQ := "identity", -1.0
	type spec struct {
		value string
		q     float64
	}
	var specs []spec
	for _, part := range strings.Split(accept, ",") {
		fields := strings.Split(part, ";")
		v := strings.ToLower(strings.TrimSpace(fields[0]))
		if v == "" {
			continue
		}
		q := 1.0
		for _, p := range fields[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					q = f
				}
			}
		}
		specs = append(specs, spec{v, q})
	}
	for _, offer := range []string{"identity", "gzip"} {
		for _, s := range specs {
			if s.q > bestQ && (s.value == "*" || s.value == offer) {
				best, bestQ = offer, s.q
			}
		}
	}
	if bestQ == 0 {
		return "identity" // promhttp falls back to identity too
	}
	return best
}
