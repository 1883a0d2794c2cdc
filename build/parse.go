package build

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/sbxrun/sbx"
)

// maxDockerfile caps the size of a Dockerfile.
const maxDockerfile = 1 << 20

// file is a parsed Dockerfile.
type file struct {
	name     string
	stages   []instructions.Stage
	metaArgs []instructions.ArgCommand
	escape   rune
}

// parse parses a Dockerfile and refuses, with its line, what builds here
// do not do.
func parse(name string, text []byte) (*file, error) {
	if len(text) > maxDockerfile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", sbx.ErrInvalid, name, maxDockerfile)
	}
	res, err := parser.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", sbx.ErrInvalid, name, lineError(err))
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", sbx.ErrInvalid, name, lineError(err))
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("%w: %s has no FROM", sbx.ErrInvalid, name)
	}
	f := &file{name: name, stages: stages, metaArgs: metaArgs, escape: res.EscapeToken}
	for _, st := range stages {
		for _, c := range st.Commands {
			if err := f.supported(c); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// lineError is a parser error with the line it names, if it names one.
func lineError(err error) string {
	var loc *parser.LocationError
	if errors.As(err, &loc) && len(loc.Locations) > 0 && len(loc.Locations[0]) > 0 {
		return fmt.Sprintf("line %d: %v", loc.Locations[0][0].Start.Line, err)
	}
	return err.Error()
}

// line is the first line of a command, or 0.
func line(c instructions.Command) int {
	if loc := c.Location(); len(loc) > 0 {
		return loc[0].Start.Line
	}
	return 0
}

// errorAt is an error about the command c.
func (f *file) errorAt(c instructions.Command, format string, args ...any) error {
	return fmt.Errorf("%w: %s line %d: %s: %s", sbx.ErrInvalid, f.name, line(c), strings.ToUpper(c.Name()), fmt.Sprintf(format, args...))
}

// supported refuses the instructions and flags a build here cannot honour.
func (f *file) supported(c instructions.Command) error {
	switch c := c.(type) {
	case *instructions.RunCommand:
		for _, flag := range c.FlagsUsed {
			switch flag {
			case "mount":
				// The words as written (a build expands them again), to
				// see the types.
				if err := c.Expand(func(w string) (string, error) { return w, nil }); err != nil {
					return f.errorAt(c, "%v", err)
				}
				for _, m := range instructions.GetMounts(c) {
					if m.Type == instructions.MountTypeSSH && (m.UID != nil || m.GID != nil || m.Mode != nil) {
						return f.errorAt(c, "--mount=type=ssh: uid, gid and mode are not supported by sbx build (the agent's socket is bound as it is)")
					}
				}
			case "network":
				switch instructions.GetNetwork(c) {
				case instructions.NetworkDefault, instructions.NetworkNone:
				default:
					return f.errorAt(c, "--network=%s: a RUN step has the build's network (sbx build --network) or none", instructions.GetNetwork(c))
				}
			default:
				return f.errorAt(c, "--%s is not supported by sbx build", flag)
			}
		}
	case *instructions.CopyCommand:
		if (c.Parents || len(c.ExcludePatterns) > 0) && c.From != "" {
			return f.errorAt(c, "--parents and --exclude apply to the build context: with --from they are not supported by sbx build")
		}
		if c.From != "" && len(c.SourceContents) > 0 {
			return f.errorAt(c, "a here-document cannot be copied --from another stage")
		}
	case *instructions.AddCommand:
		if c.KeepGitDir != nil {
			return f.errorAt(c, "--keep-git-dir is not supported by sbx build: ADD of a git repository is not")
		}
		if c.Checksum != "" && !slices.ContainsFunc(c.SourcePaths, isRemote) {
			return f.errorAt(c, "--checksum checks a download: it applies to the URLs of ADD only")
		}
		for _, src := range c.SourcePaths {
			if isGit(src) {
				return f.errorAt(c, "%q: ADD of a git repository is not supported by sbx build; clone it in a RUN step", src)
			}
		}
	case *instructions.OnbuildCommand:
		trigger, err := parseTrigger(c.Expression)
		if err != nil {
			return f.errorAt(c, "%v", err)
		}
		return f.supported(trigger)
	}
	return nil
}

// parseTrigger parses the instruction of an ONBUILD trigger.
func parseTrigger(expr string) (instructions.Command, error) {
	res, err := parser.Parse(strings.NewReader(expr))
	if err != nil {
		return nil, fmt.Errorf("trigger %q: %w", expr, err)
	}
	if len(res.AST.Children) != 1 {
		return nil, fmt.Errorf("trigger %q is not one instruction", expr)
	}
	cmd, err := instructions.ParseCommand(res.AST.Children[0])
	if err != nil {
		return nil, fmt.Errorf("trigger %q: %w", expr, err)
	}
	if _, ok := cmd.(*instructions.OnbuildCommand); ok {
		return nil, fmt.Errorf("ONBUILD ONBUILD is not allowed")
	}
	return cmd, nil
}

func isGit(src string) bool {
	return strings.HasPrefix(src, "git@") || strings.HasPrefix(src, "git://") || strings.HasPrefix(src, "ssh://") ||
		strings.HasSuffix(strings.SplitN(src, "#", 2)[0], ".git") && isRemote(src)
}

// isRemote reports whether an ADD source is a URL.
func isRemote(src string) bool {
	for _, p := range []string{"http://", "https://", "git@", "git://"} {
		if strings.HasPrefix(src, p) {
			return true
		}
	}
	return false
}

// plan returns the indexes of the stages the target needs, in order:
// the target and every stage it reaches through FROM and COPY --from.
func (f *file) plan(target string) ([]int, error) {
	last := len(f.stages) - 1
	if target != "" {
		i, ok := f.stageIndex(target)
		if !ok {
			return nil, fmt.Errorf("%w: %s has no stage called %q", sbx.ErrInvalid, f.name, target)
		}
		last = i
	}
	need := map[int]bool{}
	var visit func(i int)
	visit = func(i int) {
		if need[i] {
			return
		}
		need[i] = true
		st := f.stages[i]
		if j, ok := f.stageIndex(st.BaseName); ok && j < i {
			visit(j)
		}
		for _, c := range st.Commands {
			var from []string
			switch c := c.(type) {
			case *instructions.CopyCommand:
				from = append(from, c.From)
			case *instructions.RunCommand:
				for _, m := range instructions.GetMounts(c) {
					from = append(from, m.From)
				}
			}
			for _, name := range from {
				if j, ok := f.stageIndex(name); ok && name != "" && j < i {
					visit(j)
				}
			}
		}
	}
	visit(last)
	var out []int
	for i := 0; i <= last; i++ {
		if need[i] {
			out = append(out, i)
		}
	}
	return out, nil
}

// stageIndex finds a stage by name (case-insensitive) or number.
func (f *file) stageIndex(ref string) (int, bool) {
	for i, st := range f.stages {
		if st.Name != "" && strings.EqualFold(st.Name, ref) {
			return i, true
		}
	}
	var n int
	if _, err := fmt.Sscanf(ref, "%d", &n); err == nil && fmt.Sprint(n) == ref && n >= 0 && n < len(f.stages) {
		return n, true
	}
	return 0, false
}
