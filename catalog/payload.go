package catalog

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// marshalPayload writes a decoded event (what encoding/json decodes into an any with UseNumber: maps, slices,
// strings, json.Number, bools and nil) as json.Marshal does, byte for byte: keys sorted, HTML characters, control
// characters and U+2028/U+2029 escaped the same way. Every ingested row is written once, and json.Marshal's
// reflection and key sorting cost as much as a row's identities take to extract; a value of any other type is left
// to json.Marshal.
func marshalPayload(v map[string]any) ([]byte, error) {
	return appendPayloadValue(make([]byte, 0, 256), v)
}

func appendPayloadValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendJSONString(dst, x), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case map[string]any:
		return appendPayloadObject(dst, x)
	case []any:
		return appendPayloadArray(dst, x)
	case json.Number:
		if !numberLiteral(string(x)) {
			break // json.Marshal writes "" as 0 and refuses the rest
		}
		return append(dst, x...), nil
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

func appendPayloadObject(dst []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendPayloadValue(dst, m[k]); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func appendPayloadArray(dst []byte, a []any) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	var err error
	for i, e := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = appendPayloadValue(dst, e); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// numberLiteral tells whether s is one JSON number literal, nothing around it.
func numberLiteral(s string) bool {
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') || s[len(s)-1] < '0' || s[len(s)-1] > '9' {
		return false
	}
	return json.Valid([]byte(s))
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does with HTML escaping on (json.Marshal's default).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
