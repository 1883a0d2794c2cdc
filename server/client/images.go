package client

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// PullImage pulls ref into the server's image cache. With a progress
// function it asks for NDJSON progress and calls it for every frame.
func (c *Client) PullImage(ctx context.Context, ref string, progress func(sbx.PullProgress)) (*sbx.Image, error) {
	var img sbx.Image
	if progress == nil {
		return &img, imageErr(c.Call(ctx, http.MethodPost, "/v1/images/pull", api.PullRequest{Ref: ref}, &img))
	}
	var got bool
	err := c.Stream(ctx, http.MethodPost, "/v1/images/pull?progress=1", api.PullRequest{Ref: ref}, 1<<20, func(line []byte) error {
		var f api.PullFrame
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("sbx server: bad pull frame: %w", err)
		}
		switch f.Type {
		case api.FrameProgress:
			if f.Progress != nil {
				progress(*f.Progress)
			}
		case api.FrameResult:
			if f.Image != nil {
				img, got = *f.Image, true
			}
		case api.FrameError:
			if f.Error != nil {
				return &Error{Status: errorStatus(f.Error.Code), Code: f.Error.Code, Message: f.Error.Message}
			}
		}
		return nil
	})
	if err == nil && !got {
		err = errors.New("sbx server: pull stream ended without a result")
	}
	return &img, imageErr(err)
}

// errorStatus is the HTTP status of an error code, for errors that arrive
// inside a stream (whose status was 200).
func errorStatus(code string) int {
	switch code {
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeInvalid, api.CodeForbidden:
		return http.StatusUnprocessableEntity
	case api.CodeRegistryAuth, api.CodeRegistryUnreachable, api.CodeBadGateway:
		return http.StatusBadGateway
	case api.CodeLimit:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// ListImages lists the server's cached images.
func (c *Client) ListImages(ctx context.Context) ([]sbx.Image, error) {
	var l api.ImageList
	return l.Images, c.Call(ctx, http.MethodGet, "/v1/images", nil, &l)
}

// RemoveImage removes an image from the server's cache.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	return imageErr(c.Call(ctx, http.MethodDelete, "/v1/images/"+ref, nil, nil))
}

// InspectImage shows one image of the server's cache in full.
func (c *Client) InspectImage(ctx context.Context, ref string) (*sbx.Image, error) {
	var img sbx.Image
	return &img, imageErr(c.Call(ctx, http.MethodGet, "/v1/images/"+url.PathEscape(ref), nil, &img))
}

// GCImages removes the layers of the server's cache that no image and no
// sandbox uses.
func (c *Client) GCImages(ctx context.Context) (*sbx.ImageGCReport, error) {
	var rep sbx.ImageGCReport
	return &rep, c.Call(ctx, http.MethodPost, "/v1/images/gc", nil, &rep)
}

// ImportImage uploads an image archive into the server's cache: o.Archive,
// or the file o.Path (a directory, an OCI layout, is sent as a tar made on
// the fly). The context alone bounds the upload; progress is not reported.
func (c *Client) ImportImage(ctx context.Context, o sbx.ImportOptions) (*sbx.Image, error) {
	body := o.Archive
	if o.Path != "" {
		// The same check as a local import's, before anything is sent.
		isDir, err := sbx.CheckImportPath(o.Path)
		if err != nil {
			return nil, err
		}
		if isDir {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(tarDir(pw, o.Path)) }()
			defer pr.Close()
			body = pr
		} else {
			f, err := os.Open(o.Path)
			if err != nil {
				return nil, fmt.Errorf("import: %w", err)
			}
			defer f.Close()
			body = f
		}
	}
	if body == nil {
		return nil, fmt.Errorf("%w: import needs a path or an archive", sbx.ErrInvalid)
	}
	path := "/v1/images/import"
	if o.Name != "" {
		path += "?name=" + url.QueryEscape(o.Name)
	}
	resp, err := c.Do(ctx, http.MethodPost, path, body, "application/x-tar")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var img sbx.Image
	if err := json.NewDecoder(io.LimitReader(resp.Body, c.opts.MaxReplyBytes)).Decode(&img); err != nil {
		return nil, fmt.Errorf("sbx server: bad reply to an import: %w", err)
	}
	return &img, nil
}

// tarDir writes the directories and regular files under dir to w as a tar
// with paths relative to dir (an OCI archive when dir is an OCI layout).
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return fmt.Errorf("tar %s: %s is neither a file nor a directory", dir, rel)
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// imageErr makes a 404 of an image route sbx.ErrImageNotFound.
func imageErr(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return fmt.Errorf("%w (%w)", err, sbx.ErrImageNotFound)
	}
	return err
}

// TagImage gives an image of the server's cache a further name.
func (c *Client) TagImage(ctx context.Context, source, target string) (*sbx.Image, error) {
	var img sbx.Image
	return &img, imageErr(c.Call(ctx, http.MethodPost, "/v1/images/tag", api.TagRequest{Source: source, Target: target}, &img))
}

// ImageHistory says how an image of the server's cache was built, newest
// step first.
func (c *Client) ImageHistory(ctx context.Context, ref string) ([]sbx.ImageHistoryEntry, error) {
	var h api.ImageHistory
	return h.History, imageErr(c.Call(ctx, http.MethodGet, "/v1/images/history?ref="+url.QueryEscape(ref), nil, &h))
}

// SaveImage writes images of the server's cache to w as one OCI archive.
// The context alone bounds the download; a server that fails midway
// aborts it, which is an error here.
func (c *Client) SaveImage(ctx context.Context, refs []string, w io.Writer) error {
	data, err := json.Marshal(api.SaveRequest{Refs: refs})
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/images/save", bytes.NewReader(data), api.ContentTypeJSON)
	if err != nil {
		return imageErr(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, api.ContentTypeTar) {
		return fmt.Errorf("sbx server: save replied %q, not an archive", ct)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("sbx server: receive the archive: %w", err)
	}
	return nil
}
