package completion

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Add completes the commands that take sandboxes or images, and only
// those; a command whose first argument is the only one completed
// completes nothing after it.
func TestAddCompletesSandboxAndImageArguments(t *testing.T) {
	root := &cobra.Command{Use: "sbx"}
	image := &cobra.Command{Use: "image"}
	image.AddCommand(&cobra.Command{Use: "rm"})
	root.AddCommand(&cobra.Command{Use: "inspect"}, &cobra.Command{Use: "logs"}, &cobra.Command{Use: "version"}, image)
	opened := 0
	Add(root, func() (Backend, error) { opened++; return nil, errors.New("no backend") })
	for _, c := range []string{"inspect", "logs", "image rm"} {
		sub, _, err := root.Find(strings.Fields(c))
		if err != nil || sub.ValidArgsFunction == nil {
			t.Errorf("%s: no completion (%v)", c, err)
		}
	}
	if v, _, _ := root.Find([]string{"version"}); v.ValidArgsFunction != nil {
		t.Error("version takes no sandbox but completes")
	}
	logs, _, _ := root.Find([]string{"logs"})
	if _, dir := logs.ValidArgsFunction(logs, []string{"web"}, ""); dir != cobra.ShellCompDirectiveDefault || opened != 0 {
		t.Errorf("logs SANDBOX <tab>: directive %v, backend opened %d times", dir, opened)
	}
	if names, dir := logs.ValidArgsFunction(logs, nil, "w"); names != nil || dir != cobra.ShellCompDirectiveNoFileComp || opened != 1 {
		t.Errorf("logs <tab> without a backend: %v %v (opened %d)", names, dir, opened)
	}
}
