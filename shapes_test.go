package sbx

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// requestTypes are the contract's types a caller fills in.
var requestTypes = []reflect.Type{
	reflect.TypeFor[Options](), reflect.TypeFor[Limits](), reflect.TypeFor[Volume](), reflect.TypeFor[Tmpfs](),
	reflect.TypeFor[RunOptions](), reflect.TypeFor[ExecRequest](), reflect.TypeFor[AttachOptions](),
	reflect.TypeFor[StopOptions](), reflect.TypeFor[RemoveOptions](), reflect.TypeFor[LogOptions](),
	reflect.TypeFor[PoolSpec](), reflect.TypeFor[ReadyCheck](), reflect.TypeFor[BuildOptions](),
	reflect.TypeFor[ImportOptions](), reflect.TypeFor[PrepareOptions](), reflect.TypeFor[PruneOptions](),
	reflect.TypeFor[CheckpointOptions](), reflect.TypeFor[RestoreOptions](), reflect.TypeFor[ForkOptions](),
	reflect.TypeFor[ImageConfig](), reflect.TypeFor[Healthcheck](), reflect.TypeFor[Policy](), reflect.TypeFor[Filter](),
}

// One type per concept in what a caller gives: a span of time is a
// time.Duration (never float seconds or the JSON helper Duration), an
// environment is KEY=VALUE entries ([]string, as Options.Env).
func TestRequestShapes(t *testing.T) {
	durationType, wireDuration := reflect.TypeFor[time.Duration](), reflect.TypeFor[Duration]()
	for _, typ := range requestTypes {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || f.Anonymous {
				continue
			}
			where := typ.Name() + "." + f.Name
			switch {
			case f.Type == wireDuration:
				t.Errorf("%s is the JSON helper Duration: make it a time.Duration", where)
			case f.Type.Kind() == reflect.Float64 && strings.HasSuffix(f.Name, "S") && f.Type != durationType:
				t.Errorf("%s is float seconds: make it a time.Duration", where)
			case strings.HasSuffix(f.Name, "Env") && f.Type != reflect.TypeFor[[]string]() && f.Name != "KeyEnv":
				t.Errorf("%s is %s: an environment is KEY=VALUE entries ([]string)", where, f.Type)
			}
		}
	}
}

// The Go shapes changed; the wire did not: an exec request's env is an
// object, its timeout timeout_s seconds; a health check's durations are
// seconds; a ready check's timeout a duration string.
func TestRequestWireUnchanged(t *testing.T) {
	req := ExecRequest{Command: "env", Env: []string{"A=1", "B=x=y", "A=2"}, Timeout: 1500 * time.Millisecond, StopGrace: 3 * time.Second}
	data, err := json.Marshal(req)
	if err != nil || string(data) != `{"command":"env","env":{"A":"2","B":"x=y"},"timeout_s":1.5,"stop_grace":"3s"}` {
		t.Fatalf("exec request: %s %v", data, err)
	}
	var back ExecRequest
	if err := json.Unmarshal([]byte(`{"command":"env","env":{"B":"x=y","A":"2"},"timeout_s":1.5,"stop_grace":3}`), &back); err != nil ||
		strings.Join(back.Env, " ") != "A=2 B=x=y" || back.Timeout != 1500*time.Millisecond || back.StopGrace != 3*time.Second {
		t.Fatalf("exec request read back: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"timeout_s":1e300}`), &back); err != nil || back.Timeout <= 0 {
		t.Fatalf("a huge timeout_s: %v %v", back.Timeout, err)
	}
	if _, err := json.Marshal(ExecRequest{Env: []string{"NOVALUE"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an env entry without =: %v", err)
	}

	h := Healthcheck{Test: []string{"CMD", "true"}, Interval: 30 * time.Second, Timeout: 2500 * time.Millisecond, Retries: 3}
	data, err = json.Marshal(h)
	if err != nil || string(data) != `{"test":["CMD","true"],"retries":3,"interval_s":30,"timeout_s":2.5}` {
		t.Fatalf("health check: %s %v", data, err)
	}
	var hb Healthcheck
	if err := json.Unmarshal(data, &hb); err != nil || !reflect.DeepEqual(hb, h) {
		t.Fatalf("health check read back: %+v %v", hb, err)
	}

	var rc ReadyCheck
	if err := json.Unmarshal([]byte(`{"port":8000,"path":"/alive","timeout":"90s"}`), &rc); err != nil || rc.Timeout != 90*time.Second {
		t.Fatalf("ready check: %+v %v", rc, err)
	}
	if err := json.Unmarshal([]byte(`{"port":8000,"path":"/alive","timout":"90s"}`), &rc); err == nil {
		t.Fatal("a ready check's unknown field was accepted")
	}
	if data, err := json.Marshal(rc); err != nil || string(data) != `{"port":8000,"path":"/alive","timeout":"1m30s"}` {
		t.Fatalf("ready check: %s %v", data, err)
	}
}
