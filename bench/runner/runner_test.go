package runner

import (
	"context"
	"strings"
	"testing"
)

// TestRequestChecks checks that a bad request fails before anything is
// measured, with the flag it names.
func TestRequestChecks(t *testing.T) {
	ok := Request{Format: "text", Samples: 1, Density: 1}
	for _, tc := range []struct {
		mutate func(*Request)
		want   string
	}{
		{func(r *Request) { r.Scenarios = []string{"nope"} }, "nope"},
		{func(r *Request) { r.Compare = []string{"lxc"} }, `unknown runtime "lxc" in --compare`},
		{func(r *Request) { r.Format = "html" }, `invalid --format "html"`},
		{func(r *Request) { r.PlotPath = "x.pdf" }, "use a .svg or .png"},
		{func(r *Request) { r.Density = 1001 }, "--density must be between 1 and 1000"},
		{func(r *Request) { r.Samples = 0 }, "--samples must be at least 1"},
		{func(r *Request) { r.Rootfs, r.Image = "/r", "i" }, "give --rootfs or --image, not both"},
	} {
		r := ok
		tc.mutate(&r)
		if err := Run(context.Background(), &r, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", r, err, tc.want)
		}
	}
}
