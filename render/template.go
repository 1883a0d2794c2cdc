package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/template"
)

// ParseFormat parses a --format that is a Go template, as docker's
// --format: nil for "table" and "json", an error for anything else
// without "{{". A leading "table " is dropped; {{json .X}} prints a value
// as JSON.
func ParseFormat(format string) (*template.Template, error) {
	if format == "table" || format == "json" {
		return nil, nil
	}
	if !strings.Contains(format, "{{") {
		return nil, fmt.Errorf("invalid --format %q: use table, json, or a Go template like '{{.ID}} {{.Status}}'", format)
	}
	t, err := template.New("format").Funcs(template.FuncMap{"json": func(v any) (string, error) {
		data, err := json.Marshal(v)
		return string(data), err
	}}).Parse(strings.TrimPrefix(format, "table "))
	if err != nil {
		return nil, fmt.Errorf("invalid --format: %w", err)
	}
	return t, nil
}

// Each runs t for each value, one line each. A value the template fails
// on writes nothing and ends it with an error naming --format.
func Each[T any](w io.Writer, t *template.Template, values []T) error {
	for _, v := range values {
		var buf bytes.Buffer
		if err := t.Execute(&buf, v); err != nil {
			return fmt.Errorf("--format: %w", err)
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// CheckFormat refuses a --format that is not one of allowed: "invalid
// --format "x": use table or json".
func CheckFormat(format string, allowed ...string) error {
	if slices.Contains(allowed, format) {
		return nil
	}
	return fmt.Errorf("invalid --format %q: use %s", format, strings.Join(allowed, " or "))
}
