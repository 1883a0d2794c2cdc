package sbx

import (
	"strings"
	"testing"
)

func TestParseSecret(t *testing.T) {
	env := map[string]string{"API_KEY": "v1"}
	getenv := func(k string) string { return env[k] }
	s, err := ParseSecret("sk-ant-:API_KEY@api.example.com,*.example.org", getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "API_KEY" || s.Prefix != "sk-ant-" || s.Value != "v1" || len(s.Hosts) != 2 || s.Hosts[1] != "*.example.org" {
		t.Fatalf("%+v", s)
	}
	s, err = ParseSecret("TOKEN@git.test", getenv, strings.NewReader("from-stdin\nrest"))
	if err != nil || s.Value != "from-stdin" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"TOKEN@git.test", "API_KEY=v@x.test", "1BAD@x.test", "API_KEY@x y", "a b:API_KEY@x.test"} {
		if _, err := ParseSecret(bad, getenv, nil); err == nil {
			t.Errorf("ParseSecret(%q) accepted", bad)
		}
	}
}

func TestSecretsNeedBridgeAndNeverTwice(t *testing.T) {
	o := Options{Image: "x", Secrets: []Secret{{Name: "A", Value: "v"}, {Name: "A", Value: "w"}}}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "bridge") || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("%v", err)
	}
	rec := WithoutSecretValues(o.Secrets)
	if rec[0].Value != "" || o.Secrets[0].Value != "v" {
		t.Fatal("WithoutSecretValues did not copy")
	}
}
