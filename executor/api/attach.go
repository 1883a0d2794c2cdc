package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// PathExecAttach is the interactive exec: a POST with an AttachRequest
// body and the headers `Connection: Upgrade` and `Upgrade: sbx-attach`.
// The executor answers 101 Switching Protocols and the connection then
// carries attach frames both ways until the command's exit frame.
const PathExecAttach = "/v1/exec/attach"

// UpgradeAttach is the Upgrade token of PathExecAttach.
const UpgradeAttach = "sbx-attach"

// AttachRequest starts an interactive command. The fields of ExecRequest
// apply except stdin and max_output_bytes (input and output are the
// frames). With Tty the command runs on a new pseudo-terminal of Cols x
// Rows (default 80x24) as a session leader with it as its controlling
// terminal; stdout and stderr are then one stream.
type AttachRequest struct {
	ExecRequest
	Tty  bool   `json:"tty,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
}

// attachTerminal is what AttachRequest adds to ExecRequest, for the JSON
// codec (ExecRequest's own codec would otherwise stand for the whole).
type attachTerminal struct {
	Tty  bool   `json:"tty,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
}

// MarshalJSON writes the fields of ExecRequest and the terminal's in one
// object.
func (r AttachRequest) MarshalJSON() ([]byte, error) {
	exec, err := json.Marshal(r.ExecRequest)
	if err != nil {
		return nil, err
	}
	term, err := json.Marshal(attachTerminal{Tty: r.Tty, Cols: r.Cols, Rows: r.Rows})
	if err != nil {
		return nil, err
	}
	exec, term = bytes.TrimSuffix(exec, []byte("}")), bytes.TrimPrefix(term, []byte("{"))
	if len(exec) > 1 && len(term) > 1 {
		exec = append(exec, ',')
	}
	return append(exec, term...), nil
}

// UnmarshalJSON reads an AttachRequest, refusing unknown fields.
func (r *AttachRequest) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	term := map[string]json.RawMessage{}
	for _, k := range []string{"tty", "cols", "rows"} {
		if v, ok := fields[k]; ok {
			term[k] = v
			delete(fields, k)
		}
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	var t attachTerminal
	tb, err := json.Marshal(term)
	if err == nil {
		err = json.Unmarshal(tb, &t)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rest, &r.ExecRequest); err != nil {
		return err
	}
	r.Tty, r.Cols, r.Rows = t.Tty, t.Cols, t.Rows
	return nil
}

// Attach frame types. A frame is one type byte, a big-endian uint32
// payload length and the payload.
const (
	// AttachStdin carries input from the caller; an empty payload closes
	// the command's stdin (ignored with a terminal).
	AttachStdin byte = 'i'
	// AttachResize carries the new terminal size from the caller: cols
	// and rows as big-endian uint16.
	AttachResize byte = 'r'
	// AttachStdout and AttachStderr carry output to the caller (with a
	// terminal, all output is AttachStdout).
	AttachStdout byte = 'o'
	AttachStderr byte = 'e'
	// AttachExit ends the stream: an ExecResult in JSON.
	AttachExit byte = 'x'
	// AttachError ends the stream when the command could not run: an
	// ErrorBody in JSON.
	AttachError byte = 'f'
)

// MaxAttachFrame caps an attach frame's payload.
const MaxAttachFrame = 1 << 20

// WriteAttachFrame writes one frame to w.
func WriteAttachFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxAttachFrame {
		return fmt.Errorf("attach frame of %d bytes exceeds %d", len(payload), MaxAttachFrame)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// ReadAttachFrame reads one frame from r, refusing payloads over max.
func ReadAttachFrame(r io.Reader, max int) (typ byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if int64(n) > int64(max) {
		return 0, nil, fmt.Errorf("attach frame of %d bytes exceeds %d", n, max)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

// ResizePayload encodes a terminal size for an AttachResize frame.
func ResizePayload(cols, rows uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, cols), rows)
}

// ParseResize decodes an AttachResize payload.
func ParseResize(p []byte) (cols, rows uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("resize frame of %d bytes, want 4", len(p))
	}
	return binary.BigEndian.Uint16(p[:2]), binary.BigEndian.Uint16(p[2:]), nil
}
