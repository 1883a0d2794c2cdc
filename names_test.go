package sbx

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestValidNameMatchesTheRule checks validName against the rule written as
// a regexp, on names at and around the edges.
func TestValidNameMatchesTheRule(t *testing.T) {
	for _, max := range []int{64, 128} {
		re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,` + strconv.Itoa(max-1) + `}$`)
		names := []string{"", "a", "Z", "0", "-a", ".a", "_a", "a-b.c_d", "a b", "a/b", "a\n", "é", "a\x00",
			strings.Repeat("a", max-1), strings.Repeat("a", max), strings.Repeat("a", max+1), "a" + strings.Repeat("-", max-1)}
		for _, n := range names {
			if got, want := validName(n, max), re.MatchString(n); got != want {
				t.Errorf("validName(%q, %d) = %v, want %v", n, max, got, want)
			}
		}
	}
	if ValidPoolName(strings.Repeat("p", 65)) == nil || ValidPoolName("pool-1") != nil {
		t.Error("ValidPoolName: 65 bytes must be refused, pool-1 accepted")
	}
	if ValidSnapshotName(strings.Repeat("s", 129)) == nil || ValidSnapshotName("snap.1") != nil {
		t.Error("ValidSnapshotName: 129 bytes must be refused, snap.1 accepted")
	}
}
