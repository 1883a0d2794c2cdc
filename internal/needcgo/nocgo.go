//go:build !cgo

package needcgo

// The local backend (sandbox.Open: libcontainer, libseccomp) needs cgo:
// build with CGO_ENABLED=1 and a C compiler (docs/embedding.md), or link
// only github.com/sbxrun/sbx/server/client for a remote-only program.
const _ = sbx_local_backend_needs_cgo__build_with_CGO_ENABLED_1__or_use_server_client_for_a_remote_only_program
