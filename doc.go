// Package sbx is the contract of sbx, a sandbox runtime for untrusted
// code: the types of a request and its results, the errors, and two small
// interfaces, Sandboxes and Images, that every front-end uses.
//
// Two implementations exist:
//
//   - local: sandbox.Open(sandbox.HostConfig{...}) returns a *sandbox.Host
//     that runs sandboxes on this machine (needs root, cgo, libseccomp and
//     the seccomp build tag; see docs/embedding.md);
//   - remote: server/client.New("unix:///run/sbx/sbx.sock", ...) talks to
//     `sbx serve` over HTTP and needs neither cgo nor root.
//
// Code written against Sandboxes and Images works with both. An operation
// one backend cannot do returns an error wrapping ErrUnsupported.
//
// This package depends on the standard library only.
//
// # Wire format
//
// Every type here has one JSON form, used by the REST API, the state files
// and the CLI's JSON output alike:
//
//   - names are snake_case;
//   - durations that are requested or recorded (a TTL, a stop timeout) are
//     Go duration strings such as "10m" or "1h30m0s" (requests may also
//     give a number of seconds);
//   - measured durations are float seconds in fields named *_s
//     (wall_time_s, cpu_time_s);
//   - sizes are integer bytes in fields named *_bytes (requests may also
//     give a string with a binary unit, "512m");
//   - a signal is its name, "SIGKILL", or "" for none, in run reports and
//     exec results alike.
package sbx
