package executor

import (
	"os/exec"
	"syscall"
)

var sigterm = syscall.SIGTERM

func execCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
