package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultRootDir is where BusyboxRoot builds the default workload root.
const DefaultRootDir = "/var/cache/sbx-bench/busybox"

// BusyboxRoot returns a minimal root filesystem at dir made of the host's
// static busybox and its applets, building it once (the Debian package
// busybox-static provides the binary). It is the default workload: it
// has `true` and `sleep`, which every scenario needs.
func BusyboxRoot(dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	src, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("no --rootfs given and busybox is not installed to build a default root: apt-get install busybox-static, or pass --rootfs DIR")
	}
	if err := CheckStatic(src); err != nil {
		return "", fmt.Errorf("%s is not static (install busybox-static) or pass --rootfs DIR: %w", src, err)
	}
	list, err := exec.Command(src, "--list-full").Output()
	if err != nil {
		return "", fmt.Errorf("busybox --list-full: %w", err)
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "tmp", "root", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(filepath.Join(tmp, "tmp"), 0o1777); err != nil {
		return "", err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "bin/busybox"), data, 0o755); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		rel := strings.TrimSpace(sc.Text())
		if rel == "" || rel == "bin/busybox" || strings.Contains(rel, "..") {
			continue
		}
		link := filepath.Join(tmp, rel)
		target, _ := filepath.Rel(filepath.Dir(link), filepath.Join(tmp, "bin/busybox"))
		if err := os.Symlink(target, link); err != nil && !os.IsExist(err) {
			return "", err
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
		".complete":  "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}
