// Command adversary is what the adversarial tests run inside a sandbox:
// each subcommand tries one thing a hostile tenant would, and prints one
// line "NAME RESULT", where RESULT is "ok" when it worked or the errno's
// name (EPERM, EACCES, ...) when the kernel refused. It is built static,
// without cgo, so it runs in any root.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: adversary CHECK [ARG...]")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "ptrace": // ptrace PID: attach to a process
		pid := atoi(args[0])
		err := unix.PtraceSeize(pid)
		if err == nil {
			_ = unix.PtraceDetach(pid)
		}
		report("ptrace", err)
	case "procmem": // procmem PID: open its memory for writing
		report("procmem", openClose("/proc/"+args[0]+"/mem", unix.O_RDWR))
	case "procfd": // procfd PID: follow one of its descriptors
		_, err := os.Readlink("/proc/" + args[0] + "/fd/0")
		report("procfd", err)
	case "fds": // the descriptors this process inherited above 2: those
		// without close-on-exec (what the Go runtime opens itself, such as
		// cgroup files for GOMAXPROCS, has it)
		var extra []string
		entries, _ := os.ReadDir("/proc/self/fd")
		for _, e := range entries {
			fd := atoi(e.Name())
			if fd <= 2 {
				continue
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC != 0 {
				continue // closed by now (the directory read), or opened here
			}
			target, _ := os.Readlink("/proc/self/fd/" + e.Name())
			extra = append(extra, e.Name()+"="+target)
		}
		fmt.Printf("fds %s\n", strings.Join(extra, ","))
	case "write": // write PATH: open a file for writing
		report("write "+args[0], openClose(args[0], unix.O_WRONLY))
	case "mount":
		report("mount", unix.Mount("none", "/tmp", "tmpfs", 0, ""))
	case "unshare": // unshare user|mount|net|pid|cgroup|time
		flags := map[string]int{"user": unix.CLONE_NEWUSER, "mount": unix.CLONE_NEWNS, "net": unix.CLONE_NEWNET,
			"pid": unix.CLONE_NEWPID, "cgroup": unix.CLONE_NEWCGROUP, "time": unix.CLONE_NEWTIME}
		report("unshare "+args[0], unix.Unshare(flags[args[0]]))
	case "keyctl":
		_, err := unix.AddKey("user", "sbx-adversary", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		report("keyctl", err)
	case "open_by_handle_at":
		h := unix.NewFileHandle(1, make([]byte, 8))
		fd, err := unix.OpenByHandleAt(unix.AT_FDCWD, h, unix.O_RDONLY)
		if err == nil {
			unix.Close(fd)
		}
		report("open_by_handle_at", err)
	case "bpf":
		insns := []uint64{0x00000000000000b7, 0x0000000000000095} // r0 = 0; exit
		attr := struct {
			progType, insnCnt uint32
			insns, license    uint64
		}{1, 2, uint64(uintptr(unsafe.Pointer(&insns[0]))), uint64(uintptr(unsafe.Pointer(&[]byte("GPL\x00")[0])))}
		fd, _, errno := unix.Syscall(unix.SYS_BPF, 5 /* BPF_PROG_LOAD */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno == 0 {
			unix.Close(int(fd))
		}
		report("bpf", errnoOrNil(errno))
	case "perf":
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, 0)
		if err == nil {
			unix.Close(fd)
		}
		report("perf", err)
	case "mknod": // mknod PATH: a block device node (8:0, a disk)
		report("mknod", unix.Mknod(args[0], unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))))
	case "open": // open PATH: read a file or device
		report("open "+args[0], openClose(args[0], unix.O_RDONLY))
	case "tiocsti": // push a character into the terminal on stdin
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		report("tiocsti", errnoOrNil(errno))
	case "status": // status FD JSON: write JSON to a descriptor (the init's status pipe)
		_, err := unix.Write(atoi(args[0]), []byte(args[1]+"\n"))
		report("status", err)
	case "fill": // fill FD: fill a pipe and hold it open
		buf := make([]byte, 1<<16)
		for i := 0; i < 64; i++ {
			if _, err := unix.Write(atoi(args[0]), buf); err != nil {
				break
			}
		}
		report("fill", nil)
	case "inotify": // inotify N: take up to N inotify instances, say how many, hold them until stdin closes
		n := 0
		for i := 0; i < atoi(args[0]); i++ {
			if _, err := unix.InotifyInit1(0); err != nil {
				break
			}
			n++
		}
		fmt.Printf("inotify %d\n", n)
		_, _ = os.Stdin.Read(make([]byte, 1))
	case "ping": // an ICMP datagram socket, as unprivileged ping uses
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)
		if err == nil {
			unix.Close(fd)
		}
		report("ping", err)
	case "json": // json TEXT: print TEXT as a JSON string (for tests' quoting)
		b, _ := json.Marshal(args[0])
		fmt.Println(string(b))
	default:
		fmt.Fprintf(os.Stderr, "adversary: unknown check %q\n", os.Args[1])
		os.Exit(2)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "adversary: %q is not a number\n", s)
		os.Exit(2)
	}
	return n
}

func openClose(path string, flags int) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// report prints the result of one check.
func report(name string, err error) {
	var errno unix.Errno
	switch {
	case err == nil:
		fmt.Println(name, "ok")
	case errors.As(err, &errno):
		fmt.Println(name, unix.ErrnoName(errno))
	default:
		fmt.Println(name, "error:", err)
	}
}
