package bench

import (
	"math"
	"sort"
	"time"
)

// Summary describes a distribution of samples, in the samples' unit
// (milliseconds for latencies). A percentile is nil when there are too few
// samples to estimate it (see MinSamples).
type Summary struct {
	N    int      `json:"n"`
	Min  float64  `json:"min"`
	P50  float64  `json:"p50"`
	P90  *float64 `json:"p90"`
	P99  *float64 `json:"p99"`
	Max  float64  `json:"max"`
	Mean float64  `json:"mean"`
	// Stddev is the sample standard deviation.
	Stddev float64 `json:"stddev"`
}

// MinSamples returns how many samples a percentile q (0 < q < 1) needs to
// be more than the maximum: at least one sample must lie above it, so
// 10 for p90 and 100 for p99.
func MinSamples(q float64) int {
	return int(math.Ceil(1/(1-q) - 1e-9))
}

// Percentile returns the q-quantile (0 <= q <= 1) of sorted by the
// nearest-rank method: the smallest sample with at least q of the samples
// at or below it.
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// Summarize returns the summary of samples, or nil for none.
func Summarize(samples []float64) *Summary {
	if len(samples) == 0 {
		return nil
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(len(s))
	ss := 0.0
	for _, v := range s {
		ss += (v - mean) * (v - mean)
	}
	out := &Summary{N: len(s), Min: s[0], P50: Percentile(s, 0.5), Max: s[len(s)-1], Mean: mean}
	if len(s) > 1 {
		out.Stddev = math.Sqrt(ss / float64(len(s)-1))
	}
	if len(s) >= MinSamples(0.9) {
		v := Percentile(s, 0.9)
		out.P90 = &v
	}
	if len(s) >= MinSamples(0.99) {
		v := Percentile(s, 0.99)
		out.P99 = &v
	}
	return out
}

// Ms converts a duration to milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
