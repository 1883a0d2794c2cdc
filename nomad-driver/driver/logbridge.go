package driver

import (
	"context"
	"fmt"
	"log/slog"

	hclog "github.com/hashicorp/go-hclog"
)

// hclogHandler sends the library's slog records to the plugin's hclog
// logger, which Nomad collects into the client's log.
type hclogHandler struct {
	l     hclog.Logger
	attrs []any
	group string
}

// slogFor returns a slog.Logger writing to l.
func slogFor(l hclog.Logger) *slog.Logger { return slog.New(&hclogHandler{l: l}) }

func (h *hclogHandler) Enabled(_ context.Context, level slog.Level) bool {
	switch {
	case level >= slog.LevelError:
		return h.l.IsError()
	case level >= slog.LevelWarn:
		return h.l.IsWarn()
	case level >= slog.LevelInfo:
		return h.l.IsInfo()
	default:
		return h.l.IsDebug()
	}
}

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any{}, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, h.key(a.Key), a.Value.Resolve().Any())
		return true
	})
	switch {
	case r.Level >= slog.LevelError:
		h.l.Error(r.Message, args...)
	case r.Level >= slog.LevelWarn:
		h.l.Warn(r.Message, args...)
	case r.Level >= slog.LevelInfo:
		h.l.Info(r.Message, args...)
	default:
		h.l.Debug(r.Message, args...)
	}
	return nil
}

func (h *hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any{}, h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, h.key(a.Key), a.Value.Resolve().Any())
	}
	return &n
}

func (h *hclogHandler) WithGroup(name string) slog.Handler {
	n := *h
	n.group = h.key(name)
	return &n
}

func (h *hclogHandler) key(k string) string {
	if h.group == "" {
		return k
	}
	return fmt.Sprintf("%s.%s", h.group, k)
}
