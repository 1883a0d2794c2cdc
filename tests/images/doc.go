// Package images holds the root-only tests of images: pulls from a registry
// on 127.0.0.1, the store and its gc, import, save/load, commit, hostile
// layers and builds. Its TestMain is harness.Main (tests/internal/harness).
package images
