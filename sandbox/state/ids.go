package state

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sync"
)

// IDLength is the length of a sandbox id: 32 lowercase hex digits (128
// random bits). ShortIDLength digits are shown by default and accepted as
// a prefix.
const (
	IDLength      = 32
	ShortIDLength = 12
	maxNameLength = 128
)

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`) })

// NewID returns a fresh random sandbox id.
func NewID() string {
	var b [IDLength / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id is a well-formed full sandbox id.
func ValidID(id string) error {
	if len(id) != IDLength || !isHex(id) {
		return fmt.Errorf("invalid sandbox id %q: want %d lowercase hex digits", id, IDLength)
	}
	return nil
}

// IsIDPrefix reports whether s could be a prefix of a sandbox id.
func IsIDPrefix(s string) bool { return s != "" && len(s) <= IDLength && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidName reports whether name can name a sandbox: 1 to 128 characters
// of letters, digits, '_', '.' and '-', starting with a letter or digit.
func ValidName(name string) error {
	if len(name) == 0 || len(name) > maxNameLength || !nameRE().MatchString(name) {
		return fmt.Errorf("invalid sandbox name %q: use 1 to %d letters, digits, '_', '.' or '-', starting with a letter or digit", name, maxNameLength)
	}
	return nil
}

func short(id string) string {
	if len(id) > ShortIDLength {
		return id[:ShortIDLength]
	}
	return id
}
