// Package completion completes the sandbox and image arguments of a cobra
// command tree (sbx completion bash|zsh|fish|powershell is cobra's):
// sandbox names and IDs, and image names, where a command takes them,
// asked of the backend the command would use.
package completion

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
)

// argKind says what a command's arguments name.
type argKind int

const (
	sandboxArgs     argKind = iota // every argument is a sandbox
	firstSandboxArg                // the first argument is a sandbox
	imageArgs                      // every argument is an image
	firstImageArg                  // the first argument is an image
)

// completedArgs maps command paths (without the root's name) to their
// arguments.
var completedArgs = map[string]argKind{
	"inspect": sandboxArgs, "stats": sandboxArgs, "pause": sandboxArgs, "resume": sandboxArgs,
	"start": sandboxArgs, "stop": sandboxArgs, "rm": sandboxArgs, "restart": sandboxArgs,
	"kill": sandboxArgs, "wait": sandboxArgs, "logs": firstSandboxArg, "exec": firstSandboxArg,
	"shell": firstSandboxArg, "commit": firstSandboxArg, "diff": firstSandboxArg, "rename": firstSandboxArg,
	"port": firstSandboxArg, "top": firstSandboxArg, "export": firstSandboxArg,
	"rmi": imageArgs, "image rm": imageArgs, "image inspect": firstImageArg, "history": firstImageArg,
	"image history": firstImageArg, "tag": firstImageArg, "image tag": firstImageArg, "save": imageArgs,
	"image save": imageArgs, "run": firstImageArg, "create": firstImageArg,
}

// Backend is what completion asks for names.
type Backend interface {
	sbx.Sandboxes
	sbx.Images
}

// Add sets the completion of every command of root that takes sandboxes
// or images; open returns the backend to ask (an error: no completion).
func Add(root *cobra.Command, open func() (Backend, error)) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		if kind, ok := completedArgs[path]; ok {
			c.ValidArgsFunction = completer(open, kind)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func completer(open func() (Backend, error), kind argKind) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if (kind == firstSandboxArg || kind == firstImageArg) && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveDefault
		}
		b, err := open()
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
