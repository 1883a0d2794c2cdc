package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/client"
)

// The code of a local host's examples (package sandbox), against sbx
// serve: the client implements the same interfaces and needs no cgo.
func Example() {
	c, err := client.New(os.Getenv("SBX_HOST"), client.Options{Token: os.Getenv("SBX_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var s sbx.Sandboxes = c // or a *sandbox.Host
	ctx := context.Background()

	// A one-shot run: create, exec, remove, with the same report.
	opts := sbx.RunOptions{Options: sbx.Options{Rootfs: os.Getenv("SBX_EXAMPLE_ROOTFS"), Limits: sbx.Limits{MemoryBytes: 64 << 20}}, Stdout: os.Stdout}
	opts.Cmd = []string{"sh", "-c", "echo one-shot; exit 3"}
	rep, err := s.Run(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Status, rep.ExitCode)

	// A long-lived sandbox.
	sb, err := s.Create(ctx, sbx.Options{Rootfs: os.Getenv("SBX_EXAMPLE_ROOTFS"), Env: []string{"GREETING=hello"}})
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Exec(ctx, sb.ID, sbx.ExecRequest{Command: "echo $GREETING from the server > /tmp/out; cat /tmp/out"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
	dst, err := os.MkdirTemp("", "sbx-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dst)
	if err := s.CopyFrom(ctx, sb.ID, "/tmp/out", filepath.Join(dst, "out")); err != nil {
		log.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dst, "out"))
	fmt.Print("copied: ", string(data))
	if err := s.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		log.Fatal(err)
	}
	list, err := s.List(ctx, sbx.Filter{})
	fmt.Println(len(list), err)
	// Output:
	// one-shot
	// nonzero_exit 3
	// hello from the server
	// copied: hello from the server
	// 0 <nil>
}
