package sbx_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sbxrun/sbx"
)

// Every field of Options has exactly one pool class, in declaration
// order, under its JSON name: a new field fails here until it is given
// one.
func TestEveryOptionHasAPoolClass(t *testing.T) {
	typ := reflect.TypeFor[sbx.Options]()
	if typ.NumField() != len(sbx.OptionClasses) {
		var missing []string
		for i := range typ.NumField() {
			name := typ.Field(i).Name
			if !slices.ContainsFunc(sbx.OptionClasses, func(c sbx.OptionClass) bool { return c.Field == name }) {
				missing = append(missing, name)
			}
		}
		t.Fatalf("Options has %d fields, OptionClasses classifies %d; give these a class in optionclass.go: %v", typ.NumField(), len(sbx.OptionClasses), missing)
	}
	for i, c := range sbx.OptionClasses {
		f := typ.Field(i)
		if f.Name != c.Field {
			t.Errorf("OptionClasses[%d] is %s, Options' field %d is %s: keep the declaration order", i, c.Field, i, f.Name)
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			tag = snakeCase(f.Name) // written by MarshalJSON
		}
		if tag != c.JSON {
			t.Errorf("%s: JSON name %q, classified as %q", f.Name, tag, c.JSON)
		}
		switch c.Class {
		case sbx.PoolKey, sbx.PoolClaim, sbx.PoolUnclaimable:
		default:
			t.Errorf("%s: unknown class %q", c.Field, c.Class)
		}
		if c.Claimant && c.Class != sbx.PoolClaim {
			t.Errorf("%s: only a claim-time field can belong to the claimant", c.Field)
		}
		if c.How == "" {
			t.Errorf("%s: say why it is in the key or how a claim applies it", c.Field)
		}
	}
}

func TestPoolKeyValuesFillDefaults(t *testing.T) {
	a := &sbx.Options{Image: "x", Env: []string{"A=1"}, CapAdd: []string{}}
	b := &sbx.Options{Image: "x", Seccomp: "default", Network: sbx.NetworkNone, UserNS: sbx.UserNSPrivate, Workdir: "/w"}
	if !reflect.DeepEqual(sbx.PoolKeyValues(a), sbx.PoolKeyValues(b)) {
		t.Fatalf("defaults and empty lists differ:\n%v\n%v", sbx.PoolKeyValues(a), sbx.PoolKeyValues(b))
	}
	if d := sbx.PoolKeyDiff(a, b); len(d) != 0 {
		t.Fatalf("PoolKeyDiff = %v, want none", d)
	}
	b.Seccomp, b.CapDrop = "unconfined", []string{"ALL"}
	if d := sbx.PoolKeyDiff(a, b); !slices.Equal(d, []string{"cap_drop", "seccomp"}) {
		t.Fatalf("PoolKeyDiff = %v, want [cap_drop seccomp]", d)
	}
}

func TestOptionsSet(t *testing.T) {
	o := &sbx.Options{Name: "n", Image: "x", Seccomp: "default", Network: sbx.NetworkBridge, Labels: map[string]string{"a": "b"}, Env: []string{}}
	if got := sbx.OptionsSet(o, sbx.PoolKey, false); !slices.Equal(got, []string{"image", "network"}) {
		t.Errorf("key fields set = %v, want [image network] (seccomp is its default)", got)
	}
	if got := sbx.OptionsSet(o, sbx.PoolClaim, true); !slices.Equal(got, []string{"name", "labels"}) {
		t.Errorf("claimant fields set = %v, want [name labels]", got)
	}
}

// docs/pools.md shows the classification as OptionClasses says it.
func TestPoolsDocShowsTheClasses(t *testing.T) {
	doc, err := os.ReadFile("docs/pools.md")
	if err != nil {
		t.Fatal(err)
	}
	want := poolClassTable()
	if !strings.Contains(string(doc), want) {
		t.Fatalf("docs/pools.md does not hold the table of OptionClasses; put this in it:\n\n%s", want)
	}
}

// poolClassTable renders OptionClasses as docs/pools.md's table.
func poolClassTable() string {
	var b strings.Builder
	b.WriteString("| option (JSON) | class | why, or how a claim applies it |\n|---|---|---|\n")
	for _, c := range sbx.OptionClasses {
		class := string(c.Class)
		if c.Claimant {
			class += " (the claimant's only)"
		}
		b.WriteString("| `" + c.JSON + "` | " + class + " | " + c.How + " |\n")
	}
	return b.String()
}

func TestClaimOptions(t *testing.T) {
	pool := &sbx.Options{Image: "x", Network: sbx.NetworkBridge, Seccomp: "unconfined", Env: []string{"P=1"}}
	task := &sbx.Options{Image: "y", Env: []string{"T=1"}, Workdir: "/w"}
	got, differ := sbx.ClaimOptions(task, pool)
	if len(differ) != 0 || got.Network != sbx.NetworkBridge || got.Seccomp != "unconfined" || got.Image != "y" ||
		!slices.Equal(got.Env, []string{"T=1"}) || got.Workdir != "/w" {
		t.Fatalf("ClaimOptions = %+v, %v", got, differ)
	}
	task.Network, task.CapAdd = sbx.NetworkNone, []string{"NET_ADMIN"}
	if _, differ := sbx.ClaimOptions(task, pool); !slices.Equal(differ, []string{"network", "cap_add"}) {
		t.Fatalf("differ = %v, want [network cap_add]", differ)
	}
}

// TestPoolSpecRefusesUnclaimable: a pool whose options set a field no
// claim can apply (idle_timeout) could never serve a create; it is
// refused, naming the field.
func TestPoolSpecRefusesUnclaimable(t *testing.T) {
	p := sbx.PoolSpec{Name: "idle", Size: 1, Options: sbx.Options{Image: "x", IdleTimeout: time.Minute}}
	if err := p.Validate(); !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), "idle_timeout") {
		t.Fatalf("Validate = %v, want an invalid-request error naming idle_timeout", err)
	}
	p.Options.IdleTimeout = 0
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

// snakeCase is a Go field name in JSON's form: TTL is ttl, IdleTimeout
// idle_timeout.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(name[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
