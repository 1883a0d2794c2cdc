package errkind

import (
	"errors"
	"testing"
)

func TestOfIsEachKindWithItsOwnMessage(t *testing.T) {
	invalid, missing, other := errors.New("invalid"), errors.New("missing"), errors.New("other")
	err := Of("image x is not in the cache", invalid, missing)
	if err.Error() != "image x is not in the cache" {
		t.Errorf("message %q", err)
	}
	if !errors.Is(err, invalid) || !errors.Is(err, missing) || errors.Is(err, other) {
		t.Errorf("errors.Is: invalid %v, missing %v, other %v", errors.Is(err, invalid), errors.Is(err, missing), errors.Is(err, other))
	}
	if e := New("no such sandbox", missing); e.Error() != "no such sandbox" || !errors.Is(e, missing) {
		t.Errorf("New: %q, Is %v", e, errors.Is(e, missing))
	}
}
