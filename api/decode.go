package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq/workqtype"
)

// decodeBody reads the JSON request body into v: application/json only
// (even when the body is empty: a cross-site HTML form cannot send that
// type), at most the body limit (413 beyond it), no unknown fields,
// nothing after the value, and strict (strictJSON: valid UTF-8 without
// lone surrogates, names exactly as documented, none twice). An empty
// body is allowed when optional (then v stays zero).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if r.ContentLength > s.maxBody {
		return s.tooLarge()
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return &Error{status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMedia,
			Message: "the request body must be JSON: send Content-Type: application/json (also with an empty body)"}
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" || (params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
		return &Error{status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMedia,
			Message: fmt.Sprintf("Content-Type %q: the request body must be application/json (UTF-8)", ct)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return s.tooLarge()
		}
		return &Error{status: http.StatusBadRequest, Code: CodeInvalid, Message: "the request body could not be read"}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return invalid("", "the request body is empty: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return s.jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "the request body has data after its JSON value")
	}
	return strictJSON(body, reflect.TypeOf(v))
}

func (s *Server) tooLarge() *Error {
	return &Error{status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
		Message: fmt.Sprintf("the request body is larger than the limit of %d bytes (api-max-body)", s.maxBody)}
}

// jsonError says what is wrong with a body json.Decoder rejected, naming
// the field when it can.
func (s *Server) jsonError(err error) error {
	var (
		tooBig  *http.MaxBytesError
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return s.tooLarge()
	case errors.As(err, &syntax):
		return invalid("", "the request body is not valid JSON (at byte %d): %v", syntax.Offset, syntax)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "the request body is not valid JSON: it ends early")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return invalid("", "the request body must be a JSON object, got %s", typeErr.Value)
		}
		return invalid(typeErr.Field, "want %s, got %s", typeName(typeErr.Type), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalid(name, "unknown field")
	}
	return invalid("", "the request body is not valid JSON: %v", err)
}

// typeName says in words what JSON a Go type takes.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int16:
		return "a whole number from -32768 to 32767"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(typeName(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// query reads the query parameters of a request that takes the named
// ones: an unknown or repeated parameter is a 400.
func query(r *http.Request, names ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalid("", "the query string does not parse: %v", err)
	}
	for k, v := range q {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			if len(names) == 0 {
				return nil, invalid(k, "unknown query parameter: this endpoint takes none")
			}
			return nil, invalid(k, "unknown query parameter (want %s)", strings.Join(names, ", "))
		}
		if len(v) > 1 {
			return nil, invalid(k, "given %d times, want once", len(v))
		}
	}
	return q, nil
}

// parseTime reads an RFC 3339 time (the zero time is refused: it means
// "not set" to the Go API).
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid(field, "%q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", s)
	}
	if t.IsZero() {
		return time.Time{}, invalid(field, "%q is the zero time; omit %s instead", s, field)
	}
	return t, nil
}

// parseDuration reads a duration: a Go duration string ("30s", "1h30m",
// "250ms"), never negative.
func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalid(field, "%q is not a duration: want a Go duration string such as \"30s\", \"5m\" or \"1h30m\"", s)
	}
	if d < 0 {
		return 0, invalid(field, "%q is negative", s)
	}
	return d, nil
}

// parseInt reads a whole number in [lo, hi].
func parseInt(field, s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid(field, "%q: want a whole number from %d to %d", s, lo, hi)
	}
	return n, nil
}

// queueName returns the queue of a request: "default" when the field is
// absent; given, it must be a valid name (an empty one is refused: it is
// more likely an unset variable than a wish for the default).
func queueName(field string, q *string) (string, error) {
	if q == nil {
		return "default", nil
	}
	if *q == "" {
		return "", invalid(field, "must not be empty (omit it for %q)", "default")
	}
	if !workqtype.ValidName(*q) {
		return "", invalid(field, "%q is not a valid name (1-128 of A-Z a-z 0-9 _ . : -)", *q)
	}
	return *q, nil
}
