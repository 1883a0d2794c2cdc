package sbx

import "errors"

// The errors of Sandboxes and Images. Every backend wraps one of them, so
// callers test with errors.Is whatever the backend; the CLI maps them to
// exit codes and the REST server to HTTP status codes (in brackets).
var (
	// ErrNotFound: no sandbox has that id, prefix or name (404).
	ErrNotFound = errors.New("no such sandbox")
	// ErrImageNotFound: no image has that reference, in the cache or (when
	// pulling) in its registry (404).
	ErrImageNotFound = errors.New("image not found")
	// ErrNameInUse: another sandbox has that name (409).
	ErrNameInUse = errors.New("name already in use")
	// ErrPortInUse: a host port to publish is taken, by a process on the
	// host or another sandbox (409; exit code 125, as docker's "port is
	// already allocated").
	ErrPortInUse = errors.New("host port in use")
	// ErrBusy: another operation holds the sandbox (409).
	ErrBusy = errors.New("sandbox is locked by another operation")
	// ErrState: the sandbox is not in a state that allows the operation,
	// e.g. removing a running sandbox without Force (409).
	ErrState = errors.New("wrong sandbox state")
	// ErrInvalid: the request is malformed or cannot be met (422; 400
	// for a malformed body).
	ErrInvalid = errors.New("invalid request")
	// ErrForbidden: the host's Policy does not allow the request (422).
	ErrForbidden = errors.New("not allowed by the host's policy")
	// ErrAmbiguous: an id prefix matches more than one sandbox (400).
	ErrAmbiguous = errors.New("ambiguous sandbox id prefix")
	// ErrLimit: a configured maximum (sandbox count, memory budget,
	// concurrent creates) would be exceeded (429).
	ErrLimit = errors.New("sandbox limit reached")
	// ErrNotReady: the sandbox started but its executor did not answer
	// (500).
	ErrNotReady = errors.New("sandbox executor not ready")
	// ErrNoSuchFile: a path given to a copy does not exist in the sandbox
	// (404).
	ErrNoSuchFile = errors.New("no such file or directory")
	// ErrRegistryAuth: an image registry refused the credentials, or
	// their absence (502).
	ErrRegistryAuth = errors.New("registry authentication failed")
	// ErrRegistryUnreachable: an image registry could not be reached
	// (502).
	ErrRegistryUnreachable = errors.New("registry unreachable")
	// ErrUnsupported: this backend cannot do the operation, e.g. host
	// mode against a remote server (501).
	ErrUnsupported = errors.New("not supported by this backend")
)
