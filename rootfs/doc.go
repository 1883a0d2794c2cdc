// Package rootfs prepares the per-sandbox root filesystem: an overlay over read-only lower layers with a size-capped writable layer.
package rootfs
