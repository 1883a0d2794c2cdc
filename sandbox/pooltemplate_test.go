package sandbox

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sbxrun/sbx"
)

// A pool that boots nothing takes its image's start command and health
// check; one that gives either, or an image without a check, stays as it
// is; an image with a check and nothing to start is refused.
func TestImageTemplate(t *testing.T) {
	served := &sbx.ImageConfig{Entrypoint: []string{"/srv/run"}, Cmd: []string{"--port", "80"},
		Healthcheck: &sbx.Healthcheck{Test: []string{"CMD-SHELL", "test -f /tmp/up"}}}
	spec := sbx.PoolSpec{Name: "p", Size: 1, Options: sbx.Options{Image: "img"}}
	if err := imageTemplate(&spec, served); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec.Options.Cmd, []string{"/srv/run", "--port", "80"}) || spec.ReadyCheck == nil ||
		!reflect.DeepEqual(spec.ReadyCheck.Command, []string{"/bin/sh", "-c", "test -f /tmp/up"}) {
		t.Fatalf("the image's template: cmd %q ready %+v", spec.Options.Cmd, spec.ReadyCheck)
	}
	for _, given := range []sbx.PoolSpec{
		{Name: "p", Size: 1, Options: sbx.Options{Image: "img", Cmd: []string{"other"}}},
		{Name: "p", Size: 1, Options: sbx.Options{Image: "img", Cmd: []string{"other"}}, ReadyCheck: &sbx.ReadyCheck{Port: 80, Path: "/"}},
	} {
		want := given
		if err := imageTemplate(&given, served); err != nil || !reflect.DeepEqual(given, want) {
			t.Fatalf("a pool with its own boot changed: %+v (%v)", given, err)
		}
	}
	for _, cfg := range []*sbx.ImageConfig{nil, {Cmd: []string{"sh"}},
		{Cmd: []string{"sh"}, Healthcheck: &sbx.Healthcheck{Test: []string{"NONE"}}}} {
		plain := sbx.PoolSpec{Name: "p", Size: 1, Options: sbx.Options{Image: "img"}}
		if err := imageTemplate(&plain, cfg); err != nil || plain.Options.Cmd != nil || plain.ReadyCheck != nil {
			t.Fatalf("an image without a health check made a template: %+v (%v)", plain, err)
		}
	}
	bare := sbx.PoolSpec{Name: "p", Size: 1, Options: sbx.Options{Image: "img"}}
	err := imageTemplate(&bare, &sbx.ImageConfig{Healthcheck: served.Healthcheck})
	if !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("an image with a health check and no command: %v", err)
	}
}

func TestTemplateSpec(t *testing.T) {
	spec, err := TemplateSpec(sbx.PoolSpec{Name: "p"}, "serve", "true", 0)
	if err != nil || !reflect.DeepEqual(spec.Options.Cmd, []string{"/bin/sh", "-c", "serve"}) ||
		!reflect.DeepEqual(spec.ReadyCheck.Command, []string{"/bin/sh", "-c", "true"}) {
		t.Fatalf("TemplateSpec: %+v %v", spec, err)
	}
	if _, err := TemplateSpec(sbx.PoolSpec{Name: "p", Options: sbx.Options{Cmd: []string{"x"}}}, "serve", "", 0); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("--start with a command: %v", err)
	}
}
