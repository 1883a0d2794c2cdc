package openhands

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestCommandTakesListsAndShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		`["/usr/local/bin/openhands-agent-server","--port","60000"]`:              {"/usr/local/bin/openhands-agent-server", "--port", "60000"},
		`"/usr/local/bin/openhands-agent-server --port 60000"`:                    {"/usr/local/bin/openhands-agent-server", "--port", "60000"},
		`"/agent-server/.venv/bin/python -m openhands.agent_server --port 60000"`: {"/agent-server/.venv/bin/python", "-m", "openhands.agent_server", "--port", "60000"},
		`"sh -c 'echo $HOME; exit 3'  \"a \\\"b\\\"\" c\\ d"`:                     {"sh", "-c", "echo $HOME; exit 3", `a "b"`, "c d"},
		`""`: nil,
	} {
		var c Command
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if !reflect.DeepEqual([]string(c), want) {
			t.Errorf("%s: got %q, want %q", in, c, want)
		}
	}
	for _, bad := range []string{`"echo 'open"`, `"echo \"open"`, `42`, `{"a":1}`} {
		var c Command
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%s: accepted as %q", bad, c)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"ghcr.io/openhands/agent-server:*", "ghcr.io/openhands/agent-server:1.58.0-python", true},
		{"ghcr.io/openhands/agent-server:*", "ghcr.io/openhands/agent-server", false},
		{"ghcr.io/openhands/agent-server:*", "ghcr.io/openhands/agent-server-evil:1", false},
		{"*/swebench/*:latest", "docker.io/swebench/sweb.eval.x86_64.django:latest", true},
		{"*/swebench/*:latest", "docker.io/swebench/x:v1", false},
		{"exact:tag", "exact:tag", true},
		{"a*a", "a", false},
		{"*", "anything", true},
	} {
		if got := matchGlob(c.pattern, c.name); got != c.want {
			t.Errorf("matchGlob(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
}

func TestTreeCommand(t *testing.T) {
	got := treeCommand([]string{"/usr/local/bin/openhands-agent-server", "--port", "60000"})
	want := []string{"/agent-server/.venv/bin/python", "-m", "openhands.agent_server", "--port", "60000"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("binary target: %q", got)
	}
	src := []string{"/agent-server/.venv/bin/python", "-m", "openhands.agent_server", "--port", "60000"}
	if got := treeCommand(src); !reflect.DeepEqual(got, src) {
		t.Fatalf("source target changed: %q", got)
	}
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.yaml: %v (version %q)", err, doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for pattern := range (&Service{}).routes() {
		served[pattern] = true
		if !documented[pattern] {
			t.Errorf("route %s is not in openapi.yaml", pattern)
		}
	}
	for op := range documented {
		if !served[op] {
			t.Errorf("openapi.yaml lists %s, which is not served", op)
		}
	}
}
