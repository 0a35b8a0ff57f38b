package workqtype

import (
	"encoding/json"
	"fmt"
)

// Limits of a job's metadata (EnqueueOpts.Metadata).
const (
	// MaxMetadataBytes bounds the metadata's JSON text.
	MaxMetadataBytes = 64 << 10
	// MaxMetadataKeyBytes bounds one key.
	MaxMetadataKeyBytes = 128
)

// EncodeMetadata checks a job's metadata and returns its JSON object, or
// nil for none (a nil or empty map): keys of 1 to MaxMetadataKeyBytes bytes
// and values of valid UTF-8 text without NUL bytes (PostgreSQL's jsonb
// takes no other), at most MaxMetadataBytes of JSON in all. field names
// the metadata in errors.
func EncodeMetadata(field string, m map[string]string) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	for k, v := range m {
		if k == "" || len(k) > MaxMetadataKeyBytes || !ValidText(k) {
			return nil, Invalid(field, fmt.Sprintf("metadata key %q must be 1-%d bytes of UTF-8 text (no NUL bytes)", k, MaxMetadataKeyBytes))
		}
		if !ValidText(v) {
			return nil, Invalid(field, fmt.Sprintf("metadata %q: the value must be UTF-8 text (no NUL bytes)", k))
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, InvalidErr(field, fmt.Errorf("metadata: %w", err))
	}
	if len(b) > MaxMetadataBytes {
		return nil, Invalid(field, fmt.Sprintf("metadata is %d bytes of JSON, more than %d", len(b), MaxMetadataBytes))
	}
	return b, nil
}

// DecodeMetadata returns the string members of a JSON object (a job's
// metadata as stored), or nil when there are none; members of other types
// (which only SQL written by hand can store) are left out.
func DecodeMetadata(obj []byte) map[string]string {
	if len(obj) < 2 || obj[0] != '{' || string(obj) == "{}" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil || len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
