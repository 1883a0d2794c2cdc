package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/fileops"
	"github.com/sbxrun/sbx/executor/internal/shell"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: code, Message: msg}})
}

// fail writes err with the status its kind calls for.
func (s *Server) fail(w http.ResponseWriter, err error) {
	var fe *fileops.Error
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.status, ae.code, ae.msg)
	case errors.As(err, &fe):
		writeJSON(w, fileStatus[fe.Code], api.Error{Error: api.ErrorBody{Code: fe.Code, Message: fe.Msg, Lines: fe.Lines}})
	case errors.Is(err, shell.ErrNotRunning):
		writeError(w, http.StatusConflict, api.CodeNotRunning, err.Error())
	case errors.Is(err, shell.ErrCallWaiting):
		writeError(w, http.StatusConflict, api.CodeBusy, err.Error())
	case errors.Is(err, shell.ErrClosed):
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, api.CodeInternal, err.Error())
	default:
		s.log.Warn("executor: request failed", "err", err)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

// apiError is an error with its HTTP status and API code.
type apiError struct {
	status    int
	code, msg string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf(format, args...)}
}

// decode reads a JSON body of at most maxJSONBody bytes into v.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxJSONBody)}
		}
		return badRequest("invalid JSON body: %v", err)
	}
	return nil
}

var fileStatus = map[string]int{
	api.CodeBadRequest:  http.StatusBadRequest,
	api.CodeNotFound:    http.StatusNotFound,
	api.CodeExists:      http.StatusConflict,
	api.CodeIsDirectory: http.StatusBadRequest,
	api.CodeNotRegular:  http.StatusUnsupportedMediaType,
	api.CodeBinary:      http.StatusUnsupportedMediaType,
	api.CodeTooLarge:    http.StatusRequestEntityTooLarge,
	api.CodeNoMatch:     http.StatusUnprocessableEntity,
	api.CodeMultiMatch:  http.StatusUnprocessableEntity,
	api.CodeBadRange:    http.StatusBadRequest,
	api.CodeNoHistory:   http.StatusConflict,
	api.CodeUnsafePath:  http.StatusBadRequest,
}

var errStopping = &apiError{http.StatusServiceUnavailable, api.CodeShuttingDown, "the executor is shutting down"}
