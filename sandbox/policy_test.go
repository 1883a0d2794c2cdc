package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sbxrun/sbx"
)

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	inside := filepath.Join(dir, "vol")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	strict := &sbx.Policy{AllowedHostDirs: []string{dir}}
	open := &sbx.Policy{AllowedHostDirs: []string{dir}, AllowHostNetwork: true, AllowPrivileged: true}
	for name, c := range map[string]struct {
		p    *sbx.Policy
		o    sbx.Options
		want error
	}{
		"nil policy allows all":      {nil, sbx.Options{Rootfs: "/etc", Network: "host", CapAdd: []string{"ALL"}}, nil},
		"rootfs inside":              {strict, sbx.Options{Rootfs: inside}, nil},
		"rootfs outside":             {strict, sbx.Options{Rootfs: "/etc"}, sbx.ErrForbidden},
		"rootfs through a symlink":   {strict, sbx.Options{Rootfs: filepath.Join(dir, "escape")}, sbx.ErrForbidden},
		"rootfs escaping with ..":    {strict, sbx.Options{Rootfs: dir + "/../.."}, sbx.ErrForbidden},
		"missing rootfs":             {strict, sbx.Options{Rootfs: filepath.Join(dir, "nope")}, sbx.ErrInvalid},
		"volume outside":             {strict, sbx.Options{Volumes: []sbx.Volume{{HostPath: "/", Path: "/h"}}}, sbx.ErrForbidden},
		"host network":               {strict, sbx.Options{Network: "host"}, sbx.ErrForbidden},
		"host network allowed":       {open, sbx.Options{Network: "host"}, nil},
		"allow_host_ports":           {strict, sbx.Options{Network: "bridge", AllowHostPorts: []string{"22"}}, sbx.ErrForbidden},
		"dns on loopback":            {strict, sbx.Options{Network: "bridge", DNS: []string{"127.0.0.53"}}, sbx.ErrForbidden},
		"dns on loopback allowed":    {open, sbx.Options{Network: "bridge", DNS: []string{"127.0.0.53"}}, nil},
		"public dns":                 {strict, sbx.Options{Network: "bridge", DNS: []string{"1.1.1.1"}}, nil},
		"cap_add":                    {strict, sbx.Options{CapAdd: []string{"SYS_ADMIN"}}, sbx.ErrForbidden},
		"seccomp unconfined":         {strict, sbx.Options{Seccomp: "unconfined"}, sbx.ErrForbidden},
		"privileges allowed":         {open, sbx.Options{CapAdd: []string{"SYS_ADMIN"}, Seccomp: "unconfined"}, nil},
		"no dirs allow no host path": {&sbx.Policy{}, sbx.Options{Rootfs: inside}, sbx.ErrForbidden},
	} {
		o := c.o
		err := applyPolicy(c.p, &o)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// A named volume is left to the host (resolveVolumes replaces any
	// host path sent with its name by the volume's directory).
	named := sbx.Options{Volumes: []sbx.Volume{{Name: "data", HostPath: "/etc", Path: "/d"}}}
	if err := applyPolicy(strict, &named); err != nil || named.Volumes[0].HostPath != "/etc" {
		t.Fatalf("a named volume under a strict policy: %+v %v", named.Volumes, err)
	}
	o := sbx.Options{Rootfs: inside + "/."}
	if err := applyPolicy(strict, &o); err != nil || o.Rootfs != inside {
		t.Fatalf("an allowed rootfs is not recorded resolved: %q %v", o.Rootfs, err)
	}
	if _, err := normalizePolicy(&sbx.Policy{AllowedHostDirs: []string{"rel"}}); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("a relative allowed directory: %v", err)
	}
}

// TestPolicyViewIsTheContract checks that a PolicyView has exactly the
// methods of sbx.Sandboxes, sbx.Images, sbx.Pools and sbx.Volumes (a named
// volume is the host's own directory: no policy applies), and Claim and
// PoolStats: nothing else of the Host leaks through it unforwarded
// (background work), and the compile-time assertions beside the type make
// each new contract method a decision.
func TestPolicyViewIsTheContract(t *testing.T) {
	want := map[string]bool{"Claim": true, "PoolStats": true}
	for _, it := range []reflect.Type{reflect.TypeFor[sbx.Sandboxes](), reflect.TypeFor[sbx.Images](), reflect.TypeFor[sbx.Pools](), reflect.TypeFor[sbx.Volumes]()} {
		for i := range it.NumMethod() {
			want[it.Method(i).Name] = true
		}
	}
	vt := reflect.TypeFor[*PolicyView]()
	for i := range vt.NumMethod() {
		if name := vt.Method(i).Name; !want[name] {
			t.Errorf("PolicyView.%s is not a method of the contract: decide whether the policy applies and test it", name)
		}
	}
	if vt.NumMethod() != len(want) {
		t.Errorf("PolicyView has %d methods, the contract %d", vt.NumMethod(), len(want))
	}
}

// TestPolicyViewHoldsCreatesToItsPolicy checks that a view refuses a
// create its policy forbids before anything is made, although the host's
// own policy (none) would allow it.
func TestPolicyViewHoldsCreatesToItsPolicy(t *testing.T) {
	dir := t.TempDir()
	h, err := open(HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	v, err := h.WithPolicy(&sbx.Policy{AllowedHostDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Create(ctx, sbx.Options{Rootfs: "/etc"}); !errors.Is(err, sbx.ErrForbidden) {
		t.Fatalf("create of a rootfs outside the view's dirs: %v, want ErrForbidden", err)
	}
	if _, err := v.Run(ctx, sbx.RunOptions{Options: sbx.Options{Rootfs: "/etc", Cmd: []string{"true"}}}); !errors.Is(err, sbx.ErrForbidden) {
		t.Fatalf("run of a rootfs outside the view's dirs: %v, want ErrForbidden", err)
	}
	if list, err := v.List(ctx, sbx.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("after refused creates: %v, %v; want nothing", list, err)
	}
}
