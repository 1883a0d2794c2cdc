package sandbox

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/egress/inspect"
	"github.com/sbxrun/sbx/egress/tlsca"
	"github.com/sbxrun/sbx/internal/privatefile"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
)

// trustPathsFile, in a sandbox's egress state, lists the in-sandbox paths
// the CA was written to, which commit leaves out.
const trustPathsFile = "trust-paths"

// egressStateDir is the host-side egress state directory of sandbox id.
func (h *Host) egressStateDir(id string) string {
	return egress.StateDir(filepath.Join(h.store.Root(), "network"), id)
}

// egressNames is the part of a sandbox's egress policy that needs the
// proxy (names, L7 rules, secret bindings, those of its Secrets
// included); nil when there is none.
func egressNames(o *sbx.Options) (*egress.Policy, error) {
	if o.Network != sbx.NetworkBridge {
		return nil, nil
	}
	a, err := parseNetwork(o, "")
	if err != nil {
		return nil, err
	}
	return a.Egress.Names, nil
}

// addSecretBindings binds the secrets of a create to their hosts in the
// egress policy of a, which must name those hosts; a secret without hosts
// must be bound by the policy already.
func addSecretBindings(a *netns.AttachOptions, secrets []sbx.Secret) error {
	if len(secrets) == 0 {
		return nil
	}
	p := a.Egress.Names
	if p == nil {
		return fmt.Errorf("secrets are swapped in by the egress proxy: name their hosts in --egress (e.g. --egress %s)", strings.Join(secrets[0].Hosts, ","))
	}
	for _, s := range secrets {
		if len(s.Hosts) == 0 {
			if !slices.ContainsFunc(p.Secrets, func(b egress.SecretBinding) bool { return b.Name == s.Name }) {
				return fmt.Errorf("secret %s names no hosts and the egress policy binds it to none; use --secret %s@HOST", s.Name, s.Name)
			}
			continue
		}
		p.Secrets = append(p.Secrets, egress.SecretBinding{Name: s.Name, Hosts: s.Hosts, Prefix: s.Prefix})
	}
	return p.Validate()
}

// inspectedHosts are the host patterns whose TLS the proxy terminates for
// p: hosts with L7 rules and the hosts of secrets.
func inspectedHosts(p *egress.Policy) []string {
	var hosts []string
	for _, h := range p.Hosts {
		if len(h.Rules) > 0 {
			hosts = append(hosts, h.Host)
		}
	}
	for _, s := range p.Secrets {
		hosts = append(hosts, s.Hosts...)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// needsEgressState reports whether a sandbox created with o gets a CA or
// secrets, and so an egress state directory.
func needsEgressState(o *sbx.Options) bool {
	p, err := egressNames(o)
	return err == nil && p != nil && len(inspectedHosts(p)) > 0
}

// writeEgressState creates the egress state of a new sandbox whose record
// plans it: the CA constrained to its inspected hosts and the secrets'
// values with fresh placeholders, all 0600 in a 0700 directory the
// sandbox never sees. secrets carry the values; sb's own have none.
func (h *Host) writeEgressState(sb *sbx.Sandbox, secrets []sbx.Secret) error {
	p, err := egressNames(&sb.Options)
	if err != nil || p == nil {
		return err
	}
	hosts := inspectedHosts(p)
	if len(hosts) == 0 {
		return nil
	}
	dir := h.egressStateDir(sb.ID)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("create egress state: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create egress state: %w", err)
	}
	life := tlsca.MaxLife
	if sb.Options.TTL > 0 {
		life = sb.Options.TTL + 24*time.Hour
	}
	ca, err := tlsca.New(sb.ID, hosts, life)
	if err != nil {
		return fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	if err := ca.Save(dir); err != nil {
		return err
	}
	values := map[string]string{}
	for _, s := range secrets {
		values[s.Name] = s.Value
	}
	var stored []inspect.Secret
	for _, b := range p.Secrets {
		v, ok := values[b.Name]
		if !ok || v == "" {
			return fmt.Errorf("%w: secret %s of the egress policy has no value: give it with --secret %s (from the environment or stdin)", sbx.ErrInvalid, b.Name, b.Name)
		}
		ph, err := inspect.NewPlaceholder(b.Prefix)
		if err != nil {
			return fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
		}
		stored = append(stored, inspect.Secret{Name: b.Name, Placeholder: ph, Value: v})
	}
	return inspect.SaveSecrets(dir, stored)
}

// addEgressTrust puts the sandbox's CA into its mounted root (before it
// starts) and the placeholders and CA variables into its environment.
// It is a no-op for a sandbox without egress state.
func (h *Host) addEgressTrust(sb *sbx.Sandbox, root string) error {
	dir := h.egressStateDir(sb.ID)
	if !slices.ContainsFunc(sb.Resources, func(r sbx.Resource) bool { return r.Kind == sbx.ResourceEgressState }) {
		return nil
	}
	ca, err := tlsca.Load(dir)
	if err != nil {
		return err
	}
	tc, err := rootfs.AddTrustedCA(root, ca.CertPEM())
	if err != nil {
		return fmt.Errorf("add the egress CA to the sandbox's trust stores: %w", err)
	}
	if err := privatefile.Write(filepath.Join(dir, trustPathsFile), []byte(strings.Join(tc.Written, "\n"))); err != nil {
		return err
	}
	secrets, err := inspect.LoadSecrets(dir)
	if err != nil {
		return err
	}
	env := tc.Env()
	for _, s := range secrets {
		env = append(env, s.Name+"="+s.Placeholder)
	}
	// The caller's own variables win (a different SSL_CERT_FILE, say).
	sb.Options.Env = sbx.MergeEnv(env, sb.Options.Env)
	return nil
}

// trustPaths are the paths (relative to the root, as commit sees them)
// the egress CA was written to in sandbox id.
func (h *Host) trustPaths(id string) map[string]bool {
	b, err := privatefile.Read(filepath.Join(h.egressStateDir(id), trustPathsFile), 1<<20)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, p := range strings.Split(string(b), "\n") {
		if p != "" {
			out[strings.TrimPrefix(p, "/")] = true
		}
	}
	return out
}

// removeEgressState deletes a sandbox's egress state directory.
func removeEgressState(dir string) error {
	if filepath.Base(filepath.Dir(dir)) != "egress" {
		return fmt.Errorf("egress state %s is not in an egress directory", dir)
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ownPaths is sbxOwnPath for sandbox id: also the files its egress CA
// was written to, which describe this sandbox, not its environment.
func (h *Host) ownPaths(id string) func(rel string) bool {
	trust := h.trustPaths(id)
	return func(rel string) bool { return sbxOwnPath(rel) || trust[rel] }
}

// egressRootsFile, in a root's network state directory, holds CA
// certificates (PEM) the egress proxy trusts for real hosts besides the
// system's: a company's CA, or a test's fake internet.
const egressRootsFile = "egress-roots.pem"

// newInspector is the Inspector of the egress daemon of the root whose
// network state is netStateDir.
func newInspector(netStateDir string) (*inspect.Inspector, error) {
	roots, err := egressRoots(netStateDir)
	if err != nil {
		return nil, err
	}
	return inspect.New(roots), nil
}

// egressRoots are the roots inspected connections verify real hosts
// against: the system's, plus egressRootsFile when there is one.
func egressRoots(netStateDir string) (*x509.CertPool, error) {
	b, err := os.ReadFile(filepath.Join(netStateDir, egressRootsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the egress proxy's extra roots: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(netStateDir, egressRootsFile))
	}
	return pool, nil
}
