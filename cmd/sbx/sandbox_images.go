package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox"
)

// imageSource is the image cache sandboxes are created from, under
// <--root>/images, opened with the image flags f (nil: none). Missing
// images are pulled as pull says (missing, always, never); an empty pull
// falls back to SBX_PULL, then to missing.
func imageSource(f *imageFlags, pull string) (sandbox.ImageSource, error) {
	policy, err := pullPolicy(pull)
	if err != nil {
		return nil, err
	}
	s, err := openImageStore(f)
	if err != nil {
		return nil, err
	}
	return sandbox.NewImageSource(s, policy), nil
}

// pullPolicy parses a --pull value; empty means SBX_PULL, then missing.
func pullPolicy(pull string) (imagecache.PullPolicy, error) {
	if pull != "" {
		return imagecache.ParsePullPolicy(pull)
	}
	policy, err := imagecache.ParsePullPolicy(os.Getenv("SBX_PULL"))
	if err != nil {
		return "", fmt.Errorf("SBX_PULL: %w", err)
	}
	return policy, nil
}

// rejectRemoteImageFlags refuses image flags the REST API has no field
// for, rather than silently dropping them on the way to --host.
func rejectRemoteImageFlags(cmd *cobra.Command, names ...string) error {
	if remoteHost == "" {
		return nil
	}
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("--%s is not supported with --host: the server pulls with its own options (start sbx serve with --insecure-registry, or pull on the server host with sbx pull --%s)", n, n)}
		}
	}
	return nil
}
