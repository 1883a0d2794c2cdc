package executor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/fileops"
	"github.com/sbxrun/sbx/executor/internal/proc"
)

// defaults are what commands get when a request names no environment,
// working directory or user. They are fixed at start (Config), and
// replaced once more when a warm pool's member is claimed: the member
// started before the sandbox's env, working directory and user were
// known. The host does not wait for the executor then: it writes them
// into a file the executor was given at start (Config.ClaimDefaults),
// which the executor reads before it serves the next request
// (applyClaimDefaults). Nothing else changes them: the executor has no
// endpoint for it.
type defaults struct {
	env     []string
	workdir string
	// user is who commands run as, userSpec how it was asked for ("":
	// the executor's own user).
	user     proc.Identity
	userSpec string
	files    *fileops.Files
}

// fileHistoryBytes bounds the edit history of the file operations.
const fileHistoryBytes = 64 << 20

func (s *Server) setDefaults(env []string, workdir string, user proc.Identity, userSpec string) {
	s.defaults.Store(&defaults{env: env, workdir: workdir, user: user, userSpec: userSpec,
		files: fileops.New(int(user.UID), int(user.GID), workdir, fileHistoryBytes)})
}

// env is the default environment of commands.
func (s *Server) env() []string { return s.defaults.Load().env }

// defaultWorkdir is the default working directory of commands.
func (s *Server) defaultWorkdir() string { return s.defaults.Load().workdir }

// fileOps are the file operations, relative to the default working
// directory.
func (s *Server) fileOps() *fileops.Files { return s.defaults.Load().files }

// replaceDefaults replaces the default environment, working directory and
// user of later commands with a claim's, creating the directory (as the
// executor's user, mode 0755) if it does not exist, as a start with
// --workdir would have. A directory that cannot be made (or is a file) is
// logged and kept as the default, since nobody waits for the claim's
// defaults: the commands that use it fail, naming it, and every other
// request is served. The user is looked up in the sandbox's /etc/passwd
// and /etc/group as a start with --user would (empty: the executor's
// own). The running commands and open sessions
// keep theirs.
func (s *Server) replaceDefaults(req api.Defaults) error {
	wd := req.Workdir
	if wd == "" {
		wd = "/"
	}
	if !filepath.IsAbs(wd) {
		return badRequest("working directory %q must be absolute", wd)
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return badRequest("environment entry %q: want KEY=VALUE", kv)
		}
	}
	user := proc.Current()
	if req.User != "" {
		u, err := proc.LookupUser(req.User)
		if err == nil {
			_, err = u.Credential()
		}
		if err != nil {
			return badRequest("default user: %v", err)
		}
		user = u
	}
	if err := makeWorkdir(wd); err != nil {
		s.log.Warn("executor: the claim's working directory", "err", err)
	}
	s.setDefaults(append([]string(nil), req.Env...), filepath.Clean(wd), user, req.User)
	return nil
}

// makeWorkdir makes the working directory wd if it does not exist.
func makeWorkdir(wd string) error {
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return badRequest("working directory %s: %v", wd, err)
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		return badRequest("working directory %s is not a directory", wd)
	}
	return nil
}

// maxClaimDefaultsBytes caps the defaults read from Config.ClaimDefaults.
const maxClaimDefaultsBytes = 4 << 20

// applyClaimDefaults replaces the defaults with those the host wrote into
// Config.ClaimDefaults when it claimed this pool member, if it has (the
// file is not empty), and lets go of the file: the defaults change once.
// Every request calls it before it is served, so that the first one after
// the claim sees the claimant's defaults; until the host writes the file,
// and once it is applied, it costs an atomic load. A file that does not
// hold a whole JSON object yet (the host writing it) is left for the next
// request, which the error fails meanwhile.
func (s *Server) applyClaimDefaults() error {
	if s.claimDefaults.Load() == nil {
		return nil
	}
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	f := s.claimDefaults.Load()
	if f == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil // not claimed yet
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, maxClaimDefaultsBytes+1))
	if err != nil {
		return fmt.Errorf("read the claim's defaults: %w", err)
	}
	if len(data) > maxClaimDefaultsBytes {
		return badRequest("the claim's defaults exceed %d bytes", maxClaimDefaultsBytes)
	}
	var req api.Defaults
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("decode the claim's defaults: %w", err)
	}
	if err := s.replaceDefaults(req); err != nil {
		return err
	}
	s.claimDefaults.Store(nil)
	f.Close()
	return nil
}

// releaseClaimDefaults lets go of the claim defaults file unread.
func (s *Server) releaseClaimDefaults() {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if f := s.claimDefaults.Swap(nil); f != nil {
		f.Close()
	}
}
