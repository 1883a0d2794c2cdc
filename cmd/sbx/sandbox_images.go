package main

import "github.com/sbxrun/sbx/sandbox"

// imageSource is the image store sandboxes are created from. Until the
// image cache is wired in, only --rootfs works.
func imageSource() (sandbox.ImageSource, error) { return nil, nil }
