// Package bpfload installs seccomp programs compiled by package seccomp. It
// depends on nothing but the standard library and x/sys, so that sbx's
// small in-sandbox init can link it.
package bpfload

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Magic starts a compiled program; a little-endian uint32 of flags follows
// it, then the classic BPF instructions.
const Magic = "SBXF"

// maxProgramBytes caps a filter read from a file descriptor (BPF_MAXINSNS
// instructions of 8 bytes).
const maxProgramBytes = 4096 * 8

// LoadFromFD reads a compiled program from fd and installs it on every
// thread of the calling process. sbx's init calls it inside the sandbox,
// after no_new_privs is set and before any sandboxed code runs.
func LoadFromFD(fd int) error {
	f := os.NewFile(uintptr(fd), "seccomp")
	defer f.Close()
	prog, err := io.ReadAll(io.LimitReader(f, maxProgramBytes+9))
	if err != nil {
		return fmt.Errorf("read seccomp program: %w", err)
	}
	return Load(prog)
}

// Load installs a compiled program (header and BPF) on every thread of the
// calling process.
func Load(compiled []byte) error {
	if len(compiled) <= 8 || len(compiled)%8 != 0 || len(compiled) > maxProgramBytes+8 || string(compiled[:4]) != Magic {
		return fmt.Errorf("invalid seccomp program of %d bytes", len(compiled))
	}
	flags := uintptr(binary.NativeEndian.Uint32(compiled[4:8])) | unix.SECCOMP_FILTER_FLAG_TSYNC
	prog := compiled[8:]
	fprog := unix.SockFprog{
		Len:    uint16(len(prog) / 8),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("load seccomp filter: %w", errno)
	}
	return nil
}
