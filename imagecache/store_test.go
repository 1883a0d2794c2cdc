package imagecache

import "testing"

// TestMountinfoPaths checks that paths in mountinfo are matched after the
// kernel's octal escapes (space, tab, backslash; ',' and '=' in options)
// and overlay's backslash escapes of ':' are undone.
func TestMountinfoPaths(t *testing.T) {
	const text = `22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
91 22 0:50 / /r\040oot/merged rw,relatime - overlay overlay rw,lowerdir=/r\040oot/layers/b\134:c:/r\040oot/layers/a\054d,upperdir=/r\040oot/up,workdir=/r\040oot/work
92 22 0:51 / /mnt/x rw - overlay overlay rw,lowerdir+=/s/layers/e,lowerdir+=/s/layers/f,datadir+=/s/layers/g
`
	has := mountinfoPaths(text)
	for _, p := range []string{"/r oot/merged", "/r oot/layers/b:c", "/r oot/layers/a,d", "/r oot/up", "/r oot/work", "/s/layers/e", "/s/layers/f", "/s/layers/g", "/mnt/x"} {
		if !has(p) {
			t.Errorf("%q not found in mountinfo", p)
		}
	}
	for _, p := range []string{"/r oot/layers/b", "/r oot/layers", "/r\\040oot/up", "/s/layers", "/r oot/layers/a"} {
		if has(p) {
			t.Errorf("%q matched but is not mounted", p)
		}
	}
}
