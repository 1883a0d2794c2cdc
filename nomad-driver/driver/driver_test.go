package driver

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
)

// newHarness serves the driver over Nomad's plugin gRPC, as a client
// would see it, configured with pc.
func newHarness(t *testing.T, pc PluginConfig) *dtestutil.DriverHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := dtestutil.NewDriverHarness(t, New(ctx, testlog.HCLogger(t)))
	var data []byte
	if err := base.MsgPackEncode(&data, &pc); err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(&base.Config{PluginConfig: data}); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestFingerprintHealthyAsRoot(t *testing.T) {
	h := newHarness(t, PluginConfig{Root: t.TempDir(), RunRoot: t.TempDir(), PullPolicy: "missing", GCInterval: "0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := h.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fp := <-ch
	if fp == nil {
		t.Fatal("no fingerprint")
	}
	if fp.Health != drivers.HealthStateHealthy {
		t.Fatalf("health %s: %s", fp.Health, fp.HealthDescription)
	}
	if v, ok := fp.Attributes["driver.sbx"].GetBool(); !ok || !v {
		t.Errorf("driver.sbx attribute %v", fp.Attributes["driver.sbx"])
	}
}

func TestSetConfigRejectsBadConfig(t *testing.T) {
	d := New(context.Background(), testlog.HCLogger(t))
	var data []byte
	if err := base.MsgPackEncode(&data, &PluginConfig{Root: "relative", RunRoot: "/run/x", PullPolicy: "missing"}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetConfig(&base.Config{PluginConfig: data}); err == nil {
		t.Fatal("SetConfig took a relative root")
	}
}

func TestCapabilities(t *testing.T) {
	h := newHarness(t, PluginConfig{Root: t.TempDir(), RunRoot: t.TempDir(), PullPolicy: "missing", GCInterval: "0"})
	caps, err := h.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	if !caps.SendSignals || !caps.Exec || caps.FSIsolation != "image" {
		t.Errorf("capabilities %+v", caps)
	}
}
