package main

import (
	"fmt"
	"os"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox"
)

// imageSource is the image cache sandboxes are created from, under
// <--root>/images. Missing images are pulled; SBX_PULL=never|always|missing
// changes that.
func imageSource() (sandbox.ImageSource, error) {
	policy, err := imagecache.ParsePullPolicy(os.Getenv("SBX_PULL"))
	if err != nil {
		return nil, fmt.Errorf("SBX_PULL: %w", err)
	}
	s, err := openImageStore(nil)
	if err != nil {
		return nil, err
	}
	return sandbox.NewImageSource(s, policy), nil
}
