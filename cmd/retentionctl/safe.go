package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// termSafe is s as the CLI prints text that came from the API: every character a terminal would act on instead
// of showing (C0 and C1 controls, tab and newline included, DEL, the bidirectional formatting characters such as
// U+202E, the line and paragraph separators) and every byte that is not UTF-8 is written as an escape, \x1b or
// \u202e as Go writes them, so that a tenant's dataset name, hold reason or request id cannot erase, move or
// forge a line of an operator's terminal, nor reorder what is printed after it.
func termSafe(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && escaped(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.ContainsFunc(s, escaped)
}

// escaped reports whether termSafe writes r as an escape.
func escaped(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// writeJSON writes v as one line of JSON with every character termSafe escapes written as a \u escape:
// encoding/json already escapes C0 controls and the line separators, but not C1 controls nor U+202E. The JSON
// means the same; only what a terminal shows of it changes.
func writeJSON(out io.Writer, v any) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	raw := buf.Bytes()
	if !bytes.ContainsFunc(raw, escapedInJSON) {
		_, err := out.Write(raw)
		return err
	}
	var b bytes.Buffer
	for _, r := range string(raw) {
		if escapedInJSON(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	_, err := out.Write(b.Bytes())
	return err
}

// escapedInJSON is escaped without the ASCII characters encoding/json writes itself: the newline ending the line,
// which is the CLI's own, and the C0 controls inside strings, which it has escaped already.
func escapedInJSON(r rune) bool {
	return r >= 0x7f && escaped(r)
}

// termSafeJSON is JSON text as the CLI prints it when it passes the API's answer on unparsed: every character
// termSafe escapes written as a \u escape, which keeps the JSON's meaning.
func termSafeJSON(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if escaped(r) && r != '\n' {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
