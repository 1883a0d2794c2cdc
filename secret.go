package sbx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
)

// Secret is a value a sandbox uses without ever holding it: the sandbox's
// environment variable Name holds a random placeholder, and the egress
// proxy puts Value in its place on requests to Hosts over verified TLS
// (docs/network.md). The sandbox's record keeps Name, Hosts and Prefix,
// never Value.
type Secret struct {
	// Name is the environment variable that holds the placeholder.
	Name string `json:"name"`
	// Hosts are the host patterns the value may be sent to
	// ("api.example.com", "*.example.com", "**.example.com"); each must
	// be allowed by the egress policy. Empty: the bindings of the egress
	// policy file for Name.
	Hosts []string `json:"hosts,omitempty"`
	// Prefix starts the placeholder, for SDKs that check a key's format
	// ("sk-ant-").
	Prefix string `json:"prefix,omitempty"`
	// Value is the secret. It is only read at create; a sandbox's record
	// and every answer about it have it empty.
	Value string `json:"value,omitempty"`
}

// secretNameRE is an environment variable name. It and the other
// patterns of the package are compiled on first use, not at the start of
// every program that links the package (the executor, the CLI).
var secretNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// secretPrefixRE is an allowed placeholder prefix.
var secretPrefixRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{0,32}$`) })

// validate checks a secret of a create.
func (s Secret) validate() error {
	if !secretNameRE().MatchString(s.Name) {
		return fmt.Errorf("secret %q: the name must be an environment variable name", s.Name)
	}
	if s.Value == "" {
		return fmt.Errorf("secret %s has no value: set %s in the caller's environment, or give it on stdin", s.Name, s.Name)
	}
	if strings.ContainsAny(s.Value, "\x00\r\n") {
		return fmt.Errorf("secret %s: the value must not contain NUL or line breaks", s.Name)
	}
	if !secretPrefixRE().MatchString(s.Prefix) {
		return fmt.Errorf("secret %s: prefix %q: use at most 32 letters, digits, '-' or '_'", s.Name, s.Prefix)
	}
	for _, h := range s.Hosts {
		if h == "" || strings.ContainsAny(h, " /@,") {
			return fmt.Errorf("secret %s: host %q is not a host pattern", s.Name, h)
		}
	}
	return nil
}

// validateSecrets checks the secrets of a create: each valid, none twice,
// none also set in env.
func validateSecrets(secrets []Secret, env []string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		for _, s := range secrets {
			if s.Name == k {
				errs = append(errs, fmt.Errorf("%s is both a secret and an environment variable; give it once", k))
			}
		}
	}
	for _, s := range secrets {
		if err := s.validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("secret %s is given twice; list all its hosts in one", s.Name))
		}
		seen[s.Name] = true
	}
	return errs
}

// WithoutSecretValues returns secrets with every Value emptied (a copy),
// what a sandbox's record keeps.
func WithoutSecretValues(secrets []Secret) []Secret {
	if secrets == nil {
		return nil
	}
	out := make([]Secret, len(secrets))
	for i, s := range secrets {
		s.Hosts = append([]string(nil), s.Hosts...)
		s.Value = ""
		out[i] = s
	}
	return out
}

// ParseSecret parses the CLI's --secret NAME@HOST[,HOST...] (or
// PREFIX:NAME@HOST..., or NAME alone for a binding of the policy file).
// The value is never on the command line: it is getenv(NAME), or, when
// that is empty, the first line of stdin (nil stdin: an error).
func ParseSecret(spec string, getenv func(string) string, stdin io.Reader) (Secret, error) {
	namepart, hosts, _ := strings.Cut(spec, "@")
	var s Secret
	if p, n, ok := strings.Cut(namepart, ":"); ok {
		s.Prefix, s.Name = p, n
	} else {
		s.Name = namepart
	}
	if hosts != "" {
		s.Hosts = strings.Split(hosts, ",")
	}
	if strings.Contains(spec, "=") {
		return Secret{}, fmt.Errorf("--secret %q: values are never given on the command line; set %s in the environment or pipe it on stdin", spec, s.Name)
	}
	s.Value = getenv(s.Name)
	if s.Value == "" && stdin != nil {
		line, err := bufio.NewReader(io.LimitReader(stdin, 64<<10)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return Secret{}, fmt.Errorf("read secret %s from stdin: %w", s.Name, err)
		}
		s.Value = strings.TrimRight(line, "\r\n")
	}
	if err := s.validate(); err != nil {
		return Secret{}, fmt.Errorf("--secret %q: %w", spec, err)
	}
	return s, nil
}
