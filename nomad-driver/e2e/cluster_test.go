package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/hashicorp/nomad/api"
)

// cluster is a real Nomad cluster on loopback: one server and some clients,
// each client with its own name, data dir, ports, dynamic port range, sbx
// root and run root, and the driver plugin built from this checkout. Cloud
// and Consul/Vault fingerprinters are off, so nothing contacts a metadata
// address, and the update check is off. Everything it starts runs from
// binaries under its own directory, so teardown finds its processes by
// their executable and leaves nothing of its own behind.
type cluster struct {
	t       testing.TB
	dir     string
	nomad   string // the Nomad binary, linked under dir
	plugins string // the client's plugin_dir
	sbx     string // the sbx binary, linked under dir
	server  *agent
	clients []*agent
	api     *api.Client
	// pluginConfig is HCL added to every client's plugin config block,
	// clientConfig to every client's client block.
	pluginConfig, clientConfig string
	// nomadCgroups are the cgroups Nomad clients create (per controller);
	// teardown removes those that did not exist before.
	nomadCgroups []string
	// allocIDs are the cluster's allocations, learnt at teardown.
	allocIDs []string
	// netns names the namespace that plays the host for bridge
	// networking, if any (see clusterOptions.netns).
	netns string
}

// agent is one Nomad agent process.
type agent struct {
	name    string
	dir     string
	config  string
	logPath string
	http    int
	rpc     int
	serf    int
	// Client only: its sbx state and dynamic port range.
	sbxRoot, sbxRunRoot string
	minPort, maxPort    int
	// env is added to the agent's environment (and so its plugins').
	env []string
	// cgroupParent is the client's sbx cgroup parent.
	cgroupParent string
	cmd          *exec.Cmd
	done         chan struct{}
	nodeID       string
}

// clusterOptions tune a cluster.
type clusterOptions struct {
	clients int
	// pluginConfig is HCL inside the plugin's config block on every client
	// (root and run_root are set per client).
	pluginConfig string
	// clientConfig is HCL inside every client's client block.
	clientConfig string
	// netns makes a network namespace that plays the host for the
	// sandboxes' bridge networking (bridge, NAT, published ports), so that
	// the test changes nothing in the machine's own network.
	netns bool
}

// startCluster starts a server and opts.clients clients and waits until
// every client is ready with a healthy sbx driver. Teardown runs when the
// test ends: it purges every job, stops the agents and fails the test for
// anything left behind.
func startCluster(t testing.TB, opts clusterOptions) *cluster {
	t.Helper()
	start := time.Now()
	if opts.clients == 0 {
		opts.clients = 2
	}
	dir, err := os.MkdirTemp("", "sbx-nomad-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, plugins: filepath.Join(dir, "plugins"), pluginConfig: opts.pluginConfig, clientConfig: opts.clientConfig}
	c.nomadCgroups = missingNomadCgroups()
	t.Cleanup(c.teardown)
	if opts.netns {
		c.netns = fmt.Sprintf("sbx-e2e-%d", os.Getpid())
		for _, args := range [][]string{{"netns", "add", c.netns}, {"-n", c.netns, "link", "set", "lo", "up"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v: %s", args, err, out)
			}
		}
	}
	if err := os.MkdirAll(c.plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	c.nomad = filepath.Join(dir, "nomad")
	c.sbx = filepath.Join(dir, "sbx")
	for src, dst := range map[string]string{nomadBin: c.nomad, sbxBin: c.sbx, pluginBin: filepath.Join(c.plugins, "nomad-driver-sbx")} {
		if err := linkOrCopy(src, dst); err != nil {
			t.Fatal(err)
		}
	}

	c.server = c.newAgent("server")
	c.writeConfig(c.server, serverConfig)
	c.start(c.server)
	c.api, err = api.NewClient(&api.Config{Address: fmt.Sprintf("http://127.0.0.1:%d", c.server.http)})
	if err != nil {
		t.Fatal(err)
	}
	base := 20000 + (os.Getpid()%55)*200
	for i := range opts.clients {
		a := c.newAgent(fmt.Sprintf("client%d", i+1))
		a.sbxRoot = filepath.Join(a.dir, "sbx")
		// The run root holds sockets: keep it short.
		a.sbxRunRoot = fmt.Sprintf("/run/sbx-e2e-%d-%d", os.Getpid(), len(c.clients)+1)
		a.minPort, a.maxPort = base+i*100, base+i*100+99
		// Sandboxes of each client live under a cgroup parent of their
		// own, so leftovers are counted per client.
		a.cgroupParent = fmt.Sprintf("sbx-e2e-%d-%d", os.Getpid(), i+1)
		a.env = []string{"SBX_CGROUP_PARENT=" + a.cgroupParent}
		c.writeConfig(a, clientConfig)
		c.clients = append(c.clients, a)
		c.start(a)
	}
	c.waitReady(90 * time.Second)
	t.Logf("cluster of %d clients ready in %s", len(c.clients), time.Since(start).Round(time.Millisecond))
	return c
}

// newAgent names an agent and picks its ports.
func (c *cluster) newAgent(role string) *agent {
	a := &agent{
		name: fmt.Sprintf("sbx-e2e-%d-%s", os.Getpid(), role),
		dir:  filepath.Join(c.dir, role),
		http: freePort(c.t), rpc: freePort(c.t), serf: freePort(c.t),
	}
	a.config = filepath.Join(c.dir, role+".hcl")
	a.logPath = filepath.Join(c.dir, role+".log")
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return a
}

const commonConfig = `name = "{{.A.Name}}"
data_dir = "{{.A.Dir}}"
bind_addr = "127.0.0.1"
log_level = "DEBUG"
disable_update_check = true
ports {
  http = {{.A.HTTP}}
  rpc  = {{.A.RPC}}
  serf = {{.A.Serf}}
}
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
consul {
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}
ui {
  enabled = false
}
`

var serverConfig = commonConfig + `server {
  enabled          = true
  bootstrap_expect = 1
}
client {
  enabled = false
}
`

var clientConfig = commonConfig + `server {
  enabled = false
}
plugin_dir = "{{.Plugins}}"
client {
  enabled           = true
  servers           = ["127.0.0.1:{{.ServerRPC}}"]
  network_interface = "lo"
  min_dynamic_port  = {{.A.MinPort}}
  max_dynamic_port  = {{.A.MaxPort}}
  # Nomad collects ended allocations at once when the host's disk is over
  # 80% full, and their logs with them: the tests read those logs.
  gc_disk_usage_threshold  = 100
  gc_inode_usage_threshold = 100
  # Cloud metadata and Consul/Vault fingerprinters would reach for
  # addresses off this machine or services that are not here.
  options = {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean,consul,vault"
  }
{{.ClientConfig}}
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
plugin "nomad-driver-sbx" {
  config {
    root       = "{{.A.SbxRoot}}"
    run_root   = "{{.A.SbxRunRoot}}"
{{if .NetNS}}    host_netns = "/run/netns/{{.NetNS}}"
{{end}}    gc_interval = "1m"
{{.PluginConfig}}
  }
}
`

// writeConfig renders an agent's configuration file.
func (c *cluster) writeConfig(a *agent, text string) {
	tmpl := template.Must(template.New("cfg").Parse(text))
	var b bytes.Buffer
	err := tmpl.Execute(&b, map[string]any{
		"A": map[string]any{
			"Name": a.name, "Dir": a.dir, "HTTP": a.http, "RPC": a.rpc, "Serf": a.serf,
			"MinPort": a.minPort, "MaxPort": a.maxPort, "SbxRoot": a.sbxRoot, "SbxRunRoot": a.sbxRunRoot,
		},
		"Plugins":      c.plugins,
		"ServerRPC":    c.server.rpc,
		"NetNS":        c.netns,
		"PluginConfig": c.pluginConfig,
		"ClientConfig": c.clientConfig,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(a.config, b.Bytes(), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// start runs an agent; its output is appended to its log file.
func (c *cluster) start(a *agent) {
	c.t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.nomad, "agent", "-config", a.config)
	cmd.Env = append(os.Environ(), a.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The agent dies with the test process: nothing outlives a test
	// binary killed by its timeout (teardown handles the rest).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("start %s: %v", a.name, err)
	}
	a.cmd, a.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(a.done)
	}()
}

// running reports whether the agent's process is alive.
func (a *agent) running() bool {
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// stop interrupts an agent and waits for it to exit, killing it after
// timeout. A client's tasks keep running (Nomad's default), as on a real
// node.
func (c *cluster) stop(a *agent, timeout time.Duration) {
	if !a.running() {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-a.done:
	case <-time.After(timeout):
		c.t.Errorf("%s did not exit %s after SIGINT; killing it", a.name, timeout)
		c.kill(a)
	}
}

// kill SIGKILLs an agent (its plugins and log collectors live on, as after
// a crash) and waits for it to be gone.
func (c *cluster) kill(a *agent) {
	if !a.running() {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

// waitReady waits until the server has a leader and every client is ready
// and eligible with a healthy sbx driver, and learns the clients' node IDs.
func (c *cluster) waitReady(timeout time.Duration) {
	c.t.Helper()
	c.eventually(timeout, "clients ready with a healthy sbx driver", func() error {
		nodes, _, err := c.api.Nodes().List(nil)
		if err != nil {
			return err
		}
		byName := map[string]*api.NodeListStub{}
		for _, n := range nodes {
			byName[n.Name] = n
		}
		for _, a := range c.clients {
			n := byName[a.name]
			if n == nil {
				return fmt.Errorf("%s has not registered", a.name)
			}
			if n.Status != api.NodeStatusReady {
				return fmt.Errorf("%s is %s", a.name, n.Status)
			}
			d := n.Drivers["sbx"]
			if d == nil || !d.Detected || !d.Healthy {
				return fmt.Errorf("%s: sbx driver not healthy: %+v", a.name, d)
			}
			a.nodeID = n.ID
		}
		return nil
	})
}

// eventually retries f every 250 ms until it succeeds or timeout passes,
// then fails the test with f's last error and the agents' log tails.
func (c *cluster) eventually(timeout time.Duration, what string, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.dumpLogs()
			c.t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dumpLogs logs the tail of every agent's log.
func (c *cluster) dumpLogs() {
	for _, a := range append([]*agent{c.server}, c.clients...) {
		if a == nil {
			continue
		}
		b, _ := os.ReadFile(a.logPath)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		c.t.Logf("---- %s log (tail) ----\n%s", a.name, b)
	}
}

// nomadCLI runs the nomad CLI against the cluster, with stdin if given,
// and returns its combined output; ctx bounds it.
func (c *cluster) nomadCLI(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.nomad, args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("NOMAD_ADDR=http://127.0.0.1:%d", c.server.http))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runJob submits an HCL job with `nomad job run -detach` and returns its ID.
func (c *cluster) runJob(hcl string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := filepath.Join(c.dir, fmt.Sprintf("job-%d.nomad.hcl", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(hcl), 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, err := c.nomadCLI(ctx, "", "job", "run", "-detach", path)
	if err != nil {
		c.t.Fatalf("nomad job run: %v\n%s", err, out)
	}
	job, err := c.api.Jobs().ParseHCL(hcl, true)
	if err != nil {
		c.t.Fatal(err)
	}
	return *job.ID
}

// allocs returns a job's allocations.
func (c *cluster) allocs(jobID string) []*api.AllocationListStub {
	c.t.Helper()
	allocs, _, err := c.api.Jobs().Allocations(jobID, true, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return allocs
}

// waitRunning waits until the job has n allocations whose tasks all run,
// and returns them.
func (c *cluster) waitRunning(jobID string, n int, timeout time.Duration) []*api.AllocationListStub {
	c.t.Helper()
	var running []*api.AllocationListStub
	c.eventually(timeout, fmt.Sprintf("job %s: %d allocations running", jobID, n), func() error {
		running = running[:0]
		for _, a := range c.allocs(jobID) {
			if a.ClientStatus == api.AllocClientStatusRunning && allTasksRunning(a) {
				running = append(running, a)
			}
			if a.ClientStatus == api.AllocClientStatusFailed {
				return backoffFatal{fmt.Errorf("allocation %s failed: %s", a.ID, taskEvents(a))}
			}
		}
		if len(running) != n {
			return fmt.Errorf("%d of %d running", len(running), n)
		}
		return nil
	})
	return running
}

// backoffFatal is an error of a wait that will not get better; waits
// still report it at their deadline, with the logs.
type backoffFatal struct{ error }

func allTasksRunning(a *api.AllocationListStub) bool {
	if len(a.TaskStates) == 0 {
		return false
	}
	for _, ts := range a.TaskStates {
		if ts.State != "running" {
			return false
		}
	}
	return true
}

// taskEvents summarises the task events of an allocation.
func taskEvents(a *api.AllocationListStub) string {
	var b strings.Builder
	for name, ts := range a.TaskStates {
		fmt.Fprintf(&b, "[%s %s:", name, ts.State)
		for _, e := range ts.Events {
			fmt.Fprintf(&b, " %s(%s)", e.Type, e.DisplayMessage)
		}
		b.WriteString("] ")
	}
	return b.String()
}

// purgeAll stops and purges every job and waits until no allocation runs.
func (c *cluster) purgeAll(timeout time.Duration) error {
	jobs, _, err := c.api.Jobs().List(nil)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if _, _, err := c.api.Jobs().Deregister(j.ID, true, nil); err != nil {
			return fmt.Errorf("purge job %s: %w", j.ID, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var live []string
		allocs, _, err := c.api.Allocations().List(nil)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
				live = append(live, a.ID)
			}
		}
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("allocations still live %s after purging every job: %v", timeout, live)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// A purged job's allocations are collected by their clients: the task
	// is killed, then its directory (and Nomad's mounts in it) removed.
	for _, a := range c.clients {
		if !a.running() {
			continue
		}
		for {
			ents, err := os.ReadDir(filepath.Join(a.dir, "alloc"))
			if err != nil || len(ents) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s still has %d allocation directories %s after purging every job", a.name, len(ents), timeout)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return nil
}

// teardown purges the jobs, stops the agents and removes what they made,
// failing the test for whatever had to be removed by force.
func (c *cluster) teardown() {
	t := c.t
	start := time.Now()
	if c.server != nil && c.server.running() && c.api != nil {
		if allocs, _, err := c.api.Allocations().List(nil); err == nil {
			for _, a := range allocs {
				c.allocIDs = append(c.allocIDs, a.ID)
			}
		}
		if err := c.purgeAll(60 * time.Second); err != nil {
			t.Errorf("teardown: %v", err)
		}
		// Running clients remove their sandboxes as allocations stop.
		for _, a := range c.clients {
			if a.running() {
				c.waitNoSandboxes(a, 60*time.Second)
			}
		}
	}
	for _, a := range c.clients {
		c.stop(a, 30*time.Second)
	}
	if c.server != nil {
		c.stop(c.server, 30*time.Second)
	}
	for _, leak := range c.forceClean() {
		t.Errorf("teardown: left behind: %s", leak)
	}
	t.Logf("teardown took %s", time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		c.dumpLogs()
	}
	if err := os.RemoveAll(c.dir); err != nil {
		t.Errorf("teardown: %v", err)
	}
}

// waitNoSandboxes waits until a client's sbx root holds no sandbox.
func (c *cluster) waitNoSandboxes(a *agent, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		sbs, err := c.sandboxes(a)
		if err == nil && len(sbs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%s still has sandboxes %s after its allocations stopped: %v %v", a.name, timeout, sandboxIDs(sbs), err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// forceClean removes whatever the cluster left: its processes, sandboxes,
// mounts, cgroups and run roots. It returns what it had to remove.
func (c *cluster) forceClean() []string {
	var leaks []string
	for _, p := range processesUnder(c.dir) {
		leaks = append(leaks, fmt.Sprintf("process %d (%s)", p.pid, p.exe))
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	// Tasks of Nomad's own drivers run from their own root: find them by
	// their allocation's cgroup.
	for _, cg := range nomadAllocCgroups(c.allocIDs) {
		for _, pid := range killCgroup(cg) {
			leaks = append(leaks, fmt.Sprintf("process %d in %s", pid, cg))
		}
	}
	for _, a := range c.clients {
		sbs, err := c.sandboxes(a)
		if err != nil {
			leaks = append(leaks, fmt.Sprintf("%s: list sandboxes: %v", a.name, err))
		}
		for _, sb := range sbs {
			leaks = append(leaks, fmt.Sprintf("%s: sandbox %s (%s)", a.name, sb.ID, sb.Status))
			if out, err := c.sbxCLI(a, "rm", "-f", sb.ID); err != nil {
				leaks = append(leaks, fmt.Sprintf("%s: sbx rm -f %s: %v: %s", a.name, sb.ID, err, out))
			}
		}
		if out, err := c.sbxCLI(a, "gc"); err != nil && a.sbxRoot != "" {
			if _, statErr := os.Stat(a.sbxRoot); statErr == nil {
				leaks = append(leaks, fmt.Sprintf("%s: sbx gc: %v: %s", a.name, err, out))
			}
		}
	}
	var roots []string
	roots = append(roots, c.dir)
	for _, a := range c.clients {
		roots = append(roots, a.sbxRunRoot)
	}
	for _, m := range mountsUnder(roots...) {
		leaks = append(leaks, "mount "+m)
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	leaks = append(leaks, removeCgroups(nomadAllocCgroups(c.allocIDs))...)
	removeCgroups(c.nomadCgroups)
	for _, a := range c.clients {
		for _, cg := range sandboxCgroups(a.cgroupParent) {
			leaks = append(leaks, fmt.Sprintf("%s: cgroup %s", a.name, cg))
			for _, pid := range killCgroup(cg) {
				leaks = append(leaks, fmt.Sprintf("%s: process %d in %s", a.name, pid, cg))
			}
			removeCgroups([]string{cg})
		}
		removeCgroups(parentCgroups(a.cgroupParent))
	}
	for _, a := range c.clients {
		_ = os.RemoveAll(a.sbxRunRoot)
	}
	if c.netns != "" {
		if out, err := exec.Command("ip", "netns", "del", c.netns).CombinedOutput(); err != nil {
			leaks = append(leaks, fmt.Sprintf("network namespace %s: %v: %s", c.netns, err, out))
		}
	}
	return leaks
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// linkOrCopy hard-links src to dst, or copies it across file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// errorf is fmt.Errorf, short for waits.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
