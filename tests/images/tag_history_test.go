package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestImagesTagAndHistory: a tag is a second name for the same layers, and
// history pairs the config's steps with the layers they made.
func TestImagesTagAndHistory(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ctx := context.Background()
	bottom, top := imagesSmallLayer(t, "bottom"), imagesSmallLayer(t, "top")
	img := fixture.NewImage(t, v1.Config{Cmd: []string{"sh"}}, bottom, top)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.History = []v1.History{{CreatedBy: "ADD rootfs /"}, {CreatedBy: "ENV X=1", EmptyLayer: true}, {CreatedBy: "RUN make", Comment: "built"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	s := imagesStore(t, imagecache.Options{})
	ref := reg.Push(t, "hist:1", img)
	pulled, err := s.Pull(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}

	lines, err := s.History(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ by, diffID string }{{"RUN make", pulled.DiffIDs[1]}, {"ENV X=1", ""}, {"ADD rootfs /", pulled.DiffIDs[0]}}
	if len(lines) != len(want) {
		t.Fatalf("history has %d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		if lines[i].CreatedBy != w.by || lines[i].DiffID != w.diffID || (w.diffID != "") != (lines[i].SizeBytes > 0) {
			t.Errorf("line %d: %+v, want %s over %q", i, lines[i], w.by, w.diffID)
		}
	}
	if lines[0].Comment != "built" {
		t.Errorf("comment lost: %+v", lines[0])
	}

	tagged, err := s.Tag(ctx, ref, "local/app:v2")
	if err != nil {
		t.Fatal(err)
	}
	if tagged.Name != "index.docker.io/local/app:v2" || tagged.Digest != pulled.Digest || len(tagged.LayerDirs) != 2 || tagged.LayerDirs[1] != pulled.LayerDirs[1] {
		t.Fatalf("tagged %+v, want the layers of %+v", tagged, pulled)
	}
	if imgs, _ := s.List(); len(imgs) != 2 {
		t.Errorf("after tag the cache lists %d images, want 2", len(imgs))
	}
	// Removing the first name keeps the second.
	if _, err := s.Remove(ctx, ref); err != nil {
		t.Fatal(err)
	}
	again, err := s.Resolve("local/app:v2")
	if err != nil || again.Digest != pulled.Digest {
		t.Fatalf("the tag went with the original name: %v %v", again, err)
	}
	// A tag moves: the old image of that name loses it.
	other, err := s.Pull(ctx, reg.Push(t, "other:1", fixture.NewImage(t, v1.Config{}, imagesSmallLayer(t, "other"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tag(ctx, other.Name, "local/app:v2"); err != nil {
		t.Fatal(err)
	}
	if moved, _ := s.Resolve("local/app:v2"); moved == nil || moved.Digest != other.Digest {
		t.Errorf("the tag did not move to %s: %+v", other.Digest, moved)
	}
	if imgs, _ := s.List(); len(imgs) != 2 {
		t.Errorf("after moving a tag the cache lists %d images, want 2", len(imgs))
	}
	// Bad input changes nothing.
	if _, err := s.Tag(ctx, "no-such:image", "x:1"); !errors.Is(err, imagecache.ErrNotFound) {
		t.Errorf("tag of a missing image: %v", err)
	}
	if _, err := s.Tag(ctx, other.Name, "x@sha256:"+string(bytes.Repeat([]byte("a"), 64))); err == nil {
		t.Error("a digest was accepted as a tag")
	}
	if _, err := s.Tag(ctx, other.Name, "Bad Name"); err == nil {
		t.Error("an invalid name was accepted as a tag")
	}
	if imgs, _ := s.List(); len(imgs) != 2 {
		t.Errorf("bad tags changed the cache: %d images", len(imgs))
	}

	// A commit adds its own step on top of the base's history.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	_ = tw.WriteHeader(&tar.Header{Name: "new", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("new"))
	_ = tw.Close()
	base, err := s.Resolve("local/app:v2")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := s.Commit(ctx, base, "committed:1", &layer, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines, err = s.History(committed.Name)
	if err != nil || len(lines) != 2 || lines[0].CreatedBy != "sbx commit" || lines[0].DiffID != committed.DiffIDs[1] || lines[1].DiffID != base.DiffIDs[0] {
		t.Errorf("history of a commit: %+v %v", lines, err)
	}
}
