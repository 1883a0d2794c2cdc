package cgroup

import (
	"fmt"
	"os"
	"time"
)

// PrivateParent gives this process (a test binary, a benchmark) a parent
// cgroup of its own, named prefix-PID, so that the sandboxes it and the sbx
// processes it starts create are apart from every other sbx user's on the
// host, and the parent's budget can be changed without touching theirs. A
// process whose $SBX_CGROUP_PARENT is already set (a helper re-run by a
// test) keeps it.
//
// The returned release removes the parent from every hierarchy once its
// last sandbox is gone, waiting up to 10 s for dying tasks to leave it;
// it does nothing when the parent was not this process's to make.
func PrivateParent(prefix string) (release func() error) {
	if os.Getenv(ParentEnv) != "" {
		return func() error { return nil }
	}
	os.Setenv(ParentEnv, fmt.Sprintf("%s-%d", prefix, os.Getpid()))
	return func() error {
		if os.Geteuid() != 0 {
			return nil
		}
		return RemoveParentWhenEmpty(10 * time.Second)
	}
}
