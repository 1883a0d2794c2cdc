package sandbox

import (
	"errors"

	"github.com/sbxrun/sbx/sandbox/state"
)

// Errors of the Manager. Front-ends map them to exit codes and HTTP status
// codes with errors.Is.
var (
	// ErrNotFound: no sandbox has that id, prefix or name (HTTP 404).
	ErrNotFound = state.ErrNotFound
	// ErrNameInUse: another sandbox has that name (HTTP 409).
	ErrNameInUse = state.ErrNameInUse
	// ErrBusy: another operation holds the sandbox (HTTP 409).
	ErrBusy = state.ErrLocked
	// ErrInvalid: the request is malformed (HTTP 400/422).
	ErrInvalid = errors.New("invalid request")
	// ErrAmbiguous: an id prefix matches more than one sandbox (HTTP 400).
	ErrAmbiguous = errors.New("ambiguous sandbox id prefix")
	// ErrLimit: a configured maximum (count or memory budget) would be
	// exceeded (HTTP 429).
	ErrLimit = errors.New("sandbox limit reached")
	// ErrState: the sandbox is not in a state that allows the operation,
	// e.g. removing a running sandbox without force (HTTP 409).
	ErrState = errors.New("wrong sandbox state")
	// ErrNotReady: the sandbox started but its executor did not answer
	// (HTTP 500/503).
	ErrNotReady = errors.New("sandbox executor not ready")
)
