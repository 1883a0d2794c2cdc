package sandbox

import (
	"fmt"
	"time"

	"github.com/sbxrun/sbx"
)

// Templates, as E2B's: a pool whose members boot a start command and are
// claimable once a ready command passes. The commands come from the pool
// (sbx pool create --start, --ready) or, when it gives neither, from its
// image: an image whose config has a health check (a Dockerfile
// HEALTHCHECK) is a template of its own.

// TemplateSpec adds a template's start and ready commands (sbx pool create
// --start, --ready; shell command lines, run with /bin/sh -c) to spec: the
// start command becomes the members' main command, the ready command their
// ready check, with its timeout (0: the default).
func TemplateSpec(spec sbx.PoolSpec, start, ready string, timeout time.Duration) (sbx.PoolSpec, error) {
	if start != "" {
		if len(spec.Options.Cmd) > 0 {
			return spec, fmt.Errorf("%w: --start and a command after the image both set the members' main command: give one", sbx.ErrInvalid)
		}
		spec.Options.Cmd = []string{"/bin/sh", "-c", start}
	}
	if ready != "" {
		spec.ReadyCheck = &sbx.ReadyCheck{Command: []string{"/bin/sh", "-c", ready}, Timeout: timeout}
	} else if timeout != 0 {
		return spec, fmt.Errorf("%w: --ready-timeout needs --ready", sbx.ErrInvalid)
	}
	return spec, nil
}

// imageTemplate makes spec, which boots nothing and checks nothing, a
// template of its image's: when the image has a health check, the members
// boot the image's Entrypoint and Cmd (as docker run IMAGE starts it, so
// that sbx run -d IMAGE claims them) and are claimable once the health
// check's command passes. Taken when the pool is defined.
func imageTemplate(spec *sbx.PoolSpec, cfg *sbx.ImageConfig) error {
	if cfg == nil || len(spec.Options.Cmd) > 0 || spec.ReadyCheck != nil || len(spec.KeyEnv) > 0 {
		return nil
	}
	check := cfg.HealthCommand()
	if check == nil {
		return nil
	}
	p, err := cfg.Process(nil, nil, nil, "", "")
	if err != nil {
		return fmt.Errorf("%w: image %s has a HEALTHCHECK but no ENTRYPOINT or CMD for the pool's members to start: give the pool a start command (--start)", sbx.ErrInvalid, spec.Options.Image)
	}
	spec.Options.Cmd = p.Args
	spec.ReadyCheck = &sbx.ReadyCheck{Command: check}
	return spec.Validate()
}
