package main

import "runtime"

// libcontainer joins a container's mount namespace from a goroutine on a
// locked thread and lets that thread die with the goroutine. Were that the
// main thread, Go would keep it wedged in the container's namespace, and
// everything that reads /proc/self (which follows the main thread), such as
// the mount table used to unmount a sandbox's root, would see the
// container's mounts instead of the host's; the wedged thread would also
// keep that sandbox's mounts alive. Keeping the main goroutine on the main
// thread prevents it, which matters for long-running processes (sbx serve,
// ttl-reaper) that start several sandboxes.
func init() { runtime.LockOSThread() }
