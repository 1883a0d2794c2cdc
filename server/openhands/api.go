// Package openhands serves the OpenHands Remote Runtime API, so that
// OpenHands (the SDK's APIRemoteWorkspace and the app server's
// RemoteSandboxService) runs its Agent Servers in sbx sandboxes unchanged.
// There is no published specification: the contract is what those two
// clients send and parse (docs/openhands.md lists it with its sources).
//
// It is a front-end over the library, like the REST server: a control
// plane (/start, /sessions, /list, /pause, /resume, /stop, with the
// X-API-Key header) and a data plane that forwards /<runtime_id>/... to
// the Agent Server's port inside the sandbox (path mode), with no
// authentication of its own: the Agent Server checks the session key that
// this package mints and injects.
package openhands

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Runtime statuses (the field clients treat as the source of truth).
const (
	StatusStarting = "starting"
	StatusRunning  = "running"
	StatusPaused   = "paused"
	StatusStopped  = "stopped"
	StatusError    = "error"
)

// Pod statuses (what APIRemoteWorkspace waits on).
const (
	PodPending          = "pending"
	PodReady            = "ready"
	PodPaused           = "paused"
	PodNotFound         = "not found"
	PodFailed           = "failed"
	PodCrashLoopBackOff = "crashloopbackoff"
)

// Ports of the services an Agent Server sandbox exposes, and the path
// segments that reach them (/<runtime_id>/<segment>/...).
const (
	AgentServerPort = 60000
	VSCodePort      = 60001
	Worker1Port     = 12000
	Worker2Port     = 12001
)

// servicePorts maps the first path segment after the runtime id to a port;
// everything else goes to the Agent Server.
var servicePorts = map[string]int{"vscode": VSCodePort, "work-1": Worker1Port, "work-2": Worker2Port}

// Runtime is the runtime object of every reply: POST /start, /resume, GET
// /sessions/{id}, the elements of /sessions/batch and of /list.
type Runtime struct {
	RuntimeID string `json:"runtime_id"`
	SessionID string `json:"session_id"`
	// URL is the Agent Server's base URL as clients reach it:
	// <public URL>/<runtime_id>.
	URL string `json:"url"`
	// SessionAPIKey is the key the Agent Server requires (always set).
	SessionAPIKey  string   `json:"session_api_key"`
	Status         string   `json:"status"`
	PodStatus      string   `json:"pod_status"`
	StatusDetail   string   `json:"status_detail"`
	RestartCount   int      `json:"restart_count"`
	RestartReasons []string `json:"restart_reasons"`
	// PodLogs is the tail of the Agent Server's output.
	PodLogs string `json:"pod_logs"`
	Image   string `json:"image"`
	// SandboxID is the sbx sandbox behind the runtime (not part of the
	// upstream contract; clients ignore it).
	SandboxID string `json:"sandbox_id,omitempty"`
}

// StartRequest is the body of POST /start. Command is a list (the app
// server) or a string (the SDK), split as a POSIX shell splits words
// without expanding anything.
type StartRequest struct {
	Image           string            `json:"image"`
	Command         Command           `json:"command"`
	WorkingDir      string            `json:"working_dir"`
	Environment     map[string]string `json:"environment"`
	SessionID       string            `json:"session_id"`
	ResourceFactor  float64           `json:"resource_factor"`
	RunAsUser       *int              `json:"run_as_user"`
	RunAsGroup      *int              `json:"run_as_group"`
	FSGroup         *int              `json:"fs_group"`
	RuntimeClass    string            `json:"runtime_class"`
	ImagePullPolicy string            `json:"image_pull_policy"`

	owner string // the tenant of the caller's key, set by the handler
}

// RuntimeRef is the body of POST /pause, /resume and /stop.
type RuntimeRef struct {
	RuntimeID string `json:"runtime_id"`
}

// ListReply is the reply of GET /list.
type ListReply struct {
	Runtimes []Runtime `json:"runtimes"`
}

// ErrorReply is the body of every error: FastAPI's shape, which the
// clients log.
type ErrorReply struct {
	Detail string `json:"detail"`
}

// Command is a command given as a JSON list or string.
type Command []string

// UnmarshalJSON accepts ["a","b"] or "a b" (split into words).
func (c *Command) UnmarshalJSON(data []byte) error {
	var list []string
	if err := json.Unmarshal(data, &list); err == nil {
		*c = list
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("command: want a list of strings or a string")
	}
	words, err := SplitWords(s)
	if err != nil {
		return fmt.Errorf("command: %w", err)
	}
	*c = words
	return nil
}

// SplitWords splits s into words as a POSIX shell does, with single and
// double quotes and backslashes, but expands nothing.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
			inWord = true
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote in %q", s)
			}
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// matchGlob reports whether name matches pattern, where "*" matches any
// run of characters ("/" and ":" included).
func matchGlob(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	for i, p := range parts[1:] {
		last := i == len(parts)-2
		if last {
			return strings.HasSuffix(name, p)
		}
		j := strings.Index(name, p)
		if j < 0 {
			return false
		}
		name = name[j+len(p):]
	}
	return true
}
