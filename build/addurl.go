package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
)

// maxDownload caps one file ADD downloads.
const maxDownload = 8 << 30

// downloadTimeout bounds one ADD download.
const downloadTimeout = 30 * time.Minute

// download is a file ADD fetched from a URL.
type download struct {
	url, name, file, sum string
	size                 int64
}

// addURLs runs an ADD of URLs: each is downloaded by the builder (only
// when the build has a network: sbx build --network bridge), written
// with mode 0600 (or --chmod), and not extracted. The cache key is the
// content's hash, so a changed file rebuilds and an unchanged one does not.
func (b *builder) addURLs(ctx context.Context, s *stageState, cs copySpec, dest, user string, chmod *chmod) (bool, error) {
	if b.o.Network != sbx.NetworkBridge {
		return false, fmt.Errorf("ADD of a URL downloads it, and this build has no network: give sbx build --network bridge, or download it in a RUN step")
	}
	for _, src := range cs.srcs {
		if !isRemote(src) {
			return false, fmt.Errorf("%q: give the URLs and the local files of ADD on separate lines", src)
		}
	}
	dir, err := b.eng.TempDir(false)
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	var dls []download
	for i, src := range cs.srcs {
		d, err := fetch(ctx, src, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			return false, err
		}
		if cs.checksum != "" {
			if want := strings.TrimPrefix(cs.checksum, "sha256:"); want != d.sum {
				return false, fmt.Errorf("%s: --checksum=%s does not match the download's sha256:%s", src, cs.checksum, d.sum)
			}
		}
		dls = append(dls, d)
	}
	sums := make([]string, len(dls))
	for i, d := range dls {
		sums[i] = d.url + " " + d.sum
	}
	key := chain(s.key, struct {
		Op, Dest, User, Chmod string
		Files                 []string
	}{"ADD-URL", dest, user, cs.chmod, sums})
	o := sbx.Options{User: user, Workdir: "/"}
	mode := tarMode(chmod.apply(0o600, false))
	return b.inSandbox(ctx, s, key, "ADD "+strings.Join(sums, " ")+" in "+dest, o, func(_ *sbx.Sandbox, cl *client.Client) error {
		dir, rename := path.Clean(dest), ""
		if len(dls) == 1 && !strings.HasSuffix(dest, "/") {
			if l, err := cl.List(ctx, dest); err != nil || l.Path == "" {
				dir, rename = path.Dir(dest), path.Base(dest)
			}
		}
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			for _, d := range dls {
				name := d.name
				if rename != "" {
					name = rename
				}
				if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: d.size, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
					pw.CloseWithError(err)
					return
				}
				f, err := os.Open(d.file)
				if err != nil {
					pw.CloseWithError(err)
					return
				}
				_, err = io.Copy(tw, io.LimitReader(f, d.size))
				f.Close()
				if err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.CloseWithError(tw.Close())
		}()
		_, err := cl.PutArchive(ctx, dir, pr)
		pr.CloseWithError(io.ErrClosedPipe)
		return err
	})
}

// fetch downloads u into the file at p.
func fetch(ctx context.Context, u, p string) (download, error) {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return download{}, fmt.Errorf("%q is not an http or https URL", u)
	}
	name := path.Base(pu.Path)
	if name == "/" || name == "." || name == "" {
		name = "index.html"
	}
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return download{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return download{}, fmt.Errorf("download %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return download{}, fmt.Errorf("download %s: %s", u, resp.Status)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return download{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, maxDownload+1))
	if err != nil {
		return download{}, fmt.Errorf("download %s: %w", u, err)
	}
	if n > maxDownload {
		return download{}, fmt.Errorf("download %s: larger than %d bytes", u, int64(maxDownload))
	}
	return download{url: u, name: name, file: p, sum: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}
