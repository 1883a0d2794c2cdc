package dockerargs

import (
	"testing"

	"github.com/spf13/pflag"
)

// The registered flags fill the fields Options reads, under docker's
// names and shorthands.
func TestRegisteredFlagsFillTheFields(t *testing.T) {
	var r RunFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	r.Register(fs)
	err := fs.Parse([]string{"-d", "--rm", "--name", "web", "-v", "/a:/b", "--tmpfs", "/t", "-l", "k=v", "-m", "64m",
		"-e", "A=1", "-w", "/w", "-u", "1:1", "-p", "80:80", "--pull", "never", "--entrypoint", "sh", "-i", "-t", "--stats"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Detach || !r.Rm || r.Name != "web" || r.Volumes[0] != "/a:/b" || r.Tmpfs[0] != "/t" || r.Labels[0] != "k=v" ||
		r.Memory != "64m" || r.Env[0] != "A=1" || r.Workdir != "/w" || r.User != "1:1" || r.Publish[0] != "80:80" ||
		r.Pull != "never" || r.Entrypoint != "sh" || !r.Interactive || !r.Tty || !r.Stats || r.Seccomp != "default" || r.Network != "none" {
		t.Fatalf("run flags: %+v", r)
	}

	var c CreateFlags
	fs = pflag.NewFlagSet("create", pflag.ContinueOnError)
	c.Register(fs)
	if err := fs.Parse([]string{"--name", "n", "--ttl", "1m", "--idle-timeout", "2m", "-v", "/x:/y", "--pull", "always"}); err != nil {
		t.Fatal(err)
	}
	if c.Name != "n" || c.TTL.Minutes() != 1 || c.IdleTimeout.Minutes() != 2 || c.Volumes[0] != "/x:/y" || c.Pull != "always" {
		t.Fatalf("create flags: %+v", c)
	}
	fs = pflag.NewFlagSet("pool create", pflag.ContinueOnError)
	(&CreateFlags{}).RegisterStart(fs)
	if fs.Lookup("name") != nil || fs.Lookup("volume") == nil || fs.Lookup("pull") == nil {
		t.Fatal("RegisterStart: a pool member takes mounts and the pull policy, not a name")
	}

	var e ExecFlags
	fs = pflag.NewFlagSet("exec", pflag.ContinueOnError)
	e.Register(fs)
	if err := fs.Parse([]string{"-d", "-e", "K=V", "-u", "0", "--timeout", "3s"}); err != nil || !e.Detach || e.Env[0] != "K=V" || e.User != "0" || e.Timeout.Seconds() != 3 {
		t.Fatalf("exec flags: %v %+v", err, e)
	}

	var p PsFlags
	fs = pflag.NewFlagSet("ps", pflag.ContinueOnError)
	p.Register(fs)
	if err := fs.Parse([]string{"-a", "-q", "--no-trunc", "-n", "2", "-f", "status=exited"}); err != nil || !p.All || !p.Quiet || !p.NoTrunc || p.Last != 2 || p.Format != "table" || p.Filters[0] != "status=exited" {
		t.Fatalf("ps flags: %v %+v", err, p)
	}
}
