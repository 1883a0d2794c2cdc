package fileops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sbxrun/sbx/executor/api"
)

// Editor limits.
const (
	// HistoryPerFile is how many previous versions undo_edit keeps per file.
	HistoryPerFile = 10
	// maxViewBytes clips the output of view; view_range shows the rest.
	maxViewBytes = 64 << 10
	// snippetContext is how many lines around an edit its reply shows.
	snippetContext = 4
)

// history keeps previous versions of edited files within a byte budget;
// the oldest versions go first when it is exceeded.
type history struct {
	mu      sync.Mutex
	budget  int
	total   int
	entries []version // oldest first
}

type version struct {
	path    string
	content string
}

func (h *history) push(p, content string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	count := 0
	for _, v := range h.entries {
		if v.path == p {
			count++
		}
	}
	if count >= HistoryPerFile {
		for i, v := range h.entries {
			if v.path == p {
				h.total -= len(v.content)
				h.entries = append(h.entries[:i], h.entries[i+1:]...)
				break
			}
		}
	}
	h.entries = append(h.entries, version{p, content})
	h.total += len(content)
	for h.total > h.budget && len(h.entries) > 0 {
		h.total -= len(h.entries[0].content)
		h.entries = h.entries[1:]
	}
}

func (h *history) pop(p string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.entries) - 1; i >= 0; i-- {
		if v := h.entries[i]; v.path == p {
			h.total -= len(v.content)
			h.entries = append(h.entries[:i], h.entries[i+1:]...)
			return v.content, true
		}
	}
	return "", false
}

// Edit runs one editor command.
func (f *Files) Edit(req api.EditRequest) (api.EditResult, error) {
	p, err := f.Resolve(req.Path)
	if err != nil {
		return api.EditResult{}, err
	}
	res := api.EditResult{Path: p}
	switch req.Command {
	case api.EditView:
		res.Output, err = f.view(p, req.ViewRange)
	case api.EditCreate:
		res.Output, err = f.create(p, req.FileText)
	case api.EditStrReplace:
		res.Output, err = f.strReplace(p, req.OldStr, req.NewStr)
	case api.EditInsert:
		res.Output, err = f.insert(p, req.InsertLine, req.NewStr)
	case api.EditUndo:
		res.Output, err = f.undo(p)
	case "":
		err = errorf(api.CodeBadRequest, "command is required: view, create, str_replace, insert or undo_edit")
	default:
		err = errorf(api.CodeBadRequest, "unknown edit command %q: use view, create, str_replace, insert or undo_edit", req.Command)
	}
	return res, err
}

// numbered renders lines first..first+len-1 as `cat -n` does.
func numbered(lines []string, first int) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, l)
	}
	return b.String()
}

func (f *Files) view(p string, vr []int) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", statErr(p, err)
	}
	if fi.IsDir() {
		if len(vr) > 0 {
			return "", errorf(api.CodeBadRange, "view_range applies to files; %s is a directory", p)
		}
		return viewDir(p)
	}
	text, _, err := f.readText(p)
	if err != nil {
		return "", err
	}
	lines := splitLines(text)
	first, last := 1, len(lines)
	if len(vr) > 0 {
		if len(vr) != 2 {
			return "", errorf(api.CodeBadRange, "view_range must be [first, last], got %v", vr)
		}
		first, last = vr[0], vr[1]
		if last == -1 {
			last = len(lines)
		}
		if first < 1 || first > len(lines) {
			return "", errorf(api.CodeBadRange, "view_range first line %d is outside [1, %d]", first, len(lines))
		}
		if last < first || last > len(lines) {
			return "", errorf(api.CodeBadRange, "view_range last line %d is outside [%d, %d] (-1 means the end)", vr[1], first, len(lines))
		}
	}
	out := numbered(lines[first-1:last], first)
	if len(out) > maxViewBytes {
		cut := strings.LastIndexByte(out[:maxViewBytes], '\n') + 1
		out = out[:cut] + "[output clipped; use view_range to see the rest of the file]\n"
	}
	return out, nil
}

// viewDir lists a directory two levels deep, hidden entries excluded,
// directories marked with a trailing slash.
func viewDir(p string) (string, error) {
	var paths []string
	hidden := 0
	err := filepath.WalkDir(p, func(full string, de fs.DirEntry, err error) error {
		if full == p {
			return err
		}
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(p, full)
		if strings.HasPrefix(de.Name(), ".") {
			hidden++
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		depth := strings.Count(rel, string(filepath.Separator)) + 1
		name := full
		if de.IsDir() {
			name += "/"
		}
		paths = append(paths, name)
		if de.IsDir() && depth >= 2 {
			return filepath.SkipDir
		}
		if len(paths) >= MaxListEntries {
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", statErr(p, err)
	}
	sort.Strings(paths)
	out := strings.Join(paths, "\n")
	if out != "" {
		out += "\n"
	}
	if hidden > 0 {
		out += fmt.Sprintf("[%d hidden entries excluded]\n", hidden)
	}
	return out, nil
}

func (f *Files) create(p string, text *string) (string, error) {
	if text == nil {
		return "", errorf(api.CodeBadRequest, "file_text is required for create")
	}
	if _, err := os.Lstat(p); err == nil {
		return "", errorf(api.CodeExists, "%s already exists; create never overwrites, use str_replace or PUT /v1/files", p)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", statErr(p, err)
	}
	if len(*text) > MaxTextBytes {
		return "", errorf(api.CodeTooLarge, "file_text is larger than %d MB", MaxTextBytes>>20)
	}
	if _, err := f.Write(p, strings.NewReader(*text), nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("created %s (%d lines)\n", p, len(splitLines(*text))), nil
}

func (f *Files) strReplace(p string, oldStr, newStr *string) (string, error) {
	if oldStr == nil || *oldStr == "" {
		return "", errorf(api.CodeBadRequest, "old_str is required for str_replace and must not be empty")
	}
	repl := ""
	if newStr != nil {
		repl = *newStr
	}
	if repl == *oldStr {
		return "", errorf(api.CodeBadRequest, "old_str and new_str are the same; nothing to replace")
	}
	text, _, err := f.readText(p)
	if err != nil {
		return "", err
	}
	var starts []int
	for i := 0; ; {
		j := strings.Index(text[i:], *oldStr)
		if j < 0 {
			break
		}
		starts = append(starts, i+j)
		i += j + len(*oldStr)
	}
	switch len(starts) {
	case 0:
		return "", errorf(api.CodeNoMatch, "old_str does not appear verbatim in %s; nothing was replaced", p)
	case 1:
	default:
		lines := make([]int, len(starts))
		for i, s := range starts {
			lines[i] = strings.Count(text[:s], "\n") + 1
		}
		return "", &Error{Code: api.CodeMultiMatch, Lines: lines,
			Msg: fmt.Sprintf("old_str appears %d times in %s, on lines %v; it must be unique, add context to it. Nothing was replaced", len(starts), p, lines)}
	}
	updated := text[:starts[0]] + repl + text[starts[0]+len(*oldStr):]
	if err := f.commit(p, text, updated); err != nil {
		return "", err
	}
	first := strings.Count(text[:starts[0]], "\n") + 1
	return f.snippet(p, updated, first, first+strings.Count(repl, "\n")), nil
}

func (f *Files) insert(p string, at *int, newStr *string) (string, error) {
	if at == nil {
		return "", errorf(api.CodeBadRequest, "insert_line is required for insert")
	}
	if newStr == nil {
		return "", errorf(api.CodeBadRequest, "new_str is required for insert")
	}
	text, _, err := f.readText(p)
	if err != nil {
		return "", err
	}
	lines := splitLines(text)
	if *at < 0 || *at > len(lines) {
		return "", errorf(api.CodeBadRange, "insert_line %d is outside [0, %d]", *at, len(lines))
	}
	ins := splitLines(*newStr)
	if *newStr == "" {
		ins = []string{""}
	}
	merged := append(append(append([]string{}, lines[:*at]...), ins...), lines[*at:]...)
	updated := strings.Join(merged, "\n")
	if strings.HasSuffix(text, "\n") || text == "" {
		updated += "\n"
	}
	if err := f.commit(p, text, updated); err != nil {
		return "", err
	}
	return f.snippet(p, updated, *at+1, *at+len(ins)), nil
}

func (f *Files) undo(p string) (string, error) {
	prev, ok := f.history.pop(p)
	if !ok {
		return "", errorf(api.CodeNoHistory, "no edit of %s to undo", p)
	}
	if _, err := f.Write(p, strings.NewReader(prev), nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("restored the previous version of %s\n", p) + numberedClip(splitLines(prev)), nil
}

func numberedClip(lines []string) string {
	out := numbered(lines, 1)
	if len(out) > maxViewBytes {
		cut := strings.LastIndexByte(out[:maxViewBytes], '\n') + 1
		out = out[:cut] + "[output clipped]\n"
	}
	return out
}

// commit saves the old version for undo_edit and writes the new one,
// keeping the file's owner and mode.
func (f *Files) commit(p, old, updated string) error {
	if _, err := f.Write(p, strings.NewReader(updated), nil); err != nil {
		return err
	}
	f.history.push(p, old)
	return nil
}

// snippet shows the edited lines first..last with some context.
func (f *Files) snippet(p, text string, first, last int) string {
	lines := splitLines(text)
	from := max(1, first-snippetContext)
	to := min(len(lines), last+snippetContext)
	if from > to {
		return fmt.Sprintf("edited %s\n", p)
	}
	return fmt.Sprintf("edited %s; lines %d-%d now read:\n", p, from, to) + numbered(lines[from-1:to], from)
}
