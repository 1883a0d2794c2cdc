package images

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestImagesSaveLoad saves two images as an OCI archive, reads it with
// skopeo (an independent reader), and imports it into a fresh cache: the
// names, configs, history, files and whiteouts come back.
func TestImagesSaveLoad(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ctx := context.Background()
	base := fixture.LayerFromEntries(t, []fixture.Entry{
		{Name: "app/", Type: '5'},
		{Name: "app/keep", Data: []byte("kept")},
		{Name: "app/drop", Data: []byte("dropped")},
		{Name: "app/link", Type: '2', Linkname: "keep"},
		{Name: "bin/tool", Data: []byte("#!/bin/sh\n"), Mode: 0o755},
	})
	change := fixture.LayerFromEntries(t, []fixture.Entry{
		{Name: "app/.wh.drop"},
		{Name: "app/new", Data: []byte("new")},
	})
	img := fixture.NewImage(t, v1.Config{Cmd: []string{"/bin/tool"}, Env: []string{"A=1"}, WorkingDir: "/app"}, base, change)
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.History = []v1.History{{CreatedBy: "ADD app"}, {CreatedBy: "RUN rm drop"}}
	img, _ = mutate.ConfigFile(img, cf)
	src := imagesStore(t, imagecache.Options{})
	first, err := src.Pull(ctx, reg.Push(t, "save/app:1", img), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := src.Tag(ctx, first.Name, "save/app:2")
	if err != nil {
		t.Fatal(err)
	}

	archive := filepath.Join(t.TempDir(), "app.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Save(ctx, []string{first.Name, "save/app:2"}, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if entries, _ := os.ReadDir(filepath.Join(src.Root(), "tmp")); len(entries) != 0 {
		t.Errorf("save left %d entries in the store's tmp", len(entries))
	}

	// skopeo reads it as an OCI archive with both names.
	for _, name := range []string{imagecache.FamiliarName(first.Name), "save/app:2"} {
		out, err := exec.Command("skopeo", "inspect", "--config", "oci-archive:"+archive+":"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo inspect %s: %v\n%s", name, err, out)
		}
		var got v1.ConfigFile
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Config.Cmd, []string{"/bin/tool"}) || len(got.RootFS.DiffIDs) != 2 || len(got.History) != 2 {
			t.Errorf("skopeo sees %s as %+v", name, got)
		}
	}

	// A fresh cache imports it under the names it carries.
	dst := imagesStore(t, imagecache.Options{})
	loaded, err := dst.Import(ctx, archive, second.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Name != second.Name || !reflect.DeepEqual(loaded.Config.Cmd, first.Config.Cmd) || loaded.Config.WorkingDir != "/app" {
		t.Errorf("loaded %+v, want the config of %+v", loaded, first)
	}
	lines, err := dst.History(loaded.Name)
	if err != nil || len(lines) != 2 || lines[0].CreatedBy != "RUN rm drop" {
		t.Errorf("history after load: %+v %v", lines, err)
	}
	top, bottom := loaded.LayerDirs[1], loaded.LayerDirs[0]
	for p, want := range map[string]string{"app/keep": "kept", "app/drop": "dropped", "bin/tool": "#!/bin/sh\n"} {
		if got := imagesReadFile(t, filepath.Join(bottom, p)); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	if got := imagesReadFile(t, filepath.Join(top, "app/new")); got != "new" {
		t.Errorf("app/new: %q", got)
	}
	if link, _ := os.Readlink(filepath.Join(bottom, "app/link")); link != "keep" {
		t.Errorf("symlink: %q", link)
	}
	if st := imagesStat(t, filepath.Join(top, "app/drop")); st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("the whiteout of app/drop did not survive: mode %o", st.Mode)
	}
	if fi, err := os.Stat(filepath.Join(bottom, "bin/tool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/tool mode: %v %v", fi, err)
	}
	// Bad input: nothing to save, an unknown image.
	if err := src.Save(ctx, nil, f); err == nil {
		t.Error("save of no image succeeded")
	}
	if err := src.Save(ctx, []string{"no-such:image"}, f); err == nil {
		t.Error("save of a missing image succeeded")
	}
}
