package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// StatusError is an error of the server's own with its HTTP status and
// code; errors of the backend are mapped from the contract's sentinel
// errors (statusOf).
type StatusError struct {
	Status  int
	Code    string
	Message string
	Err     error
}

func (e *StatusError) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *StatusError) Unwrap() error { return e.Err }

// statusOf maps an error to an HTTP status and error code.
func statusOf(err error) (int, string) {
	var se *StatusError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &se):
		return se.Status, se.Code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge
	case errors.Is(err, sbx.ErrNotFound), errors.Is(err, sbx.ErrImageNotFound), errors.Is(err, sbx.ErrNoSuchFile):
		return http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, sbx.ErrPortInUse):
		return http.StatusConflict, api.CodePortInUse
	case errors.Is(err, sbx.ErrNameInUse), errors.Is(err, sbx.ErrBusy), errors.Is(err, sbx.ErrState):
		return http.StatusConflict, api.CodeConflict
	case errors.Is(err, sbx.ErrAmbiguous):
		return http.StatusBadRequest, api.CodeBadRequest
	case errors.Is(err, sbx.ErrForbidden):
		return http.StatusUnprocessableEntity, api.CodeForbidden
	case errors.Is(err, sbx.ErrInvalid):
		return http.StatusUnprocessableEntity, api.CodeInvalid
	case errors.Is(err, sbx.ErrLimit):
		return http.StatusTooManyRequests, api.CodeLimit
	case errors.Is(err, sbx.ErrRegistryAuth):
		return http.StatusBadGateway, api.CodeRegistryAuth
	case errors.Is(err, sbx.ErrRegistryUnreachable):
		return http.StatusBadGateway, api.CodeRegistryUnreachable
	case errors.Is(err, sbx.ErrUnsupported):
		return http.StatusNotImplemented, api.CodeUnsupported
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, api.CodeUnavailable
	}
	return http.StatusInternalServerError, api.CodeInternal
}

// fail writes err as a JSON error reply and counts it.
func (s *Server) fail(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if status >= 500 {
		s.log.Warn("request failed", "status", status, "err", err)
	}
	s.metrics.errors.Inc(code)
	writeError(w, status, code, err.Error())
}

func badRequest(format string, args ...any) error {
	return &StatusError{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func unprocessable(code, format string, args ...any) error {
	return &StatusError{Status: http.StatusUnprocessableEntity, Code: code, Message: fmt.Sprintf(format, args...)}
}

// decodeJSON reads a JSON body of at most MaxBodyBytes into v, refusing
// unknown fields and trailing data. An empty body is allowed when
// optional is true.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body of %d bytes exceeds the limit of %d", r.ContentLength, s.cfg.MaxBodyBytes)}
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
				Message: fmt.Sprintf("request body exceeds the limit of %d bytes", s.cfg.MaxBodyBytes), Err: err}
		case errors.Is(err, io.EOF) && optional:
			return nil
		case errors.Is(err, io.EOF):
			return badRequest("empty request body: send a JSON object")
		}
		return badRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON body: data after the JSON object")
	}
	return nil
}
