package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Export writes the root file system of a sandbox of the server to w as a
// tar. The context alone bounds the download; a server that fails midway
// aborts it, which is an error here.
func (c *Client) Export(ctx context.Context, ref string, w io.Writer) error {
	resp, err := c.Do(ctx, http.MethodGet, sandboxURL(ref, "/export"), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("sbx server: receive the export: %w", err)
	}
	return nil
}
