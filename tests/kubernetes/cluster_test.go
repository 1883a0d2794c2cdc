//go:build kubernetes

package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sbxrun/sbx/tests/fixture"
)

// nodeLink and nodeIP give the kubelet an address of its own that is not
// loopback (which it refuses as a node IP) and not the host's (which would
// expose its port): a /32 on one end of a veth pair (this kernel has no
// dummy links), local to this machine.
const (
	nodeLink = "sbxk8s0"
	nodeIP   = "10.250.254.1"
)

// cgroupRoot is the kubelet's cgroup root (cgroupRoot), in every hierarchy:
// the cluster's pods live below it, never under the host's /kubepods.
const cgroupRoot = "sbx-k8s-test"

// Images imported into containerd; nothing is pulled.
const (
	busyboxImage = "sbx.test/busybox:1"
	pauseImage   = "sbx.test/pause:1"
)

// kernelTunables are the sysctls the kubelet sets at start (it cannot be
// told not to without refusing to start on other values); the test puts
// the host's values back.
var kernelTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// cluster is a one-node Kubernetes on loopback: etcd, kube-apiserver,
// kube-scheduler, containerd with the runtimes runc and sbx, a kubelet.
type cluster struct {
	t          *testing.T
	dir        string
	bin        string // the directory scripts/k8s-bin.sh prints
	kubeconfig string
	api        string // https://127.0.0.1:port
	token      string
	sock       string // containerd's socket
	sbxRoot    string // sbx-runc's --root for containerd's k8s.io namespace
	http       *http.Client
	procs      []*exec.Cmd
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start runs a component with its output in dir/<name>.log, stopped (TERM,
// then KILL) in reverse order at cleanup.
func (c *cluster) start(name string, env []string, bin string, args ...string) {
	c.t.Helper()
	log, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.procs = append(c.procs, cmd)
	c.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
		if c.t.Failed() {
			data, _ := os.ReadFile(log.Name())
			if len(data) > 6000 {
				data = data[len(data)-6000:]
			}
			c.t.Logf("%s log (tail):\n%s", name, data)
		}
	})
}

// waitFor polls cond every 50 ms until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
	}
}

// startCluster starts everything and registers its removal. It checks
// for leftovers (processes, mounts, cgroups) at the end.
func startCluster(t *testing.T, bin, sbx string) *cluster {
	dir, err := os.MkdirTemp("", "sbx-k8s-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, bin: bin}
	saved := map[string]string{}
	for _, k := range kernelTunables {
		if v, err := os.ReadFile("/proc/sys/" + k); err == nil {
			saved[k] = string(v)
		}
	}
	t.Cleanup(func() { c.cleanup(saved) })

	// Credentials: a static admin token, the service-account signing key.
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	c.token = hex.EncodeToString(tok)
	write(t, filepath.Join(dir, "tokens.csv"), c.token+`,admin,admin,"system:masters"`+"\n")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	write(t, filepath.Join(dir, "sa.key"), string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
	write(t, filepath.Join(dir, "sa.pub"), string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))

	etcdPort, peerPort, apiPort, kubeletPort := freePort(t), freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	c.start("etcd", nil, filepath.Join(bin, "etcd"), "--name", "e", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "e="+peerURL,
		"--log-level", "warn")
	c.api = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.start("kube-apiserver", nil, filepath.Join(bin, "kube-apiserver"), "--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
		"--cert-dir", filepath.Join(dir, "apiserver"), "--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "AlwaysAllow", "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.254.0.0/24", "--disable-admission-plugins", "ServiceAccount",
		"--kubelet-preferred-address-types", "InternalIP", "--v", "1")
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the apiserver's own self-signed certificate on loopback
	waitFor(t, "kube-apiserver ready", 90*time.Second, func() bool {
		code, _ := c.request("GET", "/readyz", nil)
		return code == 200
	})
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	write(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, c.api, c.token))
	c.start("kube-scheduler", nil, filepath.Join(bin, "kube-scheduler"), "--kubeconfig", c.kubeconfig,
		"--leader-elect=false", "--secure-port", "0", "--v", "3")

	c.startContainerd(sbx)
	c.importImages()

	for _, args := range [][]string{{"link", "add", nodeLink, "type", "veth", "peer", "name", nodeLink + "p"}, {"addr", "add", nodeIP + "/32", "dev", nodeLink}, {"link", "set", nodeLink + "p", "up"}, {"link", "set", nodeLink, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	// The kubelet wants its cgroup root to exist in every hierarchy.
	makeCgroupRoot(t)
	// The kubelet: cgroupfs under its own root, kept off the host's
	// /var/lib/kubelet and /var/log/pods, not starting on swap or cgroup v1
	// refusals, with no eviction to speak of.
	kcfg := filepath.Join(dir, "kubelet.yaml")
	write(t, kcfg, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "10Mi"}
serializeImagePulls: false
makeIPTablesUtilChains: false
oomScoreAdj: 0
resolvConf: /etc/resolv.conf
`, cgroupRoot, nodeIP, kubeletPort, c.sock, filepath.Join(dir, "pod-logs")))
	c.start("kubelet", nil, filepath.Join(bin, "kubelet"), "--config", kcfg, "--kubeconfig", c.kubeconfig,
		"--root-dir", filepath.Join(dir, "kubelet"), "--hostname-override", "sbx-k8s-node", "--node-ip", nodeIP, "--v", "1")
	waitFor(t, "node registered", 90*time.Second, func() bool {
		code, _ := c.request("GET", "/api/v1/nodes/sbx-k8s-node", nil)
		return code == 200
	})
	c.kubectl("apply", "-f", "-").stdin(`apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: sbx}
handler: sbx
`).must(t)
	return c
}

// startContainerd starts Debian's containerd with the CRI plugin, the
// runtimes runc (the default) and sbx (runc's shim with sbx-runc), and no
// CNI configuration: the test pods use the host's network.
func (c *cluster) startContainerd(sbx string) {
	t := c.t
	link := filepath.Join(c.dir, "sbx-runc")
	if err := os.Symlink(sbx, link); err != nil {
		t.Fatal(err)
	}
	c.sock = filepath.Join(c.dir, "containerd.sock")
	sbxRoot := filepath.Join(c.dir, "sbx-runc-root")
	c.sbxRoot = filepath.Join(sbxRoot, "k8s.io")
	rt := `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s.options]
    SystemdCgroup = false
    Root = %q
`
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
`, filepath.Join(c.dir, "containerd-root"), filepath.Join(c.dir, "containerd-state"), c.sock, c.sock+".ttrpc",
		pauseImage, filepath.Join(c.dir, "cni"))
	conf += fmt.Sprintf(rt, "runc", "runc", filepath.Join(c.dir, "runc-root"))
	conf += fmt.Sprintf(rt, "sbx", "sbx", sbxRoot) + fmt.Sprintf("    BinaryName = %q\n", link)
	path := filepath.Join(c.dir, "containerd.toml")
	write(t, path, conf)
	c.start("containerd", nil, "containerd", "--config", path)
	waitFor(t, "containerd answers", 30*time.Second, func() bool {
		return exec.Command("ctr", "--address", c.sock, "version").Run() == nil
	})
}

// importImages imports busybox and a pause image made from it into
// containerd's k8s.io namespace.
func (c *cluster) importImages() {
	t := c.t
	bb := fixture.BusyboxImage(t)
	cfg, err := bb.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Cmd = []string{"sh"}
	busybox, err := mutate.ConfigFile(bb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := cfg.DeepCopy()
	pcfg.Config.Cmd = nil
	pcfg.Config.Entrypoint = []string{"sleep", "2147483647"}
	pause, err := mutate.ConfigFile(bb, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[name.Reference]v1.Image{}
	for ref, img := range map[string]v1.Image{busyboxImage: busybox, pauseImage: pause} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		refs[tag] = img
	}
	archive := filepath.Join(c.dir, "images.tar")
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ctr", "--address", c.sock, "--namespace", "k8s.io", "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("import images: %v: %s", err, out)
	}
}

// request sends one API request with the admin token; it returns the
// status code and body.
func (c *cluster) request(method, path string, body []byte) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.api+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, data
}

// getJSON GETs path and decodes it; ok is false on any error.
func (c *cluster) getJSON(path string, v any) bool {
	code, data := c.request("GET", path, nil)
	return code == 200 && json.Unmarshal(data, v) == nil
}

// kubectlCmd is one kubectl run.
type kubectlCmd struct {
	cmd *exec.Cmd
}

func (c *cluster) kubectl(args ...string) *kubectlCmd {
	cmd := exec.Command(filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	return &kubectlCmd{cmd}
}

func (k *kubectlCmd) stdin(s string) *kubectlCmd {
	k.cmd.Stdin = strings.NewReader(s)
	return k
}

// run returns stdout, stderr and the exit code, within 60 s.
func (k *kubectlCmd) run() (string, string, int) {
	var out, errb bytes.Buffer
	k.cmd.Stdout, k.cmd.Stderr = &out, &errb
	if err := k.cmd.Start(); err != nil {
		return "", err.Error(), -1
	}
	timer := time.AfterFunc(60*time.Second, func() { _ = k.cmd.Process.Kill() })
	defer timer.Stop()
	_ = k.cmd.Wait()
	return out.String(), errb.String(), k.cmd.ProcessState.ExitCode()
}

// must runs and fails the test unless kubectl exits 0; it returns stdout.
func (k *kubectlCmd) must(t *testing.T) string {
	t.Helper()
	out, errs, code := k.run()
	if code != 0 {
		t.Fatalf("kubectl %v: exit %d: %s%s", k.cmd.Args[3:], code, out, errs)
	}
	return out
}

// cleanup stops nothing itself (each process has its own cleanup, run
// before this one), then removes what the cluster left on the host: the
// containers' mounts and cgroups, its directories, and the kernel tunables.
func (c *cluster) cleanup(saved map[string]string) {
	t := c.t
	for k, v := range saved {
		_ = os.WriteFile("/proc/sys/"+k, []byte(v), 0)
	}
	_ = exec.Command("ip", "link", "del", nodeLink).Run()
	// Anything containerd's shims still run (a failed test) dies with its cgroup.
	killCgroup(cgroupRoot)
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	var below []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], c.dir) {
			below = append(below, f[4])
		}
	}
	var leaked []string
	for _, m := range below {
		if m != filepath.Join(c.dir, "kubelet") { // the kubelet binds its root dir onto itself
			leaked = append(leaked, m)
		}
	}
	for i := len(below) - 1; i >= 0; i-- {
		if err := syscall.Unmount(below[i], syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", below[i], err)
		}
	}
	if len(leaked) > 0 && !t.Failed() {
		t.Errorf("mounts left below %s after the cluster stopped: %v", c.dir, leaked)
	}
	if err := removeCgroups(cgroupRoot); err != nil {
		t.Errorf("cgroups: %v", err)
	}
	_ = os.RemoveAll(c.dir)
	for _, d := range []string{"/run/containerd/runc", "/run/containerd/fifo", "/run/containerd/s", "/run/containerd"} {
		_ = os.Remove(d) // only when empty
	}
}

// cgroupDirs returns every hierarchy's directory of the relative cgroup path.
func cgroupDirs(rel string) []string {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", rel))
	if st, err := os.Stat(filepath.Join("/sys/fs/cgroup", rel)); err == nil && st.IsDir() {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", rel))
	}
	return dirs
}

// killCgroup SIGKILLs every process below the cgroup path, in every hierarchy.
func killCgroup(rel string) {
	for _, d := range cgroupDirs(rel) {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.Name() == "cgroup.procs" {
				data, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(data)) {
					var pid int
					if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the cgroup path and everything below it, deepest
// first, in every hierarchy.
func removeCgroups(rel string) error {
	var firstErr error
	for _, d := range cgroupDirs(rel) {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 50 {
				if err = os.Remove(dirs[i]); err == nil || os.IsNotExist(err) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// makeCgroupRoot creates cgroupRoot in every mounted hierarchy, with the
// root's cpus and memory nodes in the cpuset one.
func makeCgroupRoot(t *testing.T) {
	t.Helper()
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		mounts = []string{"/sys/fs/cgroup"} // v2
	}
	for _, m := range mounts {
		if st, err := os.Lstat(m); err != nil || !st.IsDir() {
			continue // cpu and cpuacct are symlinks to cpu,cpuacct
		}
		d := filepath.Join(m, cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("create the kubelet's cgroup root: %v", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil && filepath.Base(m) == "cpuset" {
				if err := os.WriteFile(filepath.Join(d, f), v, 0); err != nil {
					t.Fatalf("set %s of the kubelet's cgroup root: %v", f, err)
				}
			}
		}
	}
}
