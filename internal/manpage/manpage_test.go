package manpage

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestWriteEscapes: help text cannot inject roff requests, hyphens and
// backslashes stay literal, indented lines stay unfilled, and hidden
// commands and flags are left out.
func TestWriteEscapes(t *testing.T) {
	root := &cobra.Command{Use: "tool"}
	sub := &cobra.Command{Use: "do-it ARG", Short: "Do it", Long: "First line.\n.SH INJECTED\n'also not a request\n\n  indented -x \\ example\nback to text", Run: func(*cobra.Command, []string) {}}
	sub.Flags().StringP("name", "n", "", "the `NAME` to use")
	sub.Flags().Bool("secret", false, "hidden flag")
	_ = sub.Flags().MarkHidden("secret")
	hidden := &cobra.Command{Use: "hidden", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(sub, hidden)
	var b bytes.Buffer
	if err := Write(&b, sub, Header{Title: "TOOL", Section: "1", Source: "tool", Manual: "tool manual"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`.TH "TOOL" "1" "" "tool" "tool manual"`,
		"tool\\-do\\-it \\- Do it",
		"\\&.SH INJECTED", "\\&'also not a request",
		".nf\n  indented \\-x \\e example\n.fi\nback to text",
		"\\fB\\-n\\fP, \\fB\\-\\-name\\fP \\fINAME\\fP",
		".SH SEE ALSO\n\\fBtool\\fP(1)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	for _, bad := range []string{"\n.SH INJECTED", "secret"} {
		if strings.Contains(page, bad) {
			t.Errorf("page has %q:\n%s", bad, page)
		}
	}
	var rb bytes.Buffer
	if err := Write(&rb, root, Header{Section: "1"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rb.String(), "hidden") || !strings.Contains(rb.String(), "\\fBtool\\-do\\-it\\fP(1)") {
		t.Errorf("root page's SEE ALSO:\n%s", rb.String())
	}
}
