package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
)

// remoteCommands are the commands that act on the server of --host; the
// others act on this host only and refuse --host rather than silently
// doing something local.
var remoteCommands = map[string]bool{
	"create": true, "run": true, "ps": true, "ls": true, "inspect": true, "stats": true, "pause": true,
	"resume": true, "start": true, "stop": true, "rm": true, "exec": true, "shell": true, "cp": true, "info": true, "gc": true, "commit": true,
	"pull": true, "images": true, "rmi": true, "image ls": true, "image inspect": true, "image gc": true, "import": true, "image import": true, "prepare": true, "image rm": true, "image pull": true,
	"version": true, "help": true, "completion": true,
}

func init() {
	prev := rootCmd.PersistentPreRunE
	rootCmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(cmd, args); err != nil {
				return err
			}
		}
		if remoteHost == "" || cmd == rootCmd {
			return nil
		}
		path := cmd.CommandPath()
		name := path[len(rootCmd.Name())+1:]
		for c := cmd; c != nil && c.Parent() != rootCmd && c.Parent() != nil; c = c.Parent() {
			if c.Parent().Name() == "completion" || c.Parent().Name() == "help" {
				return nil
			}
		}
		if !remoteCommands[name] {
			return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("sbx %s acts on this host only and does not take --host (or SBX_HOST)", name)}
		}
		return nil
	}
}

// remotePull pulls through the server with its progress bars.
func remotePull(cmd *cobra.Command, ref string, quiet bool) error {
	c, err := remoteClient()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	prog := newImageProgress(cmd.ErrOrStderr(), quiet)
	img, err := c.PullImage(ctx, ref, func(p api.PullProgress) {
		prog.update(imagecache.Progress{Layer: p.Layer, Index: p.Index, Phase: imagecache.Phase(p.Phase), Current: p.Current, Total: p.Total})
	})
	prog.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", imagecache.FamiliarName(img.Name), img.Digest)
	return nil
}

// remoteImages lists the server's images like sbx images.
func remoteImages(cmd *cobra.Command, format string, quiet bool) error {
	c, err := remoteClient()
	if err != nil {
		return err
	}
	imgs, err := c.ListImages(cmd.Context())
	if err != nil {
		return err
	}
	list := make([]imageSummary, 0, len(imgs))
	for _, img := range imgs {
		list = append(list, imageSummary{Name: img.Name, Digest: img.Digest, Size: img.Size, Created: img.Created, Platform: img.Platform})
	}
	return printImages(cmd.OutOrStdout(), list, format, quiet)
}

// remoteRmi removes images on the server like sbx rmi.
func remoteRmi(cmd *cobra.Command, refs []string) error {
	c, err := remoteClient()
	if err != nil {
		return err
	}
	var failed error
	for _, ref := range refs {
		if err := c.RemoveImage(cmd.Context(), ref); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", err)
			failed = exitWith(exitSbxFailed)
			continue
		}
		fmt.Fprintln(cmd.OutOrStdout(), "Untagged:", ref)
	}
	return failed
}

// remoteImageInspect prints an image of the server's cache like sbx image
// inspect.
func remoteImageInspect(cmd *cobra.Command, ref string) error {
	c, err := remoteClient()
	if err != nil {
		return err
	}
	img, err := c.InspectImage(cmd.Context(), ref)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(img)
}

// remoteImageGC collects the server's unused layers like sbx image gc.
func remoteImageGC(cmd *cobra.Command) error {
	c, err := remoteClient()
	if err != nil {
		return err
	}
	rep, err := c.GCImages(cmd.Context())
	if err != nil {
		return err
	}
	printImageGC(cmd, len(rep.RemovedLayers), rep.FreedBytes, len(rep.KeptInUse))
	return nil
}

// printImageGC prints what an image gc removed.
func printImageGC(cmd *cobra.Command, removed int, freed int64, kept int) {
	fmt.Fprintf(cmd.OutOrStdout(), "removed %d layers, freed %s\n", removed, humanBytes(freed))
	if kept > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "kept %d unused layers that a mount still uses\n", kept)
	}
}

// remoteImport uploads the archive at path (a directory, an OCI layout, is
// sent as a tar made on the fly) into the server's cache like sbx import.
func remoteImport(cmd *cobra.Command, path, name string) error {
	c, err := remoteClient()
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	var body io.Reader
	if st.IsDir() {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarDir(pw, path)) }()
		defer pr.Close()
		body = pr
	} else {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		body = f
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	img, err := c.ImportImage(ctx, body, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", imagecache.FamiliarName(img.Name), img.Digest)
	return nil
}

// tarDir writes the directories and regular files under dir to w as a tar
// with paths relative to dir (an OCI archive when dir is an OCI layout).
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return fmt.Errorf("tar %s: %s is neither a file nor a directory", dir, rel)
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// remotePrepareFlags are the prepare flags the server's prepare takes;
// the others refuse --host.
var remotePrepareFlags = map[string]bool{"env": true, "env-file": true, "workdir": true, "user": true, "network": true,
	"command": true, "script": true, "quiet": true}

// remotePrepare builds (once) an image on the server like sbx prepare,
// with the same cache key; the script's output (its end) goes to stderr.
func remotePrepare(cmd *cobra.Command, base, script string, opts sandbox.Options, quiet bool) error {
	var bad []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !remotePrepareFlags[f.Name] && cmd.Root().PersistentFlags().Lookup(f.Name) == nil {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("sbx prepare --host takes only -e/--env-file, -w, -u and --network besides the script; not %v", bad)}
	}
	c, err := remoteClient()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := c.PrepareImage(ctx, api.PrepareRequest{Base: base, Script: script, Env: opts.Env, User: opts.User, Workdir: opts.Workdir, Network: opts.Network})
	if err != nil {
		return err
	}
	if !quiet {
		fmt.Fprint(cmd.ErrOrStderr(), rep.Output)
		if rep.Cached {
			fmt.Fprintln(cmd.ErrOrStderr(), "sbx: prepared image found in the cache")
		}
	}
	fmt.Fprintln(cmd.OutOrStdout(), rep.Image.Name)
	return nil
}
