package runc_test

import (
	"strings"
	"testing"
)

// TestProtectionsWhereTheSpecLeavesRoom: on a bundle that asks for no
// seccomp filter and no no_new_privs and masks only runc's default paths,
// sbx-runc still sets no_new_privs, loads its seccomp profile, masks
// Docker's further paths and denies creating device nodes outside its
// allow-list (with CAP_MKNOD granted); runc, on the same bundle, does none of that.
func TestProtectionsWhereTheSpecLeavesRoom(t *testing.T) {
	script := `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -d ' \t'; ` +
		`echo interrupts=$(wc -c </proc/interrupts); ` +
		`mknod /tmp/mem c 1 1 2>/dev/null && echo mknod=ok || echo mknod=denied`
	edit := func(spec map[string]any) {
		proc := spec["process"].(map[string]any)
		proc["noNewPrivileges"] = false
		caps := proc["capabilities"].(map[string]any)
		for _, set := range []string{"bounding", "effective", "permitted"} {
			caps[set] = append(caps[set].([]any), "CAP_MKNOD")
		}
		delete(spec["linux"].(map[string]any), "seccomp")
	}
	want := map[string][]string{
		"sbx-runc": {"NoNewPrivs:1", "Seccomp:2", "interrupts=0", "mknod=denied"},
		"runc":     {"NoNewPrivs:0", "Seccomp:0", "mknod=ok"},
	}
	for _, r := range runtimes(t) {
		b := bundle(t, "protect", edit, "sleep", "300")
		if res := r.run(t, "", "create", "--bundle", b, "protect"); res.code != 0 {
			t.Fatalf("%s create: %s", r.name, res.stderr)
		}
		if res := r.run(t, "", "start", "protect"); res.code != 0 {
			t.Fatalf("%s start: %s", r.name, res.stderr)
		}
		res := r.run(t, "", "exec", "protect", "sh", "-c", script)
		for _, w := range want[r.name] {
			if !strings.Contains(res.stdout, w+"\n") {
				t.Errorf("%s: want %q in\n%s%s", r.name, w, res.stdout, res.stderr)
			}
		}
		if r.name == "runc" && strings.Contains(res.stdout, "interrupts=0\n") {
			t.Errorf("runc: /proc/interrupts is masked already, the test proves nothing: %s", res.stdout)
		}
		if res := r.run(t, "", "delete", "--force", "protect"); res.code != 0 {
			t.Errorf("%s delete --force: %s", r.name, res.stderr)
		}
	}
}

// TestRefusals: what sbx-runc does not do fails at once with a clear
// message and leaves nothing behind.
func TestRefusals(t *testing.T) {
	r := runtimes(t)[0]
	privileged := bundle(t, "priv", func(spec map[string]any) {
		spec["linux"].(map[string]any)["resources"] = map[string]any{"devices": []any{map[string]any{"allow": true, "access": "rwm"}}}
	}, "true")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--bundle", privileged, "priv"}, "does not run privileged containers"},
		{[]string{"--systemd-cgroup", "create", "--bundle", privileged, "priv"}, "systemd cgroup driver is not supported"},
		{[]string{"checkpoint", "priv"}, `"checkpoint" is not supported`},
		{[]string{"update", "--memory", "1m", "priv"}, "flag provided but not defined"},
		{[]string{"create", "--bundle", t.TempDir(), "nobundle"}, "config.json"},
	} {
		res := r.run(t, "", c.args...)
		if res.code != 1 || !strings.Contains(res.stderr, c.want) {
			t.Errorf("sbx-runc %v: exit %d, stderr %q, want 1 and %q", c.args, res.code, res.stderr, c.want)
		}
	}
	if res := r.run(t, "", "state", "priv"); res.code != 1 || !strings.Contains(res.stderr, "does not exist") {
		t.Errorf("a refused create left a container: %+v", res)
	}
}
