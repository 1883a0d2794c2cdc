package images

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// agentQuery asks the ssh agent of $SSH_AUTH_SOCK for its identities
// (SSH_AGENTC_REQUEST_IDENTITIES) and prints the first one's comment.
const agentQuery = `import os, socket, struct
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["SSH_AUTH_SOCK"])
s.sendall(struct.pack(">IB", 1, 11))
n, = struct.unpack(">I", s.recv(4))
d = b""
while len(d) < n:
    d += s.recv(n - len(d))
assert d[0] == 12 and struct.unpack(">I", d[1:5])[0] == 1, d
bl, = struct.unpack(">I", d[5:9])
cl, = struct.unpack(">I", d[9 + bl:13 + bl])
print(d[13 + bl:13 + bl + cl].decode())
`

// fakeAgent serves the ssh agent protocol's identity list on a unix
// socket: one key whose comment is comment. It counts the requests.
func fakeAgent(t *testing.T, comment string) (string, *atomic.Int32) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var asked atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				var hdr [5]byte
				if _, err := io.ReadFull(conn, hdr[:]); err != nil || hdr[4] != 11 {
					return
				}
				asked.Add(1)
				blob := []byte("\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + strings.Repeat("k", 32))
				var body []byte
				body = append(body, 12)
				body = binary.BigEndian.AppendUint32(body, 1)
				body = binary.BigEndian.AppendUint32(body, uint32(len(blob)))
				body = append(body, blob...)
				body = binary.BigEndian.AppendUint32(body, uint32(len(comment)))
				body = append(body, comment...)
				_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
				_, _ = conn.Write(body)
			}()
		}
	}()
	return sock, &asked
}

// TestBuildSSHAgent: RUN --mount=type=ssh reaches the agent given with
// --ssh (default and named ids, the default target and SSH_AUTH_SOCK, a
// target of its own), and the socket lands in no layer, no history line
// and no cache key (another socket path rebuilds nothing); a required
// agent that is not given fails the step saying how to give it, and a
// key file is refused.
func TestBuildSSHAgent(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	tarball := filepath.Join(t.TempDir(), "debian.tar")
	if out, err := exec.Command("tar", "-C", fixture.DebianRootfs(t), "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	h.Must(t, "import", "-q", tarball, "ssh-base:1")
	agent, asked := fakeAgent(t, "sbx-test-key")
	ctx := buildContextDir(t, map[string]string{"query.py": agentQuery, "Dockerfile": `FROM ssh-base:1
COPY query.py /query.py
RUN --mount=type=ssh test "$SSH_AUTH_SOCK" = /run/buildkit/ssh_agent.0 && python3 /query.py > /default
RUN --mount=type=ssh,id=work,target=/agent.sock,required test "$SSH_AUTH_SOCK" = /agent.sock && python3 /query.py > /work
RUN --mount=type=ssh,id=absent test -z "$SSH_AUTH_SOCK" && test ! -e /run/buildkit/ssh_agent.0
`})
	h.Must(t, "build", "-t", "ssh-built:1", "--ssh", "default="+agent, "--ssh", "work="+agent, ctx)
	if n := asked.Load(); n != 2 {
		t.Fatalf("the agent was asked %d times, want 2", n)
	}
	out := h.Must(t, "run", "--rm", "ssh-built:1", "sh", "-c", "cat /default /work; test ! -e /run/buildkit/ssh_agent.0 && test ! -e /agent.sock && echo no-sockets")
	if out != "sbx-test-key\nsbx-test-key\nno-sockets\n" {
		t.Fatalf("the image built with an agent: %q", out)
	}
	if hist := h.Must(t, "history", "--no-trunc", "ssh-built:1"); strings.Contains(hist, agent) {
		t.Fatalf("the history holds the agent's socket:\n%s", hist)
	}
	other, _ := fakeAgent(t, "other-key")
	r := h.Sbx(t, "", "build", "-t", "ssh-built:1", "--ssh", "default="+other, "--ssh", "work="+other, ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "4" {
		t.Fatalf("another socket path rebuilt steps: %d\n%s", r.Code, r.Stderr)
	}
	r = h.Sbx(t, "", "build", "--no-cache", "--ssh", "default="+agent, ctx)
	if r.Code == 0 || !strings.Contains(r.Stderr, "line 4") || !strings.Contains(r.Stderr, "--ssh work=SOCKET") {
		t.Fatalf("a build without its required agent: %d %s", r.Code, r.Stderr)
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, []byte("not an agent"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.Sbx(t, "", "build", "--ssh", "default="+key, ctx); r.Code == 0 || !strings.Contains(r.Stderr, "not a socket") {
		t.Fatalf("a key file as --ssh: %d %s", r.Code, r.Stderr)
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 0 {
		t.Fatalf("builds left sandboxes: %v", ids)
	}
}
