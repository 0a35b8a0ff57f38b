package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// strictJSON checks what encoding/json lets through silently in a body it
// decoded into a value of type t (issue 18): invalid UTF-8 and lone UTF-16
// surrogates ("\ud800"), which it would store as U+FFFD; object member
// names that match a field only when case is ignored ("KIND" for kind),
// which DisallowUnknownFields accepts; and names given twice in one object,
// where it keeps the last value. Each is a 400 naming the field. data must
// be one valid JSON value (the decoder accepted it), so a small scanner
// walks it, beside t to know the exact names of each object that is a
// struct; inside payloads, maps and the like any name goes, but not twice.
// encoding/json/v2 does all of this, but only behind GOEXPERIMENT=jsonv2;
// json.Decoder's Token walks at a tenth of the speed.
func strictJSON(data []byte, t reflect.Type) error {
	w := walker{data: data}
	return w.value(t, nil)
}

// walker scans one valid JSON document.
type walker struct {
	data []byte
	i    int
}

// path is where a value is, built into a field name only for an error.
type path struct {
	up    *path
	elem  bool // an array element: index, else a member: name
	name  string
	index int
}

func (p *path) String() string {
	switch {
	case p == nil:
		return ""
	case p.elem:
		return p.up.String() + "[" + strconv.Itoa(p.index) + "]"
	}
	return join(p.up.String(), p.name)
}

var errScan = invalid("", "the request body is not valid JSON")

func (w *walker) space() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\r', '\n':
			w.i++
		default:
			return
		}
	}
}

// peek returns the next byte after spaces, not consuming it (0 at the end).
func (w *walker) peek() byte {
	w.space()
	if w.i >= len(w.data) {
		return 0
	}
	return w.data[w.i]
}

// str consumes a string and returns its literal as sent (quotes,
// escapes and raw bytes).
func (w *walker) str() ([]byte, error) {
	start := w.i
	w.i++ // "
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case '\\':
			w.i += 2
		case '"':
			w.i++
			return w.data[start:w.i], nil
		default:
			w.i++
		}
	}
	return nil, errScan
}

// value walks one value of type t (nil: any JSON) at p.
func (w *walker) value(t reflect.Type, p *path) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || (t != nil && t.Kind() == reflect.Interface) {
		t = nil
	}
	switch w.peek() {
	case '{':
		w.i++
		return w.object(t, p)
	case '[':
		w.i++
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		if w.peek() == ']' {
			w.i++
			return nil
		}
		at := &path{up: p, elem: true} // one per array: its index moves on
		for ; ; at.index++ {
			if err := w.value(elem, at); err != nil {
				return err
			}
			switch w.peek() {
			case ',':
				w.i++
			case ']':
				w.i++
				return nil
			default:
				return errScan
			}
		}
	case '"':
		lit, err := w.str()
		if err != nil {
			return err
		}
		if msg := badString(lit); msg != "" {
			return invalid(p.String(), "%s", msg)
		}
		return nil
	case 0:
		return errScan
	}
	for w.i < len(w.data) { // a number, true, false or null
		switch w.data[w.i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return nil
		}
		w.i++
	}
	return nil
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// object walks the members of an object of type t (a struct: its exact
// names; a map: any name and its element type; nil: any name, any value),
// its { consumed.
func (w *walker) object(t reflect.Type, p *path) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	if w.peek() == '}' {
		w.i++
		return nil
	}
	var seen map[string]bool
	at := &path{up: p} // one per object: its name moves on
	for {
		if w.peek() != '"' {
			return errScan
		}
		lit, err := w.str()
		if err != nil {
			return err
		}
		if msg := badString(lit); msg != "" {
			return invalid(p.String(), "a member name: %s", msg)
		}
		name := string(lit[1 : len(lit)-1])
		if strings.IndexByte(name, '\\') >= 0 {
			if err := json.Unmarshal(lit, &name); err != nil {
				return errScan
			}
		}
		at.name = name
		if seen == nil {
			seen = map[string]bool{}
		}
		if seen[name] {
			return invalid(at.String(), "given twice in one object")
		}
		seen[name] = true
		vt := elem
		if fields != nil {
			ft, ok := fields[name]
			if !ok {
				for exact := range fields {
					if strings.EqualFold(exact, name) {
						return invalid(at.String(), "unknown field; field names are case-sensitive: did you mean %q?", exact)
					}
				}
				return invalid(at.String(), "unknown field")
			}
			vt = ft
		}
		if w.peek() != ':' {
			return errScan
		}
		w.i++
		if err := w.value(vt, at); err != nil {
			return err
		}
		switch w.peek() {
		case ',':
			w.i++
		case '}':
			w.i++
			return nil
		default:
			return errScan
		}
	}
}

// jsonFields maps the JSON names of struct type t to their types (the
// request types have neither embedded structs nor "-" fields with names).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

// badString says what is wrong with a JSON string literal as sent: bytes
// that are not UTF-8, or a \u escape of a UTF-16 surrogate that is not
// half of a pair; "" when nothing is.
func badString(lit []byte) string {
	if !utf8.Valid(lit) {
		return "the text is not valid UTF-8"
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' {
			continue // \" \\ \n ...: skipped whole, so "\\ud800" is text, not an escape
		}
		r, ok := hex4(lit, i+1)
		i += 4
		if !ok {
			continue // the decoder refused it already
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Sprintf("\\u%04x is half of a UTF-16 surrogate pair, without its first half", r)
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := rune(0), i+6 < len(lit) && lit[i+1] == '\\' && lit[i+2] == 'u'
			if ok {
				lo, ok = hex4(lit, i+3)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf("\\u%04x is half of a UTF-16 surrogate pair, without its second half", r)
			}
			i += 6
		}
	}
	return ""
}

// hex4 reads the 4 hex digits at lit[i:].
func hex4(lit []byte, i int) (rune, bool) {
	if i+4 > len(lit) {
		return 0, false
	}
	var r rune
	for _, c := range lit[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
