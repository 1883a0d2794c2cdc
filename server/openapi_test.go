package server

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/server/api"
)

// bodies maps every object schema of openapi.yaml to the Go type whose
// JSON it describes: the document lists exactly the fields the types have.
var bodies = map[string]reflect.Type{
	"Error":             reflect.TypeFor[api.Error](),
	"ErrorBody":         reflect.TypeFor[sbx.ErrorBody](),
	"Health":            reflect.TypeFor[api.Health](),
	"HostInfo":          reflect.TypeFor[sbx.HostInfo](),
	"GCReport":          reflect.TypeFor[sbx.GCReport](),
	"Options":           reflect.TypeFor[sbx.Options](),
	"Limits":            reflect.TypeFor[sbx.Limits](),
	"Volume":            reflect.TypeFor[sbx.Volume](),
	"Secret":            reflect.TypeFor[sbx.Secret](),
	"Tmpfs":             reflect.TypeFor[sbx.Tmpfs](),
	"Ulimit":            reflect.TypeFor[sbx.Ulimit](),
	"Sandbox":           reflect.TypeFor[sbx.Sandbox](),
	"SandboxList":       reflect.TypeFor[api.SandboxList](),
	"Pool":              reflect.TypeFor[sbx.Pool](),
	"PoolSpec":          reflect.TypeFor[sbx.PoolSpec](),
	"ReadyCheck":        reflect.TypeFor[sbx.ReadyCheck](),
	"PoolList":          reflect.TypeFor[api.PoolList](),
	"SnapshotList":      reflect.TypeFor[api.SnapshotList](),
	"Snapshot":          reflect.TypeFor[sbx.Snapshot](),
	"CheckpointOptions": reflect.TypeFor[sbx.CheckpointOptions](),
	"RestoreOptions":    reflect.TypeFor[sbx.RestoreOptions](),
	"ForkOptions":       reflect.TypeFor[sbx.ForkOptions](),
	"ForkReply":         reflect.TypeFor[api.ForkReply](),
	"PoolReport":        reflect.TypeFor[sbx.PoolReport](),
	"ImageInfo":         reflect.TypeFor[sbx.ImageInfo](),
	"NetworkInfo":       reflect.TypeFor[sbx.NetworkInfo](),
	"PortMapping":       reflect.TypeFor[sbx.PortMapping](),
	"Egress":            reflect.TypeFor[sbx.Egress](),
	"EgressUpdate":      reflect.TypeFor[sbx.EgressUpdate](),
	"EgressAudit":       reflect.TypeFor[sbx.EgressAudit](),
	"HostPort":          reflect.TypeFor[sbx.HostPort](),
	"CreateTimings":     reflect.TypeFor[sbx.CreateTimings](),
	"CmdStart":          reflect.TypeFor[sbx.CmdStart](),
	"Resource":          reflect.TypeFor[sbx.Resource](),
	"StopRequest":       reflect.TypeFor[api.StopRequest](),
	"CommitRequest":     reflect.TypeFor[api.CommitRequest](),
	"Usage":             reflect.TypeFor[sbx.Usage](),
	"ExecRequest":       reflect.TypeFor[sbx.ExecRequest](),
	"ExecResult":        reflect.TypeFor[sbx.ExecResult](),
	"ExecFrame":         reflect.TypeFor[sbx.ExecFrame](),
	"SessionRequest":    reflect.TypeFor[execapi.SessionRequest](),
	"Session":           reflect.TypeFor[execapi.Session](),
	"SessionList":       reflect.TypeFor[execapi.SessionList](),
	"RunRequest":        reflect.TypeFor[execapi.RunRequest](),
	"RunResult":         reflect.TypeFor[execapi.RunResult](),
	"EditRequest":       reflect.TypeFor[execapi.EditRequest](),
	"EditResult":        reflect.TypeFor[execapi.EditResult](),
	"Listing":           reflect.TypeFor[execapi.Listing](),
	"Entry":             reflect.TypeFor[execapi.Entry](),
	"ArchiveResult":     reflect.TypeFor[execapi.ArchiveResult](),
	"WriteResult":       reflect.TypeFor[execapi.WriteResult](),
	"ExecutorInfo":      reflect.TypeFor[execapi.Info](),
	"Image":             reflect.TypeFor[sbx.Image](),
	"ImageConfig":       reflect.TypeFor[sbx.ImageConfig](),
	"Healthcheck":       reflect.TypeFor[sbx.Healthcheck](),
	"ImageList":         reflect.TypeFor[api.ImageList](),
	"ImageGCReport":     reflect.TypeFor[sbx.ImageGCReport](),
	"PullRequest":       reflect.TypeFor[api.PullRequest](),
	"PullProgress":      reflect.TypeFor[sbx.PullProgress](),
	"PullFrame":         reflect.TypeFor[api.PullFrame](),
	"BuildFrame":        reflect.TypeFor[api.BuildFrame](),
	"BuildResult":       reflect.TypeFor[sbx.BuildResult](),
	"BuildPruneReport":  reflect.TypeFor[sbx.BuildPruneReport](),
	"PrepareRequest":    reflect.TypeFor[api.PrepareRequest](),
	"PrepareReply":      reflect.TypeFor[api.PrepareReply](),
	"Event":             reflect.TypeFor[sbx.Event](),
	"RenameRequest":     reflect.TypeFor[api.RenameRequest](),
	"Change":            reflect.TypeFor[sbx.Change](),
	"ChangeList":        reflect.TypeFor[api.ChangeList](),
	"TagRequest":        reflect.TypeFor[api.TagRequest](),
	"SaveRequest":       reflect.TypeFor[api.SaveRequest](),
	"ImageHistoryEntry": reflect.TypeFor[sbx.ImageHistoryEntry](),
	"ImageHistory":      reflect.TypeFor[api.ImageHistory](),
	"DiskUsage":         reflect.TypeFor[sbx.DiskUsage](),
	"ProcessInfo":       reflect.TypeFor[sbx.ProcessInfo](),
	"ProcessList":       reflect.TypeFor[api.ProcessList](),
	"PruneOptions":      reflect.TypeFor[sbx.PruneOptions](),
	"PruneReport":       reflect.TypeFor[sbx.PruneReport](),
	"SignalRequest":     reflect.TypeFor[api.SignalRequest](),
	"LogFrame":          reflect.TypeFor[sbx.LogFrame](),
	"Exit":              reflect.TypeFor[sbx.Exit](),
	"RestartPolicy":     reflect.TypeFor[sbx.RestartPolicy](),
	"VolumeSpec":        reflect.TypeFor[sbx.VolumeSpec](),
	"VolumeInfo":        reflect.TypeFor[sbx.VolumeInfo](),
	"VolumeList":        reflect.TypeFor[api.VolumeList](),
	"VolumePruneReport": reflect.TypeFor[sbx.VolumePruneReport](),
}

// customFields are the JSON fields a type writes through its own
// MarshalJSON rather than a struct tag.
var customFields = map[reflect.Type][]string{
	reflect.TypeFor[sbx.Options]():     {"ttl", "idle_timeout", "lease"},
	reflect.TypeFor[sbx.Sandbox]():     {"state"},
	reflect.TypeFor[sbx.ExecRequest](): {"env", "timeout_s", "stop_grace"},
	reflect.TypeFor[sbx.ReadyCheck]():  {"timeout"},
	reflect.TypeFor[sbx.Healthcheck](): {"interval_s", "timeout_s", "start_period_s"},
}

// scalarSchemas are the named schemas that are not objects.
var scalarSchemas = map[string]bool{"Size": true, "Duration": true, "Status": true, "State": true}

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	return doc
}

// TestOpenAPIValidates checks openapi.yaml with kin-openapi's OpenAPI 3
// validator: syntax, references, schemas, examples.
func TestOpenAPIValidates(t *testing.T) {
	doc := loadOpenAPI(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI 3 document: %v", err)
	}
}

// jsonFields returns the JSON names of t's fields (embedded structs
// flattened) and the type of each.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(deref(f.Type)) {
				out[k] = v
			}
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	for _, name := range customFields[t] {
		out[name] = nil
	}
	return out
}

// deref strips pointers and slices: the type of one element.
func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

// schemaName returns the component name a reference points at.
func schemaName(ref string) string {
	return strings.TrimPrefix(ref, "#/components/schemas/")
}

// checkObject compares an object schema with a Go struct type, field by
// field, following references and inline objects.
func checkObject(t *testing.T, where string, s *openapi3.Schema, typ reflect.Type) {
	t.Helper()
	fields := jsonFields(typ)
	props := map[string]bool{}
	for name, p := range s.Properties {
		props[name] = true
		ft, ok := fields[name]
		if !ok {
			t.Errorf("%s documents %s, which %s does not have", where, name, typ)
			continue
		}
		checkField(t, where+"."+name, p, ft)
	}
	var missing []string
	for name := range fields {
		if !props[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		t.Errorf("%s lacks %s (a field of %s)", where, name, typ)
	}
}

// checkField checks one property: a reference must name the schema of
// the field's type, an inline object must match it, an array's items
// likewise.
func checkField(t *testing.T, where string, p *openapi3.SchemaRef, ft reflect.Type) {
	t.Helper()
	if ft == nil {
		return // written by a custom marshaler
	}
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if p.Ref != "" {
		name := schemaName(p.Ref)
		if scalarSchemas[name] {
			return
		}
		if want, ok := bodies[name]; !ok || want != deref(ft) {
			t.Errorf("%s refers to %s, which does not describe %s", where, name, ft)
		}
		return
	}
	s := p.Value
	switch {
	case s.Type.Is("array"):
		if ft.Kind() != reflect.Slice {
			t.Errorf("%s is an array, %s is not", where, ft)
			return
		}
		checkField(t, where+"[]", s.Items, ft.Elem())
	case s.Type.Is("object") && s.AdditionalProperties.Schema != nil:
		if ft.Kind() != reflect.Map {
			t.Errorf("%s is a map, %s is not", where, ft)
		}
	case s.Type.Is("object"):
		if ft.Kind() != reflect.Struct {
			t.Errorf("%s is an object, %s is not a struct", where, ft)
			return
		}
		checkObject(t, where, s, ft)
	}
}

// TestOpenAPIListsEveryField checks that every object schema lists
// exactly the fields of its Go type, and that every JSON body of every
// operation is one of these schemas.
func TestOpenAPIListsEveryField(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, ref := range doc.Components.Schemas {
		if scalarSchemas[name] {
			continue
		}
		typ, ok := bodies[name]
		if !ok {
			t.Errorf("schema %s: no Go type is known for it (add it to bodies)", name)
			continue
		}
		checkObject(t, name, ref.Value, typ)
	}
	for name := range bodies {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("bodies names %s, which openapi.yaml does not define", name)
		}
	}
	jsonBody := func(where string, content openapi3.Content) {
		for mt, m := range content {
			if mt != "application/json" && mt != "application/x-ndjson" && mt != "text/event-stream" {
				continue
			}
			if m.Schema == nil || m.Schema.Ref == "" {
				t.Errorf("%s %s: the body is not a named schema", where, mt)
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				jsonBody(where+" request", op.RequestBody.Value.Content)
			}
			for code, r := range op.Responses.Map() {
				if r.Value != nil {
					jsonBody(where+" "+code, r.Value.Content)
				}
			}
		}
	}
}
