package isolate

/*
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// sbx_lcinit_handover runs before every other constructor of the program,
// nsenter's included, in every process of a program that links isolate. In
// one case only it acts: when libcontainer re-executes the program as its
// init stage ("PROGRAM init" with _LIBCONTAINER_INITPIPE set) and isolate
// passed the small sbx-lcinit binary as the last of the process's extra
// files, the fd just below the console socket or the init pipe. Then it
// executes sbx-lcinit in place of the program, with the same arguments,
// environment and descriptors, before the program's Go runtime starts.
// Anything else (another libcontainer user, a missing file) leaves the
// program to run libcontainer's init itself, as it would without this.
__attribute__((constructor(101))) static void sbx_lcinit_handover(int argc, char **argv, char **envp)
{
	if (argc < 2 || argv[1] == NULL || strcmp(argv[1], "init") != 0)
		return;
	const char *pipe = getenv("_LIBCONTAINER_INITPIPE");
	if (pipe == NULL)
		return;
	const char *console = getenv("_LIBCONTAINER_CONSOLE");
	int fd = atoi(console != NULL ? console : pipe) - 1;
	if (fd < 3)
		return;
	char link[64], target[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	const char *base = strrchr(target, '/');
	base = base != NULL ? base + 1 : target;
	if (strncmp(base, "sbx-lcinit-", strlen("sbx-lcinit-")) != 0)
		return;
	// The descriptor closes on exec: the sandbox never sees it.
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return;
	// The init stage runs on one P (libcontainer's Init sets GOMAXPROCS
	// to 1), but libcontainer passes the parent's GOMAXPROCS, empty when
	// unset: the runtime would start threads for every CPU and then stop
	// the world to drop them. Set before it starts, it makes one P only.
	// (This environment is the init stage's own: PID 1 gets the spec's.)
	size_t nenv = 0;
	while (envp[nenv] != NULL)
		nenv++;
	char **env = calloc(nenv + 1, sizeof *env);
	if (env != NULL) {
		for (size_t i = 0; i < nenv; i++)
			env[i] = strcmp(envp[i], "GOMAXPROCS=") == 0 ? (char *)"GOMAXPROCS=1" : envp[i];
		envp = env;
	}
	syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
	// The exec failed: continue as the program's own init.
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/internal/helperbin"
)

// lcinitFiles caches, per helpers directory, the sealed handle of
// sbx-lcinit that Start passes to libcontainer's init stage.
var lcinitFiles = struct {
	sync.Mutex
	m map[string]*os.File
}{m: map[string]*os.File{}}

// lcinitFile returns a handle of the embedded sbx-lcinit, installed under
// dir, that sandboxed code cannot write through: an O_PATH descriptor
// opened through a read-only overlay mount of dir that is attached nowhere
// (libcontainer seals its own re-executed binary the same way), made once
// per process. It returns nil, nil when this build embeds no sbx-lcinit.
func lcinitFile(dir string) (*os.File, error) {
	lcinitFiles.Lock()
	defer lcinitFiles.Unlock()
	if f, ok := lcinitFiles.m[dir]; ok {
		return f, nil
	}
	path, err := helperbin.Install(dir, helperbin.LCInit)
	if errors.Is(err, helperbin.ErrNotEmbedded) {
		lcinitFiles.m[dir] = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := openSealed(path)
	if err != nil {
		return nil, err
	}
	lcinitFiles.m[dir] = f
	return f, nil
}

// openSealed opens path with O_PATH through a private read-only overlay of
// its directory (with an empty second lower layer, which overlayfs needs to
// mount without an upper one).
func openSealed(path string) (*os.File, error) {
	dir, name := filepath.Split(path)
	empty := filepath.Clean(dir) + ".empty"
	if err := os.MkdirAll(empty, 0o700); err != nil {
		return nil, fmt.Errorf("seal %s: %w", name, err)
	}
	esc := func(p string) string { return strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(filepath.Clean(p)) }
	ctx, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seal %s: fsopen overlay: %w", name, err)
	}
	defer unix.Close(ctx)
	if err := unix.FsconfigSetString(ctx, "lowerdir", esc(dir)+":"+esc(empty)); err != nil {
		return nil, fmt.Errorf("seal %s: overlay lowerdir: %w", name, err)
	}
	_ = unix.FsconfigSetString(ctx, "xino", "off")
	if err := unix.FsconfigCreate(ctx); err != nil {
		return nil, fmt.Errorf("seal %s: create overlay: %w", name, err)
	}
	mnt, err := unix.Fsmount(ctx, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOSUID)
	if err != nil {
		return nil, fmt.Errorf("seal %s: mount overlay: %w", name, err)
	}
	defer unix.Close(mnt)
	fd, err := unix.Openat(mnt, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("seal %s: open through overlay: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
