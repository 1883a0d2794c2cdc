package executor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxrun/sbx/executor/api"
)

// TestExecutorSessionSurvivesPromptChanges: commands that replace the
// prompt (rc files, PS1, PROMPT_COMMAND) or the shell itself (exec) leave
// the session working, with exit codes and the working directory right.
func TestExecutorSessionSurvivesPromptChanges(t *testing.T) {
	e := startExecutor(t)
	home := t.TempDir()
	skel, err := os.ReadFile("/etc/skel/.bashrc")
	if err != nil {
		t.Fatalf("Debian's /etc/skel/.bashrc is needed: %v", err)
	}
	os.WriteFile(filepath.Join(home, ".bashrc"), skel, 0o644)
	rc := filepath.Join(home, "rc")
	os.WriteFile(rc, []byte("PS1='custom> '\nPS2='more> '\nPROMPT_COMMAND='PS1=z'\n"), 0o644)
	for _, sh := range []struct{ name, spec, exec string }{
		{"bash", "bash", "exec bash"},
		{"busybox", "/usr/bin/busybox sh", "exec /usr/bin/busybox sh"},
	} {
		t.Run(sh.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSession(t, e.client, api.SessionRequest{Shell: sh.spec, Cwd: dir, Env: map[string]string{"HOME": home}})
			cmds := []string{"PS1=x", "PS1='$ '; PS2='> '", "PROMPT_COMMAND='PS1=y'", ". " + rc, "source " + rc + " 2>/dev/null || . " + rc}
			if sh.name == "bash" {
				cmds = append(cmds, "source /etc/bash.bashrc", "source ~/.bashrc", "PROMPT_COMMAND=(PS1=w)")
			}
			for _, c := range cmds {
				s.ok(c)
				wantOutput(t, "after "+c, s.ok("echo alive"), "alive\n")
			}
			// The exit code is the command's, also when it set the prompt;
			// $? in the next command is the last command's.
			if res := s.run(api.RunRequest{Command: "PS1=q; (exit 4)"}); res.Status != api.StatusCompleted || *res.ExitCode != 4 {
				t.Fatalf("exit code after PS1=q: %+v", res)
			}
			wantOutput(t, "$? carried over", s.ok("echo $?"), "4\n")
			// exec replaces the shell; the new one answers as well.
			s.ok("cd " + dir + " && export KEEP=kept")
			if res := s.run(api.RunRequest{Command: sh.exec, TimeoutS: 20}); res.Status != api.StatusCompleted || *res.ExitCode != 0 {
				t.Fatalf("%s: %+v", sh.exec, res)
			}
			wantOutput(t, "after "+sh.exec, s.ok(`echo "$KEEP $((2+3))"`), "kept 5\n")
			res := s.run(api.RunRequest{Command: "mkdir -p x && cd x && (exit 2)"})
			if res.Status != api.StatusCompleted || *res.ExitCode != 2 || res.Cwd != dir+"/x" {
				t.Fatalf("after exec: %+v", res)
			}
			// And a prompt change in the new shell is survived too.
			s.ok("PS1=again")
			wantOutput(t, "after exec and PS1", s.ok("echo fine"), "fine\n")
		})
	}
	// A bash started by exec uses readline; with a real TERM its escapes
	// must not reach the output.
	s := newSession(t, e.client, api.SessionRequest{Shell: "bash", Env: map[string]string{"HOME": home, "TERM": "xterm"}})
	s.ok("exec bash")
	wantOutput(t, "exec bash with TERM=xterm", s.ok("echo clean; false || true"), "clean\n")
	if res := s.run(api.RunRequest{Command: "(exit 9)"}); *res.ExitCode != 9 || res.Output != "" {
		t.Fatalf("exit code in the exec'd bash: %+v", res)
	}
}
