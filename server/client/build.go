package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/build/contexttar"
	"github.com/sbxrun/sbx/server/api"
)

var _ sbx.Builder = (*Client)(nil)

// Build builds an image on the server (POST /v1/images/build): the context
// directory goes as a tar stream, minus what its .dockerignore excludes,
// as docker build sends it, after the secrets when there are some (a
// multipart body: api.BuildSecretsPart); the build's output is written to
// o.Output as it arrives. The context alone bounds the call.
func (c *Client) Build(ctx context.Context, o sbx.BuildOptions) (*sbx.BuildResult, error) {
	if o.ContextDir == "" {
		return nil, fmt.Errorf("%w: a build needs a context directory", sbx.ErrInvalid)
	}
	if o.DockerfileText != "" {
		return nil, fmt.Errorf("%w: a remote build reads its Dockerfile from the context (give its path)", sbx.ErrInvalid)
	}
	if len(o.SSH) > 0 {
		return nil, fmt.Errorf("%w: --ssh forwards an ssh agent of this host, which a remote build cannot reach; build on the server's host", sbx.ErrUnsupported)
	}
	df := o.Dockerfile
	if df == "" {
		df = filepath.Join(o.ContextDir, "Dockerfile")
	}
	rel, err := filepath.Rel(o.ContextDir, df)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%w: a remote build needs its Dockerfile inside the context directory (%s)", sbx.ErrInvalid, o.ContextDir)
	}
	q := url.Values{}
	for k, v := range map[string]string{"tag": o.Tag, "target": o.Target, "network": o.Network, "pull": o.Pull, "dockerfile": filepath.ToSlash(rel)} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.NoCache {
		q.Set("no_cache", strconv.FormatBool(true))
	}
	for k, v := range o.BuildArgs {
		q.Add("build_arg", k+"="+v)
	}
	pr, pw := io.Pipe()
	contentType := "application/x-tar"
	if len(o.Secrets) > 0 {
		mw := multipart.NewWriter(pw)
		contentType = mw.FormDataContentType()
		go func() { pw.CloseWithError(writeBuildParts(mw, o.Secrets, o.ContextDir, df)) }()
	} else {
		go func() { pw.CloseWithError(contexttar.Write(pw, o.ContextDir, df)) }()
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/images/build?"+q.Encode(), pr, contentType)
	pr.CloseWithError(errors.New("build request ended"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res *sbx.BuildResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var f api.BuildFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, fmt.Errorf("sbx server: bad build frame: %w", err)
		}
		switch f.Type {
		case api.FrameOutput:
			if o.Output != nil {
				if _, err := io.WriteString(o.Output, f.Output); err != nil {
					return nil, err
				}
			}
		case api.FrameResult:
			res = f.Build
		case api.FrameError:
			if f.Error != nil {
				return nil, imageErr(&Error{Status: errorStatus(f.Error.Code), Code: f.Error.Code, Message: f.Error.Message})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sbx server: read the build's stream: %w", err)
	}
	if res == nil {
		return nil, errors.New("sbx server: the build's stream ended without a result")
	}
	return res, nil
}

// writeBuildParts writes a build request with secrets: the secrets part (a
// JSON object of base64 values by id), then the context's tar stream.
func writeBuildParts(mw *multipart.Writer, secrets map[string]string, dir, dockerfile string) error {
	raw := make(map[string][]byte, len(secrets))
	for id, v := range secrets {
		raw[id] = []byte(v)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+api.BuildSecretsPart+`"`)
	h.Set("Content-Type", "application/json")
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(part).Encode(raw); err != nil {
		return err
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+api.BuildContextPart+`"; filename="context.tar"`)
	h.Set("Content-Type", "application/x-tar")
	if part, err = mw.CreatePart(h); err != nil {
		return err
	}
	if err := contexttar.Write(part, dir, dockerfile); err != nil {
		return err
	}
	return mw.Close()
}

var _ sbx.BuildCachePruner = (*Client)(nil)

// PruneBuildCache removes the server's build cache (POST
// /v1/images/build/prune), as sbx build prune does on its host.
func (c *Client) PruneBuildCache(ctx context.Context) (*sbx.BuildPruneReport, error) {
	var rep sbx.BuildPruneReport
	if err := c.Call(ctx, http.MethodPost, "/v1/images/build/prune", nil, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}
