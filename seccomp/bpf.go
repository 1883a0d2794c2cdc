//go:build cgo && seccomp

package seccomp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Compile turns a libcontainer seccomp configuration into a classic BPF
// program, the same filter libcontainer would install, prefixed with a stub
// that answers ENOSYS for native syscalls newer than any the profile names
// (so that libc falls back, as runc arranges). Loading a precompiled
// program takes microseconds where building it in every sandbox's init
// takes milliseconds.
func Compile(cfg *configs.Seccomp) ([]byte, error) {
	defAct, err := action(cfg.DefaultAction, cfg.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp default action: %w", err)
	}
	filter, err := libseccomp.NewFilter(defAct)
	if err != nil {
		return nil, fmt.Errorf("create seccomp filter: %w", err)
	}
	defer filter.Release()
	for _, a := range cfg.Architectures {
		arch, err := libseccomp.GetArchFromString(a)
		if err != nil {
			return nil, fmt.Errorf("seccomp architecture %q: %w", a, err)
		}
		if err := filter.AddArch(arch); err != nil {
			return nil, fmt.Errorf("add seccomp architecture %q: %w", a, err)
		}
	}
	var flags uint32
	for _, f := range cfg.Flags {
		switch f {
		case specs.LinuxSeccompFlagSpecAllow:
			flags |= unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW
		case specs.LinuxSeccompFlagLog:
			flags |= unix.SECCOMP_FILTER_FLAG_LOG
		case "SECCOMP_FILTER_FLAG_TSYNC":
			// always set when loading
		default:
			return nil, fmt.Errorf("seccomp flag %s is not supported in precompiled filters", f)
		}
	}
	if len(cfg.Syscalls) > 32 {
		_ = filter.SetOptimize(2)
	}
	if err := filter.SetNoNewPrivsBit(false); err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	maxNr := -1
	for _, call := range cfg.Syscalls {
		nr, err := addCall(filter, call, defAct)
		if err != nil {
			return nil, err
		}
		if nr > maxNr {
			maxNr = nr
		}
	}
	prog, err := export(filter)
	if err != nil {
		return nil, err
	}
	var stub []byte
	if defAct != libseccomp.ActAllow && defAct != libseccomp.ActLog {
		stub = enosysStub(maxNr) // an allow-by-default filter needs no ENOSYS fallback
	}
	return append(append(header(flags), stub...), prog...), nil
}

// header starts every compiled program: a magic word and the flags to load
// the filter with.
func header(flags uint32) []byte {
	return binary.NativeEndian.AppendUint32([]byte(programMagic), flags)
}

func addCall(filter *libseccomp.ScmpFilter, call *configs.Syscall, defAct libseccomp.ScmpAction) (int, error) {
	if call == nil || call.Name == "" {
		return -1, errors.New("seccomp profile has an empty syscall rule")
	}
	act, err := action(call.Action, call.ErrnoRet)
	if err != nil {
		return -1, fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
	}
	nr, err := libseccomp.GetSyscallFromName(call.Name)
	if err != nil {
		return -1, nil // unknown to this libseccomp: not supported here, as libcontainer does
	}
	native := -1
	if n, err := libseccomp.GetSyscallFromNameByArch(call.Name, libseccomp.ArchNative); err == nil {
		native = int(n)
	}
	if act == defAct {
		return native, nil
	}
	if len(call.Args) == 0 {
		if err := filter.AddRule(nr, act); err != nil {
			return -1, fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
		}
		return native, nil
	}
	var conds []libseccomp.ScmpCondition
	perArg := map[uint]int{}
	for _, a := range call.Args {
		op, err := operator(a.Op)
		if err != nil {
			return -1, fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
		}
		c, err := libseccomp.MakeCondition(a.Index, op, a.Value, a.ValueTwo)
		if err != nil {
			return -1, fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
		}
		perArg[a.Index]++
		conds = append(conds, c)
	}
	split := false
	for _, n := range perArg {
		split = split || n > 1
	}
	if split { // several conditions on one argument: one rule each (OR), as libcontainer does
		for _, c := range conds {
			if err := filter.AddRuleConditional(nr, act, []libseccomp.ScmpCondition{c}); err != nil {
				return -1, fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
			}
		}
	} else if err := filter.AddRuleConditional(nr, act, conds); err != nil {
		return -1, fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
	}
	return native, nil
}

func action(a configs.Action, errno *uint) (libseccomp.ScmpAction, error) {
	switch a {
	case configs.Kill, configs.KillThread:
		return libseccomp.ActKillThread, nil
	case configs.KillProcess:
		return libseccomp.ActKillProcess, nil
	case configs.Errno:
		if errno != nil {
			return libseccomp.ActErrno.SetReturnCode(int16(*errno)), nil
		}
		return libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM)), nil
	case configs.Trap:
		return libseccomp.ActTrap, nil
	case configs.Allow:
		return libseccomp.ActAllow, nil
	case configs.Log:
		return libseccomp.ActLog, nil
	case configs.Trace:
		if errno != nil {
			return libseccomp.ActTrace.SetReturnCode(int16(*errno)), nil
		}
		return libseccomp.ActTrace.SetReturnCode(int16(unix.EPERM)), nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("action %v is not supported in precompiled filters", a)
}

func operator(op configs.Operator) (libseccomp.ScmpCompareOp, error) {
	switch op {
	case configs.EqualTo:
		return libseccomp.CompareEqual, nil
	case configs.NotEqualTo:
		return libseccomp.CompareNotEqual, nil
	case configs.GreaterThan:
		return libseccomp.CompareGreater, nil
	case configs.GreaterThanOrEqualTo:
		return libseccomp.CompareGreaterEqual, nil
	case configs.LessThan:
		return libseccomp.CompareLess, nil
	case configs.LessThanOrEqualTo:
		return libseccomp.CompareLessOrEqual, nil
	case configs.MaskEqualTo:
		return libseccomp.CompareMaskedEqual, nil
	}
	return libseccomp.CompareInvalid, fmt.Errorf("invalid seccomp operator %v", op)
}

func export(filter *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("sbx-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for seccomp export: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sbx-seccomp")
	defer f.Close()
	if err := filter.ExportBPF(f); err != nil {
		return nil, fmt.Errorf("export seccomp filter: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	prog, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read exported seccomp filter: %w", err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		return nil, fmt.Errorf("exported seccomp filter has invalid length %d", len(prog))
	}
	return prog, nil
}

// BPF opcodes and seccomp_data offsets used by the ENOSYS stub.
const (
	bpfLdWAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgtK    = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	bpfRetK    = unix.BPF_RET | unix.BPF_K
	offNr      = 0
	offArch    = 4
	retErrno   = 0x00050000 // SECCOMP_RET_ERRNO
	x32Bit     = 0x40000000
	auditAMD64 = 0xc000003e // AUDIT_ARCH_X86_64
)

// enosysStub returns instructions that answer ENOSYS for native x86_64
// syscalls numbered above maxNr (and below the x32 range) and fall through
// to the filter otherwise. On other architectures it returns nothing.
func enosysStub(maxNr int) []byte {
	arch, err := libseccomp.GetNativeArch()
	if err != nil || arch != libseccomp.ArchAMD64 || maxNr < 0 {
		return nil
	}
	ins := []unix.SockFilter{
		{Code: bpfLdWAbs, K: offArch},
		{Code: bpfJeqK, Jt: 0, Jf: 4, K: auditAMD64}, // other arch: to the filter
		{Code: bpfLdWAbs, K: offNr},
		{Code: bpfJgtK, Jt: 0, Jf: 2, K: uint32(maxNr)}, // known: to the filter
		{Code: bpfJgtK, Jt: 1, Jf: 0, K: x32Bit - 1},    // x32: to the filter
		{Code: bpfRetK, K: retErrno | uint32(unix.ENOSYS)},
	}
	out := make([]byte, 0, 8*len(ins))
	for _, in := range ins {
		out = binary.NativeEndian.AppendUint16(out, in.Code)
		out = append(out, in.Jt, in.Jf)
		out = binary.NativeEndian.AppendUint32(out, in.K)
	}
	return out
}

// CompileCached is Compile with a cache of programs in dir, keyed by the
// configuration and the libseccomp version.
func CompileCached(cfg *configs.Seccomp, dir string) ([]byte, error) {
	key, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	major, minor, micro := libseccomp.GetLibraryVersion()
	sum := sha256.Sum256(fmt.Appendf(key, "|libseccomp %d.%d.%d|format 3", major, minor, micro))
	path := filepath.Join(dir, hex.EncodeToString(sum[:16])+".bpf")
	if prog, err := os.ReadFile(path); err == nil && len(prog) > 8 && len(prog)%8 == 0 {
		return prog, nil
	}
	prog, err := Compile(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err == nil {
		tmp, err := os.CreateTemp(dir, ".tmp-*")
		if err == nil {
			_, werr := tmp.Write(prog)
			cerr := tmp.Close()
			if werr == nil && cerr == nil {
				_ = os.Rename(tmp.Name(), path)
			} else {
				_ = os.Remove(tmp.Name())
			}
		}
	}
	return prog, nil
}
