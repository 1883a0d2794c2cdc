package inspect

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/internal/privatefile"
)

// PlaceholderTag starts the random part of every placeholder.
const PlaceholderTag = "sbx-ph-"

// placeholderRE finds placeholders of any sandbox in a request.
var placeholderRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(PlaceholderTag + `[a-z2-7]{32}`) })

// Secret is one secret of a sandbox: the sandbox holds Placeholder in
// the environment variable Name; the proxy sends Value in its place to
// the hosts the policy binds Name to (egress.SecretBinding), and nowhere
// else.
type Secret struct {
	Name        string `json:"name"`
	Placeholder string `json:"placeholder"`
	Value       string `json:"value"`
}

// SecretsFile is the file of a sandbox's host-side egress state holding
// its secrets (mode 0600).
const SecretsFile = "secrets.json"

// NewPlaceholder returns prefix + "sbx-ph-" + 32 random lower-case base32
// characters (160 bits).
func NewPlaceholder(prefix string) (string, error) {
	if strings.ContainsAny(prefix, " \t\r\n=\x00") || len(prefix) > 64 {
		return "", fmt.Errorf("secret prefix %q: use up to 64 characters without spaces or '='", prefix)
	}
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + PlaceholderTag + strings.ToLower(base32.StdEncoding.EncodeToString(b)), nil
}

// SaveSecrets writes secrets into dir (host-side, never seen by the
// sandbox) with mode 0600.
func SaveSecrets(dir string, secrets []Secret) error {
	data, err := json.Marshal(secrets)
	if err != nil {
		return err
	}
	return privatefile.Write(filepath.Join(dir, SecretsFile), data)
}

// LoadSecrets reads the secrets SaveSecrets wrote in dir; no file means
// no secrets.
func LoadSecrets(dir string) ([]Secret, error) {
	data, err := privatefile.Read(filepath.Join(dir, SecretsFile), 4<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the sandbox's secrets: %w", err)
	}
	var s []Secret
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read the sandbox's secrets: %w", err)
	}
	return s, nil
}

// tag is the placeholder without the user's prefix: what placeholderRE
// finds.
func (s Secret) tag() string {
	if i := strings.Index(s.Placeholder, PlaceholderTag); i >= 0 {
		return s.Placeholder[i:]
	}
	return s.Placeholder
}

// errForeignPlaceholder: a request carries a placeholder that is not one
// of a secret bound to its host.
type errForeignPlaceholder struct{ name string }

func (e errForeignPlaceholder) Error() string {
	if e.name == "" {
		return "the request carries an unknown secret placeholder"
	}
	return "the request carries the placeholder of secret " + e.name + ", which is not bound to this host"
}

// substitute replaces, in the headers (Basic credentials decoded too) and
// the query of r, the placeholders of the secrets bound to r's host (the
// bindings, from the live policy) by their values. A placeholder of any
// other secret, or of no secret of this sandbox, is refused. When send is
// false (plain HTTP) no value is put in and every placeholder is refused.
func substitute(r *http.Request, secrets []Secret, bound []egress.SecretBinding, send bool) error {
	isBound := func(name string) bool {
		return slices.ContainsFunc(bound, func(b egress.SecretBinding) bool { return b.Name == name })
	}
	byPH := make(map[string]Secret, len(secrets))
	for _, s := range secrets {
		byPH[s.tag()] = s
	}
	used := map[string]bool{}
	check := func(text string) error {
		for _, ph := range placeholderRE().FindAllString(text, -1) {
			s, ok := byPH[ph]
			if !ok {
				return errForeignPlaceholder{}
			}
			if !send || !isBound(s.Name) {
				return errForeignPlaceholder{s.Name}
			}
			used[s.Name] = true
		}
		return nil
	}
	replace := func(text string, enc func(string) string) string {
		for _, s := range secrets {
			if used[s.Name] {
				// With its prefix, or without it if the client dropped it.
				text = strings.ReplaceAll(text, s.Placeholder, enc(s.Value))
				text = strings.ReplaceAll(text, s.tag(), enc(s.Value))
			}
		}
		return text
	}
	plain := func(v string) string { return v }
	if err := check(r.URL.RawQuery + " " + r.URL.RawPath + " " + r.URL.Path); err != nil {
		return err
	}
	for k, vs := range r.Header {
		for i, v := range vs {
			if err := check(v); err != nil {
				return err
			}
			if dec, ok := basicCredentials(k, v); ok {
				if err := check(dec); err != nil {
					return err
				}
				if strings.Contains(dec, PlaceholderTag) {
					vs[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(replace(dec, plain)))
					continue
				}
			}
			vs[i] = replace(v, plain)
		}
	}
	r.URL.RawQuery = replace(r.URL.RawQuery, url.QueryEscape)
	return nil
}

// basicCredentials decodes the user:password of a Basic Authorization
// (or Proxy-Authorization) header value.
func basicCredentials(key, v string) (string, bool) {
	if key != "Authorization" && key != "Proxy-Authorization" {
		return "", false
	}
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(b), true
}
