package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// imagesInsecureRegistry serves a registry over plain HTTP on 127.0.0.2,
// which, unlike localhost and 127.0.0.1, is reached over HTTPS unless
// named with --insecure-registry. It returns host:port.
func imagesInsecureRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2 (the loopback network is needed): %v", err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().String()
}

// imagesPushInsecure pushes img to the registry at host as repoTag.
func imagesPushInsecure(t *testing.T, host, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref.String()
}

// sbx create takes --pull, --platform and --insecure-registry as sbx run
// does, and image gc keeps the layers of a sandbox whose overlay is not
// mounted (stopped, then the host rebooted) after its image was removed.
func TestImagesCreateFlagsAndGCOfStopped(t *testing.T) {
	h := harness.NewHost(t)
	host := imagesInsecureRegistry(t)
	ref := imagesPushInsecure(t, host, "fix/box:1", fixture.BusyboxImage(t))
	// Not in h.netns: the registry listens in this namespace. Sandboxes
	// without bridge networking touch no host network.
	direct := func(args ...string) harness.Result {
		return harness.RunSbx(t, "", append([]string{"--root", h.Root, "--run-root", h.Run}, args...)...)
	}
	if r := direct("create", "--pull", "never", ref); r.Code != 125 || !strings.Contains(r.Stderr, "not in the cache") {
		t.Fatalf("create --pull never of a missing image: exit %d %q", r.Code, r.Stderr)
	}
	if r := direct("create", "--pull", "sometimes", ref); r.Code != 125 || !strings.Contains(r.Stderr, "invalid pull policy") {
		t.Fatalf("create --pull sometimes: exit %d %q", r.Code, r.Stderr)
	}
	if r := direct("create", ref); r.Code != 125 {
		t.Fatalf("create from a plain-HTTP registry without --insecure-registry: exit %d %q", r.Code, r.Stderr)
	}
	other := "s390x"
	if runtime.GOARCH == other {
		other = "amd64"
	}
	if r := direct("create", "--insecure-registry", host, "--platform", "linux/"+other, ref); r.Code != 125 || !strings.Contains(r.Stderr, "not the requested --platform linux/"+other) {
		t.Fatalf("create --platform of another platform: exit %d %q", r.Code, r.Stderr)
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 0 {
		t.Fatalf("failed creates left sandboxes: %v", ids)
	}
	r := direct("create", "--insecure-registry", host, ref)
	if r.Code != 0 {
		t.Fatalf("create --insecure-registry: exit %d %q", r.Code, r.Stderr)
	}
	id := strings.TrimSpace(r.Stdout)
	h.Saw(id)
	var img sbx.Image
	if err := json.Unmarshal([]byte(h.Must(t, "image", "inspect", ref)), &img); err != nil || len(img.LayerDirs) != 1 {
		t.Fatalf("image inspect: %v %+v", err, img)
	}

	h.Must(t, "stop", id)
	// As after a reboot: the record stays, the overlay is gone (with the
	// sandbox's mount namespace, which its pin on the host keeps).
	imagesUnmountUnder(t, filepath.Join(h.Run, "mntns"))
	if r := h.Sbx(t, "", "start", id); r.Code == 0 || !strings.Contains(r.Stderr, "gone") {
		t.Fatalf("start of a sandbox whose root is gone: exit %d %q", r.Code, r.Stderr)
	}
	h.Must(t, "rmi", ref)
	if out := h.Must(t, "image", "gc"); !strings.Contains(out, "removed 0 layers") {
		t.Fatalf("gc with a stopped sandbox on record: %q", out)
	}
	if _, err := os.Stat(img.LayerDirs[0]); err != nil {
		t.Fatalf("the layer of a stopped sandbox was removed: %v", err)
	}
	h.Must(t, "rm", "-f", id)
	if out := h.Must(t, "image", "gc"); !strings.Contains(out, "removed 1 layers") {
		t.Fatalf("gc after rm: %q", out)
	}
}

// imagesUnmountUnder unmounts every mount below dir, deepest first.
func imagesUnmountUnder(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	if len(points) == 0 {
		t.Fatalf("no mounts below %s", dir)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			t.Fatalf("unmount %s: %v", p, err)
		}
	}
}

// sbx serve --insecure-registry applies to sandbox creation too, not only
// to the image API.
func TestImagesServeInsecureRegistry(t *testing.T) {
	host := imagesInsecureRegistry(t)
	ref := imagesPushInsecure(t, host, "fix/serve:1", fixture.BusyboxImage(t))
	p := harness.NewServeDirs(t)
	p.Log = &bytes.Buffer{}
	p.Cmd = exec.Command(harness.SbxBin, p.Args("--insecure-registry", host)...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := p.Client(t)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = p.Cmd.Process.Kill()
			_ = p.Cmd.Wait()
			t.Fatalf("sbx serve did not answer within 20s: %v\n%s", err, p.Log)
		}
	}
	ctx := context.Background()
	sb, err := c.Create(ctx, sbx.Options{Image: ref})
	if err != nil {
		p.Stop(t)
		t.Fatalf("create from %s through sbx serve --insecure-registry: %v", ref, err)
	}
	if err := c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Error(err)
	}
	p.Stop(t)
	harness.ServerAssertNoLeaks(t, p.RunRoot, p.Root, []string{sb.ID})
}

// With --host, image flags the REST API cannot carry are refused, not
// silently dropped.
func TestImagesRemoteRejectsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"pull", "--platform", "linux/arm64", "busybox"},
		{"pull", "--insecure-registry", "reg:5000", "reg:5000/x"},
		{"create", "--platform", "linux/arm64", "busybox"},
	} {
		r := harness.RunSbx(t, "", append([]string{"--host", "unix:///nonexistent/sbx.sock"}, args...)...)
		if r.Code != 125 || !strings.Contains(r.Stderr, "is not supported with --host") {
			t.Errorf("sbx --host ... %v: exit %d %q", args, r.Code, r.Stderr)
		}
	}
}

// An explicit --platform that a single-platform image does not match is an
// error, not silently ignored.
func TestImagesPlatformOfSingleImage(t *testing.T) {
	reg := fixture.StartRegistry(t)
	other := "arm64"
	if runtime.GOARCH == other {
		other = "amd64"
	}
	img := fixture.NewImageFor(t, v1.Platform{OS: "linux", Architecture: other}, v1.Config{}, imagesSmallLayer(t, "single"))
	ref := reg.Push(t, "single:1", img)
	ctx := context.Background()
	s := imagesStore(t, imagecache.Options{Platform: "linux/" + runtime.GOARCH})
	_, err := s.Pull(ctx, ref, nil)
	if !errors.Is(err, imagecache.ErrUnsupported) || !strings.Contains(err.Error(), "platform linux/"+other) {
		t.Fatalf("pull of a linux/%s image with --platform linux/%s: %v", other, runtime.GOARCH, err)
	}
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Fatalf("the refused pull stored %d images", len(imgs))
	}
	if _, err := imagesStore(t, imagecache.Options{Platform: "linux/" + other}).Pull(ctx, ref, nil); err != nil {
		t.Fatalf("pull with the matching --platform: %v", err)
	}
	if _, err := imagesStore(t, imagecache.Options{}).Pull(ctx, ref, nil); err != nil {
		t.Fatalf("pull without --platform: %v", err)
	}
}
