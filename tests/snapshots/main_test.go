package snapshots

import (
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

func TestMain(m *testing.M) { harness.Main(m, "tests/snapshots") }
