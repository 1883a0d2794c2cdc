package seccomp

import "github.com/sbxrun/sbx/seccomp/bpfload"

// programMagic starts a compiled program; the flags follow it.
const programMagic = bpfload.Magic

// LoadFromFD reads a compiled program from fd and installs it on every
// thread of the calling process (see bpfload.LoadFromFD).
func LoadFromFD(fd int) error { return bpfload.LoadFromFD(fd) }

// Load installs a compiled program on every thread of the calling process.
func Load(compiled []byte) error { return bpfload.Load(compiled) }
