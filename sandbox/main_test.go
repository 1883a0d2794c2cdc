package sandbox

import "runtime"

// libcontainer runs a goroutine that joins a container's mount namespace on
// a locked thread and lets the thread die with it; were that the main
// thread, Go would keep it wedged in the namespace, and /proc/self (which
// follows the main thread) would show the container's mounts. Keeping the
// main goroutine on the main thread prevents that.
func init() { runtime.LockOSThread() }
