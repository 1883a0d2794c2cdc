// Package sandbox holds the Manager: the lifecycle and on-disk state of sandboxes.
package sandbox
