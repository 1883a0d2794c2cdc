package serve

import (
	"os"
	"time"

	"github.com/spf13/pflag"
)

// Register adds sbx serve's flags (the --openhands-* ones included) to fs;
// Root and RunRoot are the caller's.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", "", "TCP address to listen on, e.g. 127.0.0.1:7070")
	fs.StringVar(&o.Unix, "unix", "", "unix socket to listen on (default <run-root>/sbx.sock without --listen)")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token clients must send")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate (PEM) for the TCP listener")
	fs.StringVar(&o.TLSKey, "tls-key", "", "TLS private key (PEM) for the TCP listener")
	fs.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "allow a TCP listener without a token (anyone who reaches it controls sandboxes)")
	fs.IntVar(&o.MaxSandboxes, "max-sandboxes", 0, "maximum number of sandboxes (0: no limit)")
	fs.StringVar(&o.MemoryBudget, "memory-budget", "", "maximum sum of the sandboxes' memory limits, e.g. 64g")
	fs.IntVar(&o.MaxConcurrentCreates, "max-concurrent-creates", 16, "creates in flight at once; more get HTTP 429")
	fs.StringVar(&o.MaxBody, "max-body-size", "1m", "maximum JSON request body")
	fs.StringVar(&o.MaxUpload, "max-upload-size", "1g", "maximum file or archive upload to a sandbox, and image archive upload (sbx import)")
	fs.StringVar(&o.MaxReply, "max-reply-size", "1g", "maximum reply taken from a sandbox's executor")
	fs.DurationVar(&o.ProxyTimeout, "proxy-timeout", time.Hour, "deadline of one call to a sandbox's executor")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	fs.DurationVar(&o.WatchInterval, "watch-interval", time.Second, "how often to look for changes made elsewhere and expired TTLs")
	fs.StringArrayVar(&o.AllowHostDirs, "allow-host-dir", nil, "host directory under which creates may name a rootfs or volumes (repeatable)")
	fs.BoolVar(&o.AllowHostNetwork, "allow-host-network", false, "let creates ask for the host's network")
	fs.BoolVar(&o.AllowPrivileged, "allow-privileged", false, "let creates add capabilities or choose another seccomp profile")
	fs.StringArrayVar(&o.InsecureRegistries, "insecure-registry", nil, "registry host[:port] to pull from over plain HTTP (repeatable; localhost and 127.0.0.1 always are)")
	fs.IntVar(&o.NetworkPool, "network-pool", 0, "prepared bridged network namespaces to keep waiting (filled in the background, drained at exit)")
	fs.StringVar(&o.Subnet, "subnet", os.Getenv("SBX_SUBNET"), "IPv4 subnet of the bridge, e.g. 10.77.0.0/16 (default $SBX_SUBNET, else 10.88.0.0/16 or the next free /16)")
	fs.StringVar(&o.ExecutorBinary, "executor-binary", "", "static executor binary the sandboxes run as \"BINARY executor\": sbx-executor or sbx (default: the sbx-executor embedded in sbx)")
	_ = fs.MarkHidden("executor-binary")
	o.OpenHands.Register(fs)
}
