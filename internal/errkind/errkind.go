// Package errkind makes errors with their own message that errors.Is
// reports as one of the contract's sentinel errors (package sbx), so that
// a package keeps its precise wording ("no such sandbox", "image not
// found") while callers test for sbx.ErrNotFound.
package errkind

// New returns an error whose message is msg and that unwraps to kind.
func New(msg string, kind error) error { return &kindError{msg: msg, kind: kind} }

type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Of returns an error whose message is msg and that errors.Is reports as
// each of kinds (say, both sbx.ErrInvalid and sbx.ErrImageNotFound).
func Of(msg string, kinds ...error) error { return &kindsError{msg: msg, kinds: kinds} }

type kindsError struct {
	msg   string
	kinds []error
}

func (e *kindsError) Error() string   { return e.msg }
func (e *kindsError) Unwrap() []error { return e.kinds }
