package catalog

import (
	"fmt"
	"strings"
)

// Text a tenant writes (a dataset's name, description and tags, a hold's reason and reference, an expiration's
// display name and description) is shown to other people: in the console, in exports and in an operator's
// terminal by retentionctl. A control character there can erase or forge a line of a terminal (ESC[2K\r), retitle
// its window (ESC]0;…BEL), or reorder what is shown after it (U+202E), so every such field refuses them.

// TextLines says whether a field is prose that may run over several lines: then tab and line feed are allowed.
type TextLines bool

// The two kinds of tenant text CheckPlainText knows.
const (
	OneLine   TextLines = false // names, references, tags: no control character at all
	MultiLine TextLines = true  // descriptions and a hold's reason: tab and line feed, no other
)

// CheckPlainText returns an EINVALID error of type control-character naming field when s holds a C0 control
// character (U+0000 to U+001F; tab and line feed pass where lines is MultiLine), DEL, a C1 control character
// (U+0080 to U+009F), or a bidirectional formatting character (U+061C, U+200E, U+200F, U+202A to U+202E,
// U+2066 to U+2069). The message names the character by its code point, never quoting it.
func CheckPlainText(field, s string, lines TextLines) error {
	i := strings.IndexFunc(s, func(r rune) bool { return controlRune(r, lines) })
	if i < 0 {
		return nil
	}
	r := []rune(s[i:])[0]
	allowed := "no control character"
	if lines == MultiLine {
		allowed = "no control character other than tab and line feed"
	}
	return Invalid("control-character", field, "%s holds the control character %s at byte %d; it takes text with %s, "+
		"nor the bidirectional formatting characters", field, codePoint(r), i, allowed)
}

func controlRune(r rune, lines TextLines) bool {
	switch {
	case r == '\t' || r == '\n':
		return lines == OneLine
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }
