package isolate

import "github.com/opencontainers/runc/libcontainer"

// ErrNotExist is the error of Load for a container that does not exist.
var ErrNotExist = libcontainer.ErrNotExist
