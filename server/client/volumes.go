package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

var _ sbx.Volumes = (*Client)(nil)

func volumeURL(name string) string { return "/v1/volumes/" + url.PathEscape(name) }

// CreateVolume makes a named volume on the server (POST /v1/volumes).
func (c *Client) CreateVolume(ctx context.Context, spec sbx.VolumeSpec) (*sbx.VolumeInfo, error) {
	var v sbx.VolumeInfo
	return &v, c.Call(ctx, http.MethodPost, "/v1/volumes", spec, &v)
}

// ListVolumes lists the server's volumes.
func (c *Client) ListVolumes(ctx context.Context) ([]*sbx.VolumeInfo, error) {
	var l api.VolumeList
	return l.Volumes, c.Call(ctx, http.MethodGet, "/v1/volumes", nil, &l)
}

// InspectVolume returns one volume.
func (c *Client) InspectVolume(ctx context.Context, name string) (*sbx.VolumeInfo, error) {
	var v sbx.VolumeInfo
	return &v, c.Call(ctx, http.MethodGet, volumeURL(name), nil, &v)
}

// RemoveVolume removes a volume no sandbox has.
func (c *Client) RemoveVolume(ctx context.Context, name string) error {
	return c.Call(ctx, http.MethodDelete, volumeURL(name), nil, nil)
}

// PruneVolumes removes every volume no sandbox has.
func (c *Client) PruneVolumes(ctx context.Context) (*sbx.VolumePruneReport, error) {
	var r sbx.VolumePruneReport
	return &r, c.Call(ctx, http.MethodPost, "/v1/volumes/prune", nil, &r)
}
