package openhands

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sbxrun/sbx/server"
)

// Several app servers (or tenants) may share one Runtime API, each with a
// key of its own: a key sees, stops, pauses and resumes only the runtimes
// started with it (their session keys included), and a session id taken
// by another key is refused. A runtime records its key's tenant, a hash
// prefix of the key (never the key); records written before keys had
// tenants belong to the first key.

// tenant is one API key: its hash, compared in constant time, and the
// name runtimes record.
type tenant struct {
	hash [32]byte
	id   string
}

// tenantsOf returns the tenants of keys, in order.
func tenantsOf(keys []string) []tenant {
	out := make([]tenant, 0, len(keys))
	for _, k := range keys {
		h := sha256.Sum256([]byte(k))
		out = append(out, tenant{hash: h, id: hex.EncodeToString(h[:8])})
	}
	return out
}

type tenantKey struct{}

// tenantOf returns the tenant auth found for r's key.
func tenantOf(r *http.Request) string {
	id, _ := r.Context().Value(tenantKey{}).(string)
	return id
}

// matchKey returns the tenant whose key is key, or "". Every key is
// compared, in constant time, so neither the key's length nor which key
// matched shows in the time taken.
func (s *Service) matchKey(key string) string {
	got := sha256.Sum256([]byte(key))
	match := ""
	for _, t := range s.tenants {
		if subtle.ConstantTimeCompare(got[:], t.hash[:]) == 1 {
			match = t.id
		}
	}
	return match
}

// visible reports whether runtime id exists and belongs to tenant.
func (s *Service) visible(tenant, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.byID[id]
	return rt != nil && rt.Owner == tenant
}

// only returns the runtimes of list that belong to tenant.
func (s *Service) only(tenant string, list []Runtime) []Runtime {
	out := []Runtime{}
	for _, rt := range list {
		if s.visible(tenant, rt.RuntimeID) {
			out = append(out, rt)
		}
	}
	return out
}

// stripCredentials removes sbx's own credentials from a request the data
// plane forwards into a sandbox (whose code is hostile): the control
// plane's X-API-Key, an Authorization or Proxy-Authorization carrying one
// of the API keys or the sbx server's token, and cookies whose value is
// one of them. The Agent Server's own X-Session-API-Key passes.
func (s *Service) stripCredentials(h http.Header) {
	h.Del("X-API-Key")
	secret := func(v string) bool {
		v = strings.TrimSpace(v)
		if scheme, rest, ok := strings.Cut(v, " "); ok && (strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Token")) {
			v = strings.TrimSpace(rest)
		}
		if v == "" {
			return false
		}
		if s.matchKey(v) != "" {
			return true
		}
		for _, t := range s.cfg.ServerTokens {
			if t != "" && subtle.ConstantTimeCompare([]byte(v), []byte(t)) == 1 {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"Authorization", "Proxy-Authorization"} {
		for _, v := range h.Values(name) {
			if secret(v) {
				h.Del(name)
				break
			}
		}
	}
	var kept []string
	for _, line := range h.Values("Cookie") {
		for _, c := range strings.Split(line, ";") {
			_, v, _ := strings.Cut(c, "=")
			if !secret(strings.Trim(strings.TrimSpace(v), `"`)) {
				kept = append(kept, strings.TrimSpace(c))
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// ReadKeys reads the Runtime API's keys from path: one per line (empty
// lines and lines starting with # are skipped), each at least
// server.MinTokenLength characters.
func ReadKeys(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the key file: %w", err)
	}
	var keys []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) < server.MinTokenLength {
			return nil, fmt.Errorf("the key on line %d of %s has %d characters: use at least %d (e.g. openssl rand -hex 32)", i+1, path, len(line), server.MinTokenLength)
		}
		keys = append(keys, line)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key", path)
	}
	return keys, nil
}

// withTenant returns r's context carrying tenant.
func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}
