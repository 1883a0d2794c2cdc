package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/sandbox"
)

// Shell completion (sbx completion bash|zsh|fish|powershell, cobra's)
// completes sandbox names and IDs, and image names, where a command takes
// them.

// argKind says what a command's arguments name.
type argKind int

const (
	sandboxArgs     argKind = iota // every argument is a sandbox
	firstSandboxArg                // the first argument is a sandbox
	imageArgs                      // every argument is an image
	firstImageArg                  // the first argument is an image
)

// completedArgs maps command paths (without "sbx ") to their arguments.
var completedArgs = map[string]argKind{
	"inspect": sandboxArgs, "stats": firstSandboxArg, "pause": sandboxArgs, "resume": sandboxArgs,
	"start": sandboxArgs, "stop": sandboxArgs, "rm": sandboxArgs, "restart": sandboxArgs,
	"kill": sandboxArgs, "wait": sandboxArgs, "logs": firstSandboxArg, "exec": firstSandboxArg,
	"shell": firstSandboxArg, "commit": firstSandboxArg, "diff": firstSandboxArg, "rename": firstSandboxArg,
	"port": firstSandboxArg, "top": firstSandboxArg, "export": firstSandboxArg,
	"rmi": imageArgs, "image rm": imageArgs, "image inspect": firstImageArg, "history": firstImageArg,
	"image history": firstImageArg, "tag": firstImageArg, "image tag": firstImageArg, "save": imageArgs,
	"image save": imageArgs, "run": firstImageArg, "create": firstImageArg,
}

// addCompletion sets the completion of every command of root that takes
// sandboxes or images.
func addCompletion(a *app, root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		if kind, ok := completedArgs[path]; ok {
			c.ValidArgsFunction = completer(a, kind)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func completer(a *app, kind argKind) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if (kind == firstSandboxArg || kind == firstImageArg) && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveDefault
		}
		b, err := a.open(sandbox.HostConfig{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if kind == sandboxArgs || kind == firstSandboxArg {
			return dockerargs.CompleteSandboxes(ctx, b, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return dockerargs.CompleteImages(ctx, b, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}
