package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
)

// TestBuildPartHeadersTooLarge sends multipart build bodies whose first
// part's headers are too large, with no Content-Length (so that only the
// reading finds out): past the upload limit, and past multipart's own
// header limit within it. Both are 413 like any body too large, not 422.
func TestBuildPartHeadersTooLarge(t *testing.T) {
	_, hs := newTestServer(t, func(c *Config, _ *sandbox.HostConfig) { c.MaxUploadBytes = 256 << 10 })
	const boundary = "b0undary"
	cases := map[string]string{
		"past the upload limit": "X-Pad: " + strings.Repeat("x", 512<<10) + "\r\n",
		"too many headers":      strings.Repeat("X-Pad: x\r\n", 10001),
	}
	for name, headers := range cases {
		body := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + api.BuildContextPart + "\"\r\n" + headers + "\r\n"
		// A reader of its own: the request goes chunked, without a length.
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/v1/images/build", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(t, data) != api.CodeTooLarge {
			t.Errorf("%s: %d %s, want 413 %s", name, resp.StatusCode, data, api.CodeTooLarge)
		}
	}
}
