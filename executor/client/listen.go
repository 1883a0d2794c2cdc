package client

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// ListenFile creates the executor's listening unix socket at path (mode
// 0600, replacing a stale socket) and returns it as a file to pass to the
// sandbox's PID 1 (as fd 3: `sbx executor --listen-fd 3`). Callers can
// connect as soon as it returns, before the executor runs; the kernel queues
// the connections. The socket file stays when the returned file is closed;
// remove it when the sandbox goes.
func ListenFile(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale executor socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("create executor socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("chmod executor socket: %w", err)
	}
	f, err := ln.File()
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("executor socket file: %w", err)
	}
	return f, nil
}

// Args returns the command line that starts the executor at helper (the
// sbx binary inside the sandbox, e.g. /.sbx/sbx) on the listening socket
// passed as fd 3, with the image's user, environment and working directory
// as defaults for commands. Empty values are left out.
func Args(helper, user string, env []string, workdir string) []string {
	args := []string{helper, "executor", "--listen-fd", "3"}
	if user != "" {
		args = append(args, "--user", user)
	}
	for _, kv := range env {
		args = append(args, "--env", kv)
	}
	if workdir != "" {
		args = append(args, "--workdir", workdir)
	}
	return args
}
