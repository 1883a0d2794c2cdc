// Package manpage writes man(7) pages of a cobra command tree: NAME,
// SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLE and SEE ALSO, from the commands'
// own help.
//
// It stands in for cobra/doc, whose Markdown converter (go-md2man and
// blackfriday) builds tables at package initialisation: 0.4-0.7 ms and 760
// allocations in every start of a program that links it, for a command
// that is run once per install.
package manpage

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Header is the .TH line of every page.
type Header struct {
	Title   string // e.g. "SBX"
	Section string // e.g. "1"
	Source  string // e.g. "sbx"
	Manual  string // e.g. "sbx manual"
}

// WriteTree writes a page for cmd and each of its available (not hidden,
// not help-topic) descendants into dir, named after the command path with
// dashes: sbx.1, sbx-run.1, sbx-image-ls.1.
func WriteTree(cmd *cobra.Command, h Header, dir string) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := WriteTree(c, h, dir); err != nil {
			return err
		}
	}
	name := filepath.Join(dir, dashed(cmd)+"."+h.Section)
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := Write(f, cmd, h); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}

// Write writes cmd's page to w.
func Write(w io.Writer, cmd *cobra.Command, h Header) error {
	cmd.InitDefaultHelpFlag()
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, ".TH %s %s \"\" %s %s\n", quote(h.Title), quote(h.Section), quote(h.Source), quote(h.Manual))
	fmt.Fprintf(b, ".SH NAME\n%s \\- %s\n", escape(dashed(cmd)), escape(cmd.Short))
	fmt.Fprintf(b, ".SH SYNOPSIS\n.B %s\n", escape(cmd.UseLine()))
	desc := cmd.Long
	if desc == "" {
		desc = cmd.Short
	}
	b.WriteString(".SH DESCRIPTION\n")
	text(b, desc)
	if fs := cmd.NonInheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString(".SH OPTIONS\n")
		flags(b, fs)
	}
	if fs := cmd.InheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString(".SH OPTIONS INHERITED FROM PARENT COMMANDS\n")
		flags(b, fs)
	}
	if cmd.Example != "" {
		b.WriteString(".SH EXAMPLE\n.nf\n")
		for _, l := range strings.Split(strings.TrimRight(cmd.Example, "\n"), "\n") {
			b.WriteString(escapeLine(l) + "\n")
		}
		b.WriteString(".fi\n")
	}
	var see []string
	if cmd.HasParent() {
		see = append(see, fmt.Sprintf("\\fB%s\\fP(%s)", escape(dashed(cmd.Parent())), h.Section))
	}
	children := cmd.Commands()
	sort.Slice(children, func(i, j int) bool { return children[i].Name() < children[j].Name() })
	for _, c := range children {
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() {
			see = append(see, fmt.Sprintf("\\fB%s\\fP(%s)", escape(dashed(c)), h.Section))
		}
	}
	if len(see) > 0 {
		fmt.Fprintf(b, ".SH SEE ALSO\n%s\n", strings.Join(see, ", "))
	}
	return b.Flush()
}

// text writes help text: blank lines separate paragraphs, which the
// reader's man fills; indented lines (examples, lists of forms) stay as
// they are.
func text(b *bufio.Writer, s string) {
	pre := false
	b.WriteString(".PP\n")
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		switch {
		case strings.TrimSpace(l) == "":
			if pre {
				b.WriteString(".fi\n")
				pre = false
			}
			b.WriteString(".PP\n")
			continue
		case indented && !pre:
			b.WriteString(".nf\n")
			pre = true
		case !indented && pre:
			b.WriteString(".fi\n")
			pre = false
		}
		b.WriteString(escapeLine(l) + "\n")
	}
	if pre {
		b.WriteString(".fi\n")
	}
}

// flags writes one tagged paragraph per visible flag.
func flags(b *bufio.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		tag := "\\fB\\-\\-" + escape(f.Name) + "\\fP"
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			tag = "\\fB\\-" + escape(f.Shorthand) + "\\fP, " + tag
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			tag += " \\fI" + escape(varname) + "\\fP"
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(b, ".TP\n%s\n%s\n", tag, escapeLine(usage))
	})
}

// dashed is the page name of a command: its path with dashes.
func dashed(c *cobra.Command) string { return strings.ReplaceAll(c.CommandPath(), " ", "-") }

// quote is a double-quoted argument of a request line.
func quote(s string) string { return `"` + strings.ReplaceAll(escape(s), `"`, `\(dq`) + `"` }

// escape makes s literal text for roff: backslashes and hyphens.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// escapeLine escapes a text line and keeps a leading period or apostrophe
// from being read as a request.
func escapeLine(s string) string {
	s = escape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
