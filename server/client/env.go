package client

import (
	"fmt"
	"os"
	"strings"
)

// NewFromEnv connects to host as sbx --host does: with the token of
// SBX_TOKEN, or else of the file SBX_TOKEN_FILE (white space trimmed).
func NewFromEnv(host string) (*Client, error) {
	token := os.Getenv("SBX_TOKEN")
	if f := os.Getenv("SBX_TOKEN_FILE"); token == "" && f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read SBX_TOKEN_FILE: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	return New(host, Options{Token: token})
}
