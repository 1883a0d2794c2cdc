package build

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
)

// defaultShell runs shell-form instructions when SHELL set none.
var defaultShell = []string{"/bin/sh", "-c"}

// step runs one instruction of a stage; cached reports a step reused from
// the cache.
func (b *builder) step(ctx context.Context, s *stageState, c instructions.Command) (cached bool, err error) {
	if a, ok := c.(*instructions.ArgCommand); ok {
		if err := s.sc.expand(a); err != nil {
			return false, b.errStep(c, err)
		}
		b.args.declare(a, s.sc.args, false)
		// The names alone: a value reaches the key where it is used (a
		// RUN's environment, an expanded path), as docker's cache does.
		names := make([]string, 0, len(a.Args))
		for _, kv := range a.Args {
			names = append(names, kv.Key)
		}
		s.key = chain(s.key, struct {
			Op    string
			Names []string
		}{"ARG", names})
		return false, nil
	}
	if err := s.sc.expand(c); err != nil {
		return false, b.errStep(c, err)
	}
	switch c := c.(type) {
	case *instructions.RunCommand:
		cached, err = b.run(ctx, s, c)
	case *instructions.CopyCommand:
		cached, err = b.copy(ctx, s, c, copySpec{srcs: c.SourcePaths, contents: c.SourceContents, dest: c.DestPath, chown: c.Chown, chmod: c.Chmod, from: c.From,
			parents: c.Parents, excludes: c.ExcludePatterns})
	case *instructions.AddCommand:
		cached, err = b.copy(ctx, s, c, copySpec{srcs: c.SourcePaths, contents: c.SourceContents, dest: c.DestPath, chown: c.Chown, chmod: c.Chmod, add: true, checksum: c.Checksum,
			excludes: c.ExcludePatterns})
	case *instructions.WorkdirCommand:
		cached, err = b.workdir(ctx, s, c)
	default:
		err = b.metadata(s, c)
	}
	if err != nil {
		return false, b.errStep(c, err)
	}
	return cached, nil
}

// metadata applies an instruction that changes the config alone.
func (b *builder) metadata(s *stageState, c instructions.Command) error {
	cfg := &s.cfg
	switch c := c.(type) {
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			cfg.Env = setEnv(cfg.Env, kv.Key, kv.Value)
		}
	case *instructions.LabelCommand:
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		for _, kv := range c.Labels {
			cfg.Labels[kv.Key] = kv.Value
		}
	case *instructions.MaintainerCommand:
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		cfg.Labels["maintainer"] = c.Maintainer
	case *instructions.ExposeCommand:
		for _, p := range c.Ports {
			// EXPOSE expands its words here, into several ports at once.
			words, err := s.sc.lex.ProcessWords(p, s.sc.vars())
			if err != nil {
				return err
			}
			for _, f := range words {
				if !strings.Contains(f, "/") {
					f += "/tcp"
				}
				if !slices.Contains(cfg.ExposedPorts, f) {
					cfg.ExposedPorts = append(cfg.ExposedPorts, f)
				}
			}
		}
		slices.Sort(cfg.ExposedPorts)
	case *instructions.VolumeCommand:
		for _, v := range c.Volumes {
			if v == "" {
				return fmt.Errorf("empty volume path")
			}
			if !slices.Contains(cfg.Volumes, v) {
				cfg.Volumes = append(cfg.Volumes, v)
			}
		}
	case *instructions.StopSignalCommand:
		cfg.StopSignal = c.Signal
	case *instructions.HealthCheckCommand:
		h := c.Health
		cfg.Healthcheck = &sbx.Healthcheck{Test: slices.Clone(h.Test), Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, Retries: h.Retries}
	case *instructions.ShellCommand:
		cfg.Shell = slices.Clone(c.Shell)
	case *instructions.UserCommand:
		cfg.User = c.User
	case *instructions.CmdCommand:
		cfg.Cmd = b.argv(s, c.ShellDependantCmdLine)
		s.cmdSet = true
	case *instructions.EntrypointCommand:
		cfg.Entrypoint = b.argv(s, c.ShellDependantCmdLine)
		if !s.cmdSet {
			cfg.Cmd = nil // an inherited CMD does not outlive a new ENTRYPOINT
		}
	case *instructions.OnbuildCommand:
		cfg.OnBuild = append(cfg.OnBuild, c.Expression)
	default:
		return fmt.Errorf("unsupported instruction")
	}
	s.key = chain(s.key, struct {
		Op   string
		Code string
		Cfg  sbx.ImageConfig
	}{c.Name(), code(c), s.cfg})
	return nil
}

// chownUser is the user a COPY --chown writes as: "0:0" without one; a
// uid alone is uid:uid, a name alone takes its group from /etc/passwd, an
// empty user part is root, as docker resolves them.
func chownUser(chown string) string {
	if chown == "" {
		return "0:0"
	}
	u, g, _ := strings.Cut(chown, ":")
	if u == "" {
		u = "0"
	}
	if g != "" {
		return u + ":" + g
	}
	if _, err := strconv.ParseUint(u, 10, 32); err == nil {
		return u + ":" + u
	}
	return u
}

// shell is the stage's shell for shell-form instructions.
func (s *stageState) shell() []string {
	if len(s.cfg.Shell) > 0 {
		return s.cfg.Shell
	}
	return defaultShell
}

// argv is the argv of CMD or ENTRYPOINT: exec form as written, shell form
// through the shell.
func (b *builder) argv(s *stageState, c instructions.ShellDependantCmdLine) []string {
	if !c.PrependShell {
		return slices.Clone(c.CmdLine)
	}
	return append(slices.Clone(s.shell()), strings.Join(c.CmdLine, " "))
}

// run runs a RUN step in a build sandbox.
func (b *builder) run(ctx context.Context, s *stageState, c *instructions.RunCommand) (bool, error) {
	argv, stdin, err := b.runArgv(s, c)
	if err != nil {
		return false, err
	}
	env := s.sc.runEnv()
	if !hasEnv(env, "PATH") {
		env = append(env, "PATH="+sbx.DefaultPath)
	}
	network := b.o.Network
	if instructions.GetNetwork(c) == instructions.NetworkNone {
		network = sbx.NetworkNone
	}
	mounts, err := b.runMounts(ctx, s, c)
	if err != nil {
		return false, err
	}
	mountKeys := make([]string, len(mounts))
	for i, m := range mounts {
		mountKeys[i] = m.key
	}
	key := chain(s.key, struct {
		Op                     string
		Argv                   []string
		Stdin                  string
		Env                    []string
		User, Workdir, Network string
		Mounts                 []string `json:",omitempty"`
	}{"RUN", argv, stdin, env, s.cfg.User, s.cfg.WorkingDir, network, mountKeys})
	// Proxy build args reach the command without an ARG, and stay out of
	// the key and the history, as docker keeps them.
	env = append(env, b.args.proxyEnv(env)...)
	o := sbx.Options{Env: env, User: s.cfg.User, Workdir: s.cfg.WorkingDir, Network: network}
	var secretEnv []string
	prepare := func(o *sbx.Options) ([]string, func(), error) {
		drop, senv, cleanup, err := b.setUp(ctx, mounts, o)
		secretEnv = senv
		return drop, cleanup, err
	}
	return b.inSandboxMounts(ctx, s, key, "RUN "+strings.Join(argv, " "), o, prepare, func(sb *sbx.Sandbox, _ *client.Client) error {
		t0 := time.Now()
		var out strings.Builder
		res, err := b.eng.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: argv, Stdin: stdin, Env: secretEnv}, func(f sbx.ExecFrame) error {
			if f.Type == sbx.FrameStdout || f.Type == sbx.FrameStderr {
				if out.Len() < 8<<10 {
					out.WriteString(f.Data)
				}
				_, err := io.WriteString(b.o.Output, f.Data)
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("the command exited with code %d after %.2fs", res.ExitCode, time.Since(t0).Seconds())
		}
		return nil
	})
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// runArgv is how RUN runs: the exec form as written, the shell form
// through the shell, a here-document as the shell's script (or, if it
// starts with #!, through its interpreter, reading it on stdin).
func (b *builder) runArgv(s *stageState, c *instructions.RunCommand) (argv []string, stdin string, err error) {
	if !c.PrependShell {
		return slices.Clone(c.CmdLine), "", nil
	}
	cmd := strings.Join(c.CmdLine, " ")
	if len(c.Files) == 0 {
		return append(slices.Clone(s.shell()), cmd), "", nil
	}
	if h := parser.MustParseHeredoc(cmd); len(c.Files) == 1 && h != nil {
		data := c.Files[0].Data
		if c.Files[0].Chomp {
			data = parser.ChompHeredocContent(data)
		}
		if strings.HasPrefix(data, "#!") {
			first, _, _ := strings.Cut(data, "\n")
			interp := strings.Fields(strings.TrimPrefix(first, "#!"))
			if len(interp) == 0 {
				return nil, "", fmt.Errorf("here-document with an empty #! line")
			}
			return append(interp, "/dev/stdin"), data, nil
		}
		return append(slices.Clone(s.shell()), data), "", nil
	}
	script := cmd
	for _, f := range c.Files {
		script += "\n" + f.Data + f.Name
	}
	return append(slices.Clone(s.shell()), script+"\n"), "", nil
}

// workdir sets the working directory and creates it, owned by the
// current user, in a layer of its own.
func (b *builder) workdir(ctx context.Context, s *stageState, c *instructions.WorkdirCommand) (bool, error) {
	p := c.Path
	if !path.IsAbs(p) {
		p = path.Join(orRoot(s.cfg.WorkingDir), p)
	}
	s.cfg.WorkingDir = path.Clean(p)
	key := chain(s.key, struct{ Op, Dir, User string }{"WORKDIR", s.cfg.WorkingDir, s.cfg.User})
	o := sbx.Options{User: s.cfg.User, Workdir: "/"}
	return b.inSandbox(ctx, s, key, "WORKDIR "+s.cfg.WorkingDir, o, func(_ *sbx.Sandbox, cl *client.Client) error {
		_, err := cl.PutArchive(ctx, s.cfg.WorkingDir, emptyTar())
		return err
	})
}

func orRoot(wd string) string {
	if wd == "" {
		return "/"
	}
	return wd
}

func emptyTar() io.Reader {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tar.NewWriter(pw).Close()) }()
	return pr
}

// copySpec is a COPY or ADD as expanded.
type copySpec struct {
	srcs         []string
	contents     []instructions.SourceContent
	dest         string
	chown, chmod string
	from         string
	add          bool
	checksum     string   // ADD --checksum of a URL
	parents      bool     // COPY --parents
	excludes     []string // --exclude patterns
}

// copy runs COPY or ADD: the files are written into a build sandbox by its
// executor (so the destination is resolved inside the image's root),
// owned by the --chown user or root.
func (b *builder) copy(ctx context.Context, s *stageState, c instructions.Command, cs copySpec) (bool, error) {
	chmod, err := parseChmod(cs.chmod)
	if err != nil {
		return false, err
	}
	user := chownUser(cs.chown)
	dest := cs.dest
	if !path.IsAbs(dest) {
		dest = path.Join(orRoot(s.cfg.WorkingDir), dest)
		if strings.HasSuffix(cs.dest, "/") || cs.dest == "." || cs.dest == "" {
			dest += "/"
		}
	}
	if cs.from != "" {
		return b.copyFrom(ctx, s, c, cs, dest, user, chmod)
	}
	if len(cs.contents) > 0 {
		return b.copyHeredoc(ctx, s, cs, dest, user, chmod)
	}
	if cs.add && slices.ContainsFunc(cs.srcs, isRemote) {
		return b.addURLs(ctx, s, cs, dest, user, chmod)
	}
	entries, single, err := b.ctx.copySources(cs.srcs, cs.parents, cs.excludes)
	if err != nil {
		return false, err
	}
	if cs.parents && !strings.HasSuffix(dest, "/") {
		dest += "/" // the parents go below it
	}
	sum, err := b.ctx.hash(entries)
	if err != nil {
		return false, err
	}
	key := chain(s.key, struct {
		Op, Dest, User, Chmod, Files string
		Srcs                         []string
		Parents                      bool     `json:",omitempty"`
		Excludes                     []string `json:",omitempty"`
	}{strings.ToUpper(c.Name()), dest, user, cs.chmod, sum, cs.srcs, cs.parents, cs.excludes})
	o := sbx.Options{User: user, Workdir: "/"}
	return b.inSandbox(ctx, s, key, fmt.Sprintf("%s %s in %s", strings.ToUpper(c.Name()), sum[:16], dest), o, func(_ *sbx.Sandbox, cl *client.Client) error {
		dir, err := b.destDir(ctx, cl, dest, single, entries)
		if err != nil {
			return err
		}
		if cs.add {
			var plain []entry
			for _, e := range entries {
				ar, err := b.ctx.archiveReader(e.rel)
				if err != nil {
					return err
				}
				if ar == nil || e.name != path.Base(e.rel) {
					if ar != nil {
						ar.Close()
					}
					plain = append(plain, e)
					continue
				}
				_, err = cl.PutArchive(ctx, dir, ar)
				ar.Close()
				if err != nil {
					return fmt.Errorf("extract %s: %w", e.rel, err)
				}
			}
			entries = plain
		}
		if len(entries) == 0 {
			return nil
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(b.ctx.writeTar(pw, entries, chmod)) }()
		_, err = cl.PutArchive(ctx, dir, pr)
		pr.CloseWithError(io.ErrClosedPipe)
		return err
	})
}

// destDir is the directory the entries go into: dest itself, unless one
// file is copied to a path that does not name a directory, which then
// names the file (renamed in entries).
func (b *builder) destDir(ctx context.Context, cl *client.Client, dest string, single bool, entries []entry) (string, error) {
	if !single || strings.HasSuffix(dest, "/") {
		return path.Clean(dest), nil
	}
	if l, err := cl.List(ctx, dest); err == nil && l.Path != "" {
		return dest, nil
	}
	entries[0].name = path.Base(dest)
	return path.Dir(dest), nil
}

// copyHeredoc writes the here-documents of COPY <<EOF as files.
func (b *builder) copyHeredoc(ctx context.Context, s *stageState, cs copySpec, dest, user string, chmod *chmod) (bool, error) {
	mode := tarMode(chmod.apply(0o644, false))
	key := chain(s.key, struct {
		Op, Dest, User string
		Mode           int64
		Files          []instructions.SourceContent
	}{"COPY-HEREDOC", dest, user, mode, cs.contents})
	o := sbx.Options{User: user, Workdir: "/"}
	return b.inSandbox(ctx, s, key, "COPY heredoc in "+dest, o, func(_ *sbx.Sandbox, cl *client.Client) error {
		dir, name := path.Clean(dest), ""
		if len(cs.contents) == 1 && !strings.HasSuffix(dest, "/") {
			dir, name = path.Dir(dest), path.Base(dest)
		}
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			for _, f := range cs.contents {
				n := f.Path
				if name != "" {
					n = name
				}
				if err := tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
					pw.CloseWithError(err)
					return
				}
				if _, err := io.WriteString(tw, f.Data); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.CloseWithError(tw.Close())
		}()
		_, err := cl.PutArchive(ctx, dir, pr)
		pr.CloseWithError(io.ErrClosedPipe)
		return err
	})
}

// copyFrom runs COPY --from: the files are read out of a sandbox of the
// other stage (or image) and written into the build sandbox.
func (b *builder) copyFrom(ctx context.Context, s *stageState, c instructions.Command, cs copySpec, dest, user string, chmod *chmod) (bool, error) {
	src, err := b.fromImage(ctx, cs.from)
	if err != nil {
		return false, err
	}
	for _, p := range cs.srcs {
		if strings.ContainsAny(path.Dir(path.Clean("/"+p)), "*?[") {
			return false, fmt.Errorf("%q: in COPY --from, only the last component of a path may hold a wildcard", p)
		}
	}
	key := chain(s.key, struct {
		Op, From, Dest, User, Chmod string
		Srcs                        []string
	}{"COPY-FROM", src.Digest, dest, user, cs.chmod, cs.srcs})
	o := sbx.Options{User: user, Workdir: "/"}
	return b.inSandbox(ctx, s, key, fmt.Sprintf("COPY --from=%s in %s", shortDigest(src.Digest), dest), o, func(_ *sbx.Sandbox, cl *client.Client) error {
		ssb, err := b.eng.Create(ctx, sbx.Options{Image: src.Digest, Network: sbx.NetworkNone, UserNS: sbx.UserNSHost, User: "0:0", Workdir: "/", Labels: map[string]string{"sbx.build": "source"}})
		if err != nil {
			return fmt.Errorf("sandbox of --from=%s: %w", cs.from, err)
		}
		defer b.eng.Remove(context.WithoutCancel(ctx), ssb.ID, sbx.RemoveOptions{Force: true})
		scl, _, err := client.DialSandbox(ctx, b.eng, ssb.ID)
		if err != nil {
			return err
		}
		defer scl.Close()
		var srcs []string
		for _, p := range cs.srcs {
			sp := path.Clean("/" + p)
			if !strings.ContainsAny(sp, "*?[") {
				srcs = append(srcs, sp)
				continue
			}
			l, err := scl.List(ctx, path.Dir(sp))
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			n := len(srcs)
			for _, e := range l.Entries {
				if ok, _ := path.Match(path.Base(sp), e.Name); ok {
					srcs = append(srcs, path.Join(path.Dir(sp), e.Name))
				}
			}
			if len(srcs) == n {
				return fmt.Errorf("%q matches no file in %s", p, cs.from)
			}
			slices.Sort(srcs[n:])
		}
		single := len(srcs) == 1 && !strings.ContainsAny(cs.srcs[0], "*?[")
		for _, sp := range srcs {
			p := sp
			l, lerr := scl.List(ctx, sp)
			isDir := lerr == nil && l.Path != ""
			dir, rename := path.Clean(dest), ""
			if !isDir && single && !strings.HasSuffix(dest, "/") {
				if dl, err := cl.List(ctx, dest); err != nil || dl.Path == "" {
					dir, rename = path.Dir(dest), path.Base(dest)
				}
			}
			if err := b.pipeArchive(ctx, scl, cl, sp, dir, isDir, rename, chmod); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
}

// pipeArchive copies src out of one sandbox into dir of another: a
// directory's contents, or a file (renamed when rename is set).
func (b *builder) pipeArchive(ctx context.Context, from, to *client.Client, src, dir string, isDir bool, rename string, chmod *chmod) error {
	r1, w1 := io.Pipe()
	r2, w2 := io.Pipe()
	go func() {
		_, err := from.GetArchive(ctx, src, w1, maxCopyFrom)
		w1.CloseWithError(err)
	}()
	go func() {
		err := retar(r1, w2, path.Base(src), isDir, rename, chmod)
		r1.CloseWithError(io.ErrClosedPipe)
		w2.CloseWithError(err)
	}()
	_, err := to.PutArchive(ctx, dir, r2)
	r2.CloseWithError(io.ErrClosedPipe)
	return err
}

// retar renames the entries of an archive whose names start with base: a
// directory's entries lose base (its contents are copied), a file becomes
// rename (if set); chmod replaces the modes.
func retar(r io.Reader, w io.Writer, base string, isDir bool, rename string, chmod *chmod) error {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean(hdr.Name), "./")
		switch {
		case isDir && name == base:
			continue
		case isDir:
			rest, ok := strings.CutPrefix(name, base+"/")
			if !ok {
				return fmt.Errorf("unexpected entry %q in the archive of %s", hdr.Name, base)
			}
			name = rest
		case rename != "":
			name = rename
		}
		hdr.Name = name
		if hdr.Typeflag == tar.TypeLink {
			if rest, ok := strings.CutPrefix(path.Clean(hdr.Linkname), base+"/"); ok && isDir {
				hdr.Linkname = rest
			}
		}
		if chmod != nil && hdr.Typeflag != tar.TypeSymlink {
			hdr.Mode = tarMode(chmod.apply(fileMode(hdr.Mode), hdr.Typeflag == tar.TypeDir))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}
