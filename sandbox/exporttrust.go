package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/egress/tlsca"
	"github.com/sbxrun/sbx/rootfs"
)

// An export leaves the egress CA out as a commit does: the files sbx
// wrote only for it (the CA alone, a bundle the image lacked, the
// directories made for them) are skipped, and a bundle of the image it
// was appended to is written with the image's content. The root's pack
// is written first, without its end-of-archive blocks, then those
// bundles and the end.

// exportTrust is the part of an export that concerns the egress CA.
type exportTrust struct {
	skip     map[string]bool   // root-relative paths sbx wrote for the CA
	restored map[string][]byte // root-relative bundle -> the image's content
}

// trustOfExport reads what sandbox sb's root holds of its egress CA; run
// it where the root is mounted. A sandbox without a CA gives nil.
func (h *Host) trustOfExport(sb *sbx.Sandbox) (*exportTrust, error) {
	skip := h.trustPaths(sb.ID)
	if len(skip) == 0 {
		return nil, nil
	}
	ca, err := tlsca.Load(h.egressStateDir(sb.ID))
	if err != nil {
		return nil, fmt.Errorf("export: read the sandbox's egress CA: %w", err)
	}
	var paths []string
	for rel := range skip {
		paths = append(paths, "/"+rel)
	}
	slices.Sort(paths)
	got, err := rootfs.WithoutTrustedCA(sb.RootPath, paths, ca.CertPEM())
	if err != nil {
		return nil, err
	}
	t := &exportTrust{skip: skip, restored: map[string][]byte{}}
	for p, data := range got {
		t.restored[strings.TrimPrefix(p, "/")] = data
	}
	return t, nil
}

// tarEnd is the size of a tar's end-of-archive marker: two zero blocks.
const tarEnd = 1024

// withheldEnd passes writes through but the last tarEnd bytes, so that
// entries can follow a finished tar.
type withheldEnd struct {
	w    io.Writer
	held []byte
}

func (t *withheldEnd) Write(p []byte) (int, error) {
	t.held = append(t.held, p...)
	if n := len(t.held) - tarEnd; n > 0 {
		if _, err := t.w.Write(t.held[:n]); err != nil {
			return 0, err
		}
		t.held = append(t.held[:0], t.held[n:]...)
	}
	return len(p), nil
}

// pack writes the root with packAs, the CA's files left out and the
// image's bundles restored.
func (t *exportTrust) pack(w io.Writer, root string, packAs func(io.Writer, string, func(string) bool) error) error {
	we := &withheldEnd{w: w}
	if err := packAs(we, root, func(rel string) bool { return exportSkip(rel) || t.skip[rel] }); err != nil {
		return err
	}
	if len(we.held) != tarEnd || !bytes.Equal(we.held, make([]byte, tarEnd)) {
		return errors.New("export: the root's archive does not end as a tar does")
	}
	tw := tar.NewWriter(w)
	names := make([]string, 0, len(t.restored))
	for rel := range t.restored {
		names = append(names, rel)
	}
	slices.Sort(names)
	now := time.Now()
	for _, rel := range names {
		data := t.restored[rel]
		hdr := &tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: now, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}
