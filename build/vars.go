package build

import (
	"runtime"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// platformArgs are the ARGs every build defines in the global scope; a
// stage sees them once it declares them (ARG TARGETARCH), as docker does.
func platformArgs() map[string]string {
	p := "linux/" + runtime.GOARCH
	return map[string]string{
		"TARGETPLATFORM": p, "TARGETOS": "linux", "TARGETARCH": runtime.GOARCH, "TARGETVARIANT": "",
		"BUILDPLATFORM": p, "BUILDOS": "linux", "BUILDARCH": runtime.GOARCH, "BUILDVARIANT": "",
	}
}

// args are the build's ARG values: the --build-arg values, the global ARGs
// (before the first FROM) and which build args a stage used.
type args struct {
	build  map[string]string
	global map[string]string // global ARGs with a value
	used   map[string]bool
}

func newArgs(build map[string]string) *args {
	a := &args{build: build, global: platformArgs(), used: map[string]bool{}}
	return a
}

// scope is what one stage expands words with: its ARGs and its config's
// environment (ENV wins over an ARG of the same name).
type scope struct {
	lex  *shell.Lex
	args map[string]string // declared ARGs with a value, in this stage
	env  []string          // the config's environment
}

// vars returns the variables words are expanded with.
func (s *scope) vars() shell.EnvGetter {
	m := map[string]string{}
	for k, v := range s.args {
		m[k] = v
	}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return shell.EnvsFromSlice(out)
}

// word expands one word.
func (s *scope) word(w string) (string, error) {
	out, _, err := s.lex.ProcessWord(w, s.vars())
	return out, err
}

// expand expands the words of c that docker expands, each with the
// values the variables had before c.
func (s *scope) expand(c instructions.Command) error {
	if e, ok := c.(instructions.SupportsSingleWordExpansion); ok {
		if err := e.Expand(s.word); err != nil {
			return err
		}
	}
	if e, ok := c.(instructions.SupportsSingleWordExpansionRaw); ok {
		if err := e.ExpandRaw(s.word); err != nil {
			return err
		}
	}
	return nil
}

// declare records an ARG of the global scope (before the first FROM) or
// of a stage (into), with the value docker gives it: the build arg, else
// its default, else (in a stage, for a bare ARG NAME) the global value.
func (a *args) declare(c *instructions.ArgCommand, into map[string]string, global bool) {
	for _, kv := range c.Args {
		v, ok := a.build[kv.Key]
		if ok {
			a.used[kv.Key] = true
		} else if kv.Value != nil {
			v, ok = *kv.Value, true
		} else if !global {
			v, ok = a.global[kv.Key]
		}
		if ok {
			into[kv.Key] = v
		} else {
			delete(into, kv.Key)
		}
	}
}

// runEnv is the environment of a RUN step: the config's, plus the ARGs in
// scope that no ENV overrides.
func (s *scope) runEnv() []string {
	env := slices.Clone(s.env)
	have := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
	}
	keys := make([]string, 0, len(s.args))
	for k := range s.args {
		if !have[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.args[k])
	}
	return env
}

// proxyArgs are the build args a RUN sees without an ARG naming them.
var proxyArgs = []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "FTP_PROXY", "ftp_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"}

// proxyEnv is the KEY=VALUE of the proxy build args that env lacks.
func (a *args) proxyEnv(env []string) []string {
	var out []string
	for _, k := range proxyArgs {
		if v, ok := a.build[k]; ok && !hasEnv(env, k) {
			a.used[k] = true
			out = append(out, k+"="+v)
		}
	}
	return out
}

// setEnv sets KEY=VALUE in an environment list, replacing KEY's entry.
func setEnv(env []string, key, value string) []string {
	out := slices.Clone(env)
	for i, kv := range out {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			out[i] = key + "=" + value
			return out
		}
	}
	return append(out, key+"="+value)
}
