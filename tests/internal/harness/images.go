package harness

import (
	"os"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/sbxrun/sbx/tests/fixture"
)

// ImagesWriteLayout writes img as an OCI layout with a ref name annotation.
func ImagesWriteLayout(t *testing.T, dir, refName string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refName})); err != nil {
		t.Fatal(err)
	}
}

// ImagesTarFile writes the files under dir as a tar archive at dst.
func ImagesTarFile(t *testing.T, dir, dst string) {
	t.Helper()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fixture.TarDir(f, dir); err != nil {
		t.Fatal(err)
	}
}
