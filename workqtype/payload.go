package workqtype

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// DefaultMaxPayload is the default limit on a payload: 1 MiB of JSON text.
const DefaultMaxPayload = 1 << 20

// MaxPayloadCeiling is the highest payload limit workq accepts: 256 MiB,
// about the largest value PostgreSQL's jsonb can hold.
const MaxPayloadCeiling = 256 << 20

// PayloadTooLargeError says by how much a payload is over its size limit:
// the Err of the *ValidationError of such a payload (it wraps ErrInvalid
// too). Size and Limit are in bytes of JSON text.
type PayloadTooLargeError struct {
	Size, Limit int
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("%v: payload is %d bytes, more than the limit of %d bytes", ErrInvalid, e.Size, e.Limit)
}

func (e *PayloadTooLargeError) Unwrap() error { return ErrInvalid }

// CheckPayloadSize reports whether a payload of size bytes fits the limit
// maxBytes (0 means DefaultMaxPayload, 1 MiB). Over the limit the
// error is a *ValidationError (Field "payload") whose Err is a
// *PayloadTooLargeError, and errors.As finds either; a limit that is negative or above
// MaxPayloadCeiling is an error too. Both wrap ErrInvalid. It lets a
// reader stop at the limit without holding the whole payload.
func CheckPayloadSize(size, maxBytes int) error {
	if maxBytes == 0 {
		maxBytes = DefaultMaxPayload
	}
	if maxBytes < 0 || maxBytes > MaxPayloadCeiling {
		return Invalid("max_payload", fmt.Sprintf("the payload limit must be between 1 and %d bytes (0: the default, %d), got %d",
			MaxPayloadCeiling, DefaultMaxPayload, maxBytes))
	}
	if size > maxBytes {
		return &ValidationError{Field: "payload", Err: &PayloadTooLargeError{Size: size, Limit: maxBytes},
			Msg: fmt.Sprintf("payload is %d bytes, more than the limit of %d bytes", size, maxBytes)}
	}
	return nil
}

// CheckPayload reports whether raw is a payload workq stores: at most
// maxBytes bytes of JSON text (0 means the default, 1 MiB), valid JSON, a
// JSON object, and a value PostgreSQL's jsonb can hold. Its error wraps
// ErrInvalid and says what is wrong. The client runs it on every job's
// encoded payload; the CLI runs it on what it read.
func CheckPayload(raw []byte, maxBytes int) error {
	if err := CheckPayloadSize(len(raw), maxBytes); err != nil {
		return err
	}
	if !json.Valid(raw) {
		return Invalid("payload", "payload is not valid JSON")
	}
	return checkPayloadJSON(raw)
}

// checkPayloadJSON is CheckPayload after the size and JSON checks.
func checkPayloadJSON(raw []byte) error {
	if kind := jsonKind(raw); kind != "an object" {
		return Invalid("payload", "payload must be a JSON object ({...}), got "+kind)
	}
	if problem := jsonbProblem(raw); problem != "" {
		return Invalid("payload", "payload "+problem+", which PostgreSQL's jsonb cannot store")
	}
	return nil
}

// jsonKind names the kind of the valid JSON value raw.
func jsonKind(raw []byte) string {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return "an object"
		case '[':
			return "an array"
		case '"':
			return "a string"
		case 't', 'f':
			return "a boolean"
		case 'n':
			return "null"
		default:
			return "a number"
		}
	}
	return "nothing"
}

// jsonbProblem says what in raw, which is valid JSON, PostgreSQL's jsonb
// input would reject, or returns "". encoding/json accepts all of these:
// the escape \u0000 (jsonb cannot store NUL), an unpaired UTF-16 surrogate
// escape, bytes that are not UTF-8, and numbers outside numeric's range.
func jsonbProblem(raw []byte) string {
	if !utf8.Valid(raw) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; raw[i] != '"'; i++ {
				if raw[i] != '\\' {
					continue
				}
				i++
				if raw[i] != 'u' {
					continue
				}
				r := hex4(raw[i+1 : i+5])
				i += 4
				switch {
				case r == 0:
					return `contains \u0000 (NUL)`
				case r >= 0xDC00 && r <= 0xDFFF:
					return fmt.Sprintf(`contains \u%04x, a low surrogate without a high one before it`, r)
				case r >= 0xD800 && r <= 0xDBFF:
					if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
						return fmt.Sprintf(`contains \u%04x, a high surrogate without a low one after it`, r)
					}
					if lo := hex4(raw[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
						return fmt.Sprintf(`contains \u%04x, a high surrogate without a low one after it`, r)
					}
					i += 6
				}
			}
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			if numericOverflows(raw[i:j]) {
				return fmt.Sprintf("has the number %s, outside the range of PostgreSQL's numeric", abbreviate(raw[i:j]))
			}
			i = j - 1
		}
	}
	return ""
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// hex4 decodes four hex digits (valid JSON guarantees them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// numericOverflows reports whether PostgreSQL's numeric input rejects the
// valid JSON number num with "value overflows numeric format": an exponent
// of 2^30-1 or more in absolute value, more than 16383 digits after the
// decimal point (counting trailing zeros: 1.0e-16383 has 16384), or a first
// nonzero digit at 10^131072 or above.
func numericOverflows(num []byte) bool {
	const (
		maxExponent = 1<<30 - 1 // INT_MAX / 2 in set_var_from_str
		maxScale    = 16383     // NUMERIC_DSCALE_MAX
		maxWeight   = 131072    // (NUMERIC_WEIGHT_MAX + 1) * DEC_DIGITS
	)
	i := 0
	if num[i] == '-' {
		i++
	}
	intStart := i
	for i < len(num) && num[i] >= '0' && num[i] <= '9' {
		i++
	}
	intPart := num[intStart:i]
	var frac []byte
	if i < len(num) && num[i] == '.' {
		i++
		start := i
		for i < len(num) && num[i] >= '0' && num[i] <= '9' {
			i++
		}
		frac = num[start:i]
	}
	var exp int64
	if i < len(num) && (num[i] == 'e' || num[i] == 'E') {
		i++
		neg := false
		if num[i] == '+' || num[i] == '-' {
			neg = num[i] == '-'
			i++
		}
		for ; i < len(num); i++ {
			if exp < maxExponent { // saturate: anything above is rejected anyway
				exp = exp*10 + int64(num[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	if exp >= maxExponent || exp <= -maxExponent {
		return true
	}
	if int64(len(frac))-exp > maxScale {
		return true
	}
	// The power of ten of the first nonzero digit.
	for k, c := range intPart {
		if c != '0' {
			return int64(len(intPart)-1-k)+exp >= maxWeight
		}
	}
	for k, c := range frac {
		if c != '0' {
			return int64(-1-k)+exp >= maxWeight
		}
	}
	return false // zero
}

func abbreviate(b []byte) string {
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// EncodePayload returns the JSON text of a job's payload, checked by
// CheckPayload: nil is {}, raw JSON is taken as it is, anything else is
// marshaled.
func EncodePayload(v any, maxBytes int) ([]byte, error) {
	var raw []byte
	switch p := v.(type) {
	case nil:
		return []byte("{}"), CheckPayloadSize(2, maxBytes)
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Invalid("payload", fmt.Sprintf("payload is not JSON-marshalable: %v", err))
		}
		// Marshal's output is valid JSON: skip that part of CheckPayload.
		if err := CheckPayloadSize(len(b), maxBytes); err != nil {
			return nil, err
		}
		return b, checkPayloadJSON(b)
	}
	return raw, CheckPayload(raw, maxBytes)
}
