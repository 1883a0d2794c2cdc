package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox"
)

// The examples run a busybox root file system ($SBX_EXAMPLE_ROOTFS, any
// unpacked root directory works) with their state in a temporary
// directory. A program that runs them calls sandbox.Init first in main.

// One command in a fresh sandbox with limits, and what it used.
func Example_run() {
	dir, err := os.MkdirTemp("", "sbx-example-")
	if err != nil {
		log.Fatal(err)
	}
	// Sandboxes in private user namespaces (the default) reach their run
	// root by path: the directories above it must be traversable.
	if err := os.Chmod(dir, 0o711); err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	host, err := sandbox.Open(sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()

	var out bytes.Buffer
	opts := sbx.RunOptions{
		Options: sbx.Options{
			Rootfs:   os.Getenv("SBX_EXAMPLE_ROOTFS"),
			Hostname: "job",
			Limits:   sbx.Limits{MemoryBytes: 64 << 20, CPUs: 1, Pids: 32},
		},
		Timeout: time.Minute,
		Stdout:  &out,
	}
	opts.Cmd = []string{"sh", "-c", "echo hello from $(hostname); exit 3"}
	rep, err := host.Run(context.Background(), opts)
	if err != nil {
		log.Fatal(err) // sbx itself failed; the command's failures are in the report
	}
	fmt.Print(out.String())
	fmt.Println(rep.Status, rep.ExitCode, rep.Signal == "", rep.MemoryPeakBytes > 0, rep.TimedOut)
	// Output:
	// hello from job
	// nonzero_exit 3 true true false
}

// A long-lived sandbox: commands, a shell session that keeps its state,
// files out, and removal.
func Example_sandbox() {
	dir, err := os.MkdirTemp("", "sbx-example-")
	if err != nil {
		log.Fatal(err)
	}
	// Sandboxes in private user namespaces (the default) reach their run
	// root by path: the directories above it must be traversable.
	if err := os.Chmod(dir, 0o711); err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	host, err := sandbox.Open(sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()
	ctx := context.Background()

	sb, err := host.Create(ctx, sbx.Options{
		Rootfs: os.Getenv("SBX_EXAMPLE_ROOTFS"),
		Env:    []string{"GREETING=hello"},
		Limits: sbx.Limits{MemoryBytes: 128 << 20, Pids: 64},
		Labels: map[string]string{"job": "example"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := useSandbox(ctx, host, sb.ID, dir); err != nil {
		log.Fatal(err)
	}
	if err := host.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		log.Fatal(err)
	}
	_, err = host.Get(ctx, sb.ID)
	fmt.Println("removed:", errors.Is(err, sbx.ErrNotFound))
	// Output:
	// hello world
	// 42 /tmp
	// made inside
	// removed: true
}

// useSandbox works with sandbox id through the contract alone, so the same
// code runs against a local host and against sbx serve.
func useSandbox(ctx context.Context, s sbx.Sandboxes, id, dir string) error {
	res, err := s.Exec(ctx, id, sbx.ExecRequest{Command: "echo $GREETING world; echo made inside > /tmp/out"}, nil)
	if err != nil {
		return err
	}
	fmt.Print(res.Stdout)
	// Sessions, files and the editor are the executor's API: reach it
	// with Dial and executor/client.
	ex := client.NewWithDialer(func(ctx context.Context) (net.Conn, error) { return s.Dial(ctx, id) }, client.Options{})
	defer ex.Close()
	sess, err := ex.CreateSession(ctx, execapi.SessionRequest{})
	if err != nil {
		return err
	}
	if _, err := ex.Run(ctx, sess.ID, execapi.RunRequest{Command: "cd /tmp && N=42"}); err != nil {
		return err
	}
	run, err := ex.Run(ctx, sess.ID, execapi.RunRequest{Command: "echo $N $(pwd)"})
	if err != nil {
		return err
	}
	fmt.Print(run.Output)
	if err := s.CopyFrom(ctx, id, "/tmp/out", filepath.Join(dir, "out")); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, "out"))
	fmt.Print(string(data))
	return err
}

// A registry-free job: import a root file system tarball as an image,
// run the job's steps in a sandbox of it (pull never: nothing is fetched),
// copy the artifact out, remove everything. The imported short name
// ci-base:1 is stored as index.docker.io/library/ci-base:1.
func Example_offline() {
	dir, err := os.MkdirTemp("", "sbx-example-")
	if err != nil {
		log.Fatal(err)
	}
	// Sandboxes in private user namespaces (the default) reach their run
	// root by path: the directories above it must be traversable.
	if err := os.Chmod(dir, 0o711); err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	host, err := sandbox.Open(sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()
	ctx := context.Background()

	// The tarball a CI system ships (here made from the example's root).
	tarball := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", os.Getenv("SBX_EXAMPLE_ROOTFS"), "-cf", tarball, ".").CombinedOutput(); err != nil {
		log.Fatalf("tar: %v %s", err, out)
	}
	img, err := host.ImportImage(ctx, sbx.ImportOptions{Path: tarball, Name: "ci-base:1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(img.Name)

	sb, err := host.Create(ctx, sbx.Options{Image: "ci-base:1", Pull: sbx.PullNever, Workdir: "/work", TTL: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer host.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
	for _, step := range []string{"mkdir -p /work/out", "echo built > /work/out/artifact.txt"} {
		res, err := host.Exec(ctx, sb.ID, sbx.ExecRequest{Command: step, Timeout: time.Minute}, nil)
		if err != nil || res.ExitCode != 0 {
			log.Fatalf("step %q: %v %+v", step, err, res)
		}
	}
	if err := host.CopyFrom(ctx, sb.ID, "out/artifact.txt", filepath.Join(dir, "artifact.txt")); err != nil {
		log.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "artifact.txt"))
	fmt.Print(string(b))
	// Output:
	// index.docker.io/library/ci-base:1
	// built
}
