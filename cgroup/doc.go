// Package cgroup detects the host's cgroup mode, manages the parent cgroup of all sandboxes and converts and reads limits and usage.
package cgroup
