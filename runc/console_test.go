package runc_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// receiveConsole accepts one connection on ln and returns the terminal
// master sent over it (SCM_RIGHTS), as containerd's shim receives it.
func receiveConsole(t *testing.T, ln *net.UnixListener) (*os.File, error) {
	t.Helper()
	_ = ln.SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.AcceptUnix()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, err
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, err
	}
	return os.NewFile(uintptr(fds[0]), "console"), nil
}

// TestConsoleSocket: a container with a terminal sends its pty master over
// --console-socket and runs on that terminal, for sbx-runc as for runc.
func TestConsoleSocket(t *testing.T) {
	for _, r := range runtimes(t) {
		b := bundle(t, "tty", func(spec map[string]any) {
			spec["process"].(map[string]any)["terminal"] = true
		}, "sh", "-c", "tty; echo tty-ok")
		sock := filepath.Join(t.TempDir(), "console.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		type recv struct {
			f   *os.File
			err error
		}
		got := make(chan recv, 1)
		go func() { f, err := receiveConsole(t, ln); got <- recv{f, err} }()
		res := r.run(t, "", "create", "--bundle", b, "--console-socket", sock, "tty")
		ln.Close()
		if res.code != 0 {
			t.Fatalf("%s create: %s", r.name, res.stderr)
		}
		rc := <-got
		if rc.err != nil || rc.f == nil {
			t.Fatalf("%s: no console received: %v", r.name, rc.err)
		}
		if res := r.run(t, "", "start", "tty"); res.code != 0 {
			t.Fatalf("%s start: %s", r.name, res.stderr)
		}
		_ = rc.f.SetReadDeadline(time.Now().Add(10 * time.Second))
		var out []byte
		buf := make([]byte, 512)
		for !strings.Contains(string(out), "tty-ok") {
			n, err := rc.f.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		rc.f.Close()
		if !strings.Contains(string(out), "/dev/pts/0") || !strings.Contains(string(out), "tty-ok") {
			t.Errorf("%s: terminal output %q, want /dev/pts/0 and tty-ok", r.name, out)
		}
		r.waitStatus(t, "tty", "stopped")
		if res := r.run(t, "", "delete", "tty"); res.code != 0 {
			t.Errorf("%s delete: %s", r.name, res.stderr)
		}
	}
}
