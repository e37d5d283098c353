package catalog

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// errEventSyntax is decodeEvent's refusal: the line is not one JSON object. ParseRow says so in its own words.
var errEventSyntax = errors.New("not a JSON object")

// maxEventDepth is encoding/json's bound on nesting, which decodeEvent keeps.
const maxEventDepth = 10000

// decodeEvent decodes an event line into what json.Decoder with UseNumber decodes it into, value for value (the
// same maps, slices, strings, json.Number, bools and nils; a duplicate key's last value; bytes that are not UTF-8
// and lone surrogates turned into U+FFFD, as CheckJSONText then refuses them), and refuses what it refuses. more
// reports what json.Decoder.More would say after the object: something other than white space or a closing bracket
// follows it. Every ingested row is decoded once, and encoding/json's reflection took most of a row's CPU in the
// service, twice as much for a row with an identityMap (issue #31).
func decodeEvent(raw []byte) (obj map[string]any, more bool, err error) {
	d := eventDecoder{data: raw}
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, false, errEventSyntax
	}
	if obj, err = d.object(); err != nil {
		return nil, false, err
	}
	d.skipSpace()
	more = d.pos < len(d.data) && d.data[d.pos] != '}' && d.data[d.pos] != ']'
	return obj, more, nil
}

type eventDecoder struct {
	data  []byte
	pos   int
	depth int
}

func (d *eventDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\r', '\n':
			d.pos++
		default:
			return
		}
	}
}

// next skips white space and returns the byte there, or 0 at the end.
func (d *eventDecoder) next() byte {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

func (d *eventDecoder) value() (any, error) {
	switch c := d.next(); {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, errEventSyntax
}

func (d *eventDecoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return errEventSyntax
	}
	d.pos += len(word)
	return nil
}

func (d *eventDecoder) enter() error {
	if d.depth++; d.depth > maxEventDepth {
		return errEventSyntax
	}
	d.pos++ // the opening bracket
	return nil
}

func (d *eventDecoder) object() (map[string]any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	m := map[string]any{}
	if d.next() == '}' {
		d.pos++
		d.depth--
		return m, nil
	}
	for {
		if d.next() != '"' {
			return nil, errEventSyntax
		}
		key, err := d.str()
		if err != nil {
			return nil, err
		}
		if d.next() != ':' {
			return nil, errEventSyntax
		}
		d.pos++
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		m[key] = v
		switch d.next() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return m, nil
		default:
			return nil, errEventSyntax
		}
	}
}

func (d *eventDecoder) array() ([]any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	a := make([]any, 0)
	if d.next() == ']' {
		d.pos++
		d.depth--
		return a, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		switch d.next() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return a, nil
		default:
			return nil, errEventSyntax
		}
	}
}

// number reads a number literal as JSON's grammar has it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *eventDecoder) number() (json.Number, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case d.digits() == 0:
		return "", errEventSyntax
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return "", errEventSyntax
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return "", errEventSyntax
		}
	}
	return json.Number(d.data[start:d.pos]), nil
}

func (d *eventDecoder) digits() int {
	start := d.pos
	for d.pos < len(d.data) && '0' <= d.data[d.pos] && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos - start
}

// str reads a string at the opening quote. A string of plain UTF-8 is one copy; escapes and bytes that are not
// UTF-8 go through strEscaped.
func (d *eventDecoder) str() (string, error) {
	d.pos++
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := string(d.data[start:d.pos])
			d.pos++
			return s, nil
		case c == '\\' || c < ' ':
			return d.strEscaped(start)
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return d.strEscaped(start)
			}
			d.pos += size
		}
	}
	return "", errEventSyntax
}

// strEscaped reads the rest of the string that began at start, as encoding/json unquotes it.
func (d *eventDecoder) strEscaped(start int) (string, error) {
	b := make([]byte, 0, d.pos-start+16)
	b = append(b, d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return string(b), nil
		case c < ' ':
			return "", errEventSyntax
		case c == '\\':
			var err error
			if b, err = d.escape(b); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			b = utf8.AppendRune(b, r)
			d.pos += size
		}
	}
	return "", errEventSyntax
}

// escape appends the character of the escape at the backslash.
func (d *eventDecoder) escape(b []byte) ([]byte, error) {
	if d.pos+1 >= len(d.data) {
		return b, errEventSyntax
	}
	switch e := d.data[d.pos+1]; e {
	case '"', '\\', '/':
		d.pos += 2
		return append(b, e), nil
	case 'b', 'f', 'n', 'r', 't':
		d.pos += 2
		return append(b, "\b\f\n\r\t"[strings.IndexByte("bfnrt", e)]), nil
	case 'u':
		r := escapedRune(d.data[d.pos:])
		if r < 0 {
			return b, errEventSyntax
		}
		d.pos += 6
		if utf16.IsSurrogate(r) {
			if pair := utf16.DecodeRune(r, escapedRune(d.data[d.pos:])); pair != unicode.ReplacementChar {
				d.pos += 6
				return utf8.AppendRune(b, pair), nil
			}
			r = unicode.ReplacementChar
		}
		return utf8.AppendRune(b, r), nil
	}
	return b, errEventSyntax
}

// escapedRune reads \uXXXX at the start of s, or returns -1.
func escapedRune(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
