package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
)

// options turns a create request into Manager options, applying the
// server's policy: host paths only under allowed directories, host
// networking and privileges only when allowed.
func (s *Server) options(req *api.CreateRequest) (sandbox.Options, error) {
	o := sandbox.Options{
		Name:           req.Name,
		Image:          req.Image,
		Rootfs:         req.Rootfs,
		Env:            req.Env,
		Workdir:        req.Workdir,
		User:           req.User,
		Hostname:       req.Hostname,
		Network:        req.Network,
		Publish:        req.Publish,
		Egress:         req.Egress,
		AllowHostPorts: req.AllowHostPorts,
		DNS:            req.DNS,
		ReadonlyRootfs: req.ReadonlyRootfs,
		CapDrop:        req.CapDrop,
		CapAdd:         req.CapAdd,
		Seccomp:        req.Seccomp,
		Labels:         req.Labels,
		TTL:            time.Duration(req.TTL),
		Limits: sandbox.Limits{
			MemoryBytes: int64(req.Limits.Memory),
			CPUs:        req.Limits.CPUs,
			Pids:        req.Limits.Pids,
			DiskBytes:   int64(req.Limits.Disk),
		},
	}
	for _, a := range req.Cmd {
		if strings.ContainsRune(a, 0) {
			return o, unprocessable(api.CodeInvalid, "cmd: arguments must not contain NUL bytes")
		}
	}
	if o.Rootfs != "" {
		p, err := s.allowedHostPath(o.Rootfs, "rootfs")
		if err != nil {
			return o, err
		}
		o.Rootfs = p
	}
	for _, v := range req.Volumes {
		p, err := s.allowedHostPath(v.HostPath, "volume host path")
		if err != nil {
			return o, err
		}
		o.Volumes = append(o.Volumes, sandbox.Volume{HostPath: p, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, t := range req.Tmpfs {
		o.Tmpfs = append(o.Tmpfs, sandbox.Tmpfs{Path: t.Path, SizeBytes: int64(t.Size)})
	}
	if o.Network == "host" && !s.cfg.AllowHostNetwork {
		return o, unprocessable(api.CodeForbidden, "network \"host\" is not allowed by this server (sbx serve --allow-host-network)")
	}
	if len(o.AllowHostPorts) > 0 && !s.cfg.AllowHostNetwork {
		return o, unprocessable(api.CodeForbidden, "allow_host_ports is not allowed by this server (sbx serve --allow-host-network)")
	}
	if !s.cfg.AllowHostNetwork {
		for _, d := range o.DNS {
			if a, err := netip.ParseAddr(d); err == nil && (netns.PrivateAddr(a) || hostAddr(a)) {
				return o, unprocessable(api.CodeForbidden, "dns %s: a private, loopback, link-local or host address opens port 53 to it; not allowed by this server (sbx serve --allow-host-network)", d)
			}
		}
	}
	if !s.cfg.AllowPrivileged {
		if len(o.CapAdd) > 0 {
			return o, unprocessable(api.CodeForbidden, "cap_add is not allowed by this server (sbx serve --allow-privileged)")
		}
		if o.Seccomp != "" && o.Seccomp != "default" {
			return o, unprocessable(api.CodeForbidden, "seccomp %q is not allowed by this server: only the default profile (sbx serve --allow-privileged)", o.Seccomp)
		}
	}
	return o, nil
}

// hostAddr reports whether a is assigned to one of the server host's
// interfaces (a name server there would be the host itself).
func hostAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: refuse
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if h, ok := netip.AddrFromSlice(n.IP); ok && h.Unmap() == a.Unmap() {
				return true
			}
		}
	}
	return false
}

// allowedHostPath resolves p (symlinks included) and checks that it lies
// under one of the allowed host directories.
func (s *Server) allowedHostPath(p, what string) (string, error) {
	if len(s.cfg.AllowedHostDirs) == 0 {
		return "", unprocessable(api.CodeForbidden, "%s %q: this server allows no host paths (sbx serve --allow-host-dir DIR)", what, p)
	}
	if !filepath.IsAbs(p) {
		return "", unprocessable(api.CodeInvalid, "%s %q must be an absolute path", what, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", unprocessable(api.CodeInvalid, "%s %q does not exist on the server", what, p)
		}
		return "", unprocessable(api.CodeInvalid, "%s %q: %v", what, p, err)
	}
	for _, d := range s.cfg.AllowedHostDirs {
		if rd, err := filepath.EvalSymlinks(d); err == nil {
			d = rd
		}
		if real == d || strings.HasPrefix(real, d+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", unprocessable(api.CodeForbidden, "%s %q is not under a directory this server allows", what, p)
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	opts, err := s.options(&req)
	if err != nil {
		s.fail(w, err)
		return
	}
	select {
	case s.creates <- struct{}{}:
		defer func() { <-s.creates }()
	default:
		s.fail(w, &StatusError{Status: http.StatusTooManyRequests, Code: api.CodeLimit,
			Message: fmt.Sprintf("%d creates are in flight, the server's maximum (sbx serve --max-concurrent-creates); retry", s.cfg.MaxConcurrentCreates)})
		return
	}
	start := time.Now()
	sb, err := s.mgr.Create(r.Context(), opts)
	if err != nil {
		s.metrics.creates.WithLabelValues("error").Inc()
		s.fail(w, err)
		return
	}
	s.metrics.createSeconds.Observe(time.Since(start).Seconds())
	s.metrics.creates.WithLabelValues("ok").Inc()
	s.tracker.observe(sb)
	if sb.Options.Network == "bridge" {
		s.askRefill()
	}
	reply := createReply{Sandbox: sb}
	if len(req.Cmd) > 0 {
		cs, err := s.startCmd(r.Context(), sb, &req)
		if err != nil {
			// The create fails as a whole: nothing is left behind.
			if rerr := s.mgr.Remove(context.WithoutCancel(r.Context()), sb.ID, true); rerr != nil {
				s.log.Warn("remove sandbox whose cmd did not start", "id", sb.ID, "err", rerr)
			} else {
				s.tracker.gone(sb.ID)
			}
			s.fail(w, err)
			return
		}
		reply.Cmd = cs
	}
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	writeJSON(w, http.StatusCreated, reply)
}

// createReply is the sandbox's record plus how its cmd started.
type createReply struct {
	*sandbox.Sandbox
	Cmd *api.CmdStart `json:"cmd_start,omitempty"`
}

// cmdStartWait is how long a create waits for its cmd's first output
// before answering; the command keeps running after it.
const cmdStartWait = 0.1 // seconds

// startCmd starts req.Cmd in a new shell session of the sandbox's
// executor, in the sandbox's working directory, and returns the session
// and its first reply. A session (not PID 1) runs it, so the command can
// end, be interrupted or be followed without ending the sandbox.
func (s *Server) startCmd(ctx context.Context, sb *sandbox.Sandbox, req *api.CreateRequest) (*api.CmdStart, error) {
	c, _, err := s.mgr.Executor(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sess, err := c.CreateSession(ctx, execapi.SessionRequest{Cwd: req.Workdir, User: req.User})
	if err != nil {
		return nil, unprocessable(api.CodeInvalid, "start cmd: the sandbox cannot start a shell session (cmd needs sh or bash in the image): %v", err)
	}
	off := 0.0
	res, err := c.Run(ctx, sess.ID, execapi.RunRequest{Command: shellJoin(req.Cmd), TimeoutS: cmdStartWait, NoOutputTimeoutS: &off})
	if err != nil {
		return nil, fmt.Errorf("start cmd in session %s: %w", sess.ID, err)
	}
	return &api.CmdStart{Session: sess.ID, Status: res.Status, ExitCode: res.ExitCode, Output: res.Output}, nil
}

// shellJoin quotes argv for a POSIX shell, each argument in single quotes.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	var f sandbox.Filter
	q := r.URL.Query()
	for _, l := range q["label"] {
		if err := f.ParseLabelFilter(l); err != nil {
			s.fail(w, badRequest("label filter %q: want key=value", l))
			return
		}
	}
	if st := q.Get("status"); st != "" {
		f.Status = sandbox.Status(st)
	}
	if v := q.Get("running"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, badRequest("running=%q: want true or false", v))
			return
		}
		f.Running = b
	}
	list, err := s.mgr.List(r.Context(), f)
	if err != nil {
		s.fail(w, err)
		return
	}
	if list == nil {
		list = []*sandbox.Sandbox{}
	}
	writeJSON(w, http.StatusOK, struct {
		Sandboxes []*sandbox.Sandbox `json:"sandboxes"`
	}{list})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Inspect(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) removeSandbox(w http.ResponseWriter, r *http.Request) {
	force := true
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, badRequest("force=%q: want true or false", v))
			return
		}
		force = b
	}
	ref := r.PathValue("id")
	id, err := s.mgr.Resolve(ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := s.mgr.Remove(r.Context(), id, force); err != nil {
		s.fail(w, err)
		return
	}
	s.tracker.gone(id)
	s.proxy.forget(id)
	w.WriteHeader(http.StatusNoContent)
}

// stateChange runs one Manager operation that returns the new record.
func (s *Server) stateChange(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, ref string) (*sandbox.Sandbox, error)) {
	sb, err := op(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.tracker.observe(sb)
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	s.stateChange(w, r, s.mgr.Pause)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	s.stateChange(w, r, s.mgr.Resume)
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	s.stateChange(w, r, func(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
		sb, err := s.mgr.Start(ctx, ref)
		if sb != nil {
			s.proxy.forget(sb.ID) // a new executor listens on the socket
		}
		return sb, err
	})
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.StopRequest
	if err := s.decodeJSON(w, r, &req, true); err != nil {
		s.fail(w, err)
		return
	}
	if req.Timeout < 0 {
		s.fail(w, unprocessable(api.CodeInvalid, "timeout must not be negative"))
		return
	}
	s.stateChange(w, r, func(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
		sb, err := s.mgr.Stop(ctx, ref, time.Duration(req.Timeout))
		if sb != nil {
			s.proxy.forget(sb.ID)
		}
		return sb, err
	})
}

// commitSandbox stores the sandbox's writable layer as a new image in the
// server's image cache (Manager.Commit); a running sandbox is paused
// meanwhile.
func (s *Server) commitSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CommitRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if req.Name == "" {
		s.fail(w, unprocessable(api.CodeInvalid, "name is required: the name of the new image"))
		return
	}
	img, err := s.mgr.Commit(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Image{Name: img.Ref, Digest: img.Digest})
}

func (s *Server) sandboxStats(w http.ResponseWriter, r *http.Request) {
	u, err := s.mgr.Stats(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

// listAll lists every sandbox, logging errors.
func (s *Server) listAll(ctx context.Context) []*sandbox.Sandbox {
	list, err := s.mgr.List(ctx, sandbox.Filter{})
	if err != nil {
		s.log.Warn("list sandboxes", "err", err)
		return nil
	}
	return list
}
