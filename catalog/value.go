package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What the service stores is what it reads back. Postgres keeps JSON as jsonb: text in UTF-8 without U+0000, and
// every number as an exact numeric, written out in full (1e3 reads back as 1000, 1.50 as 1.50). The rules below
// refuse what jsonb cannot hold, or could hold only by silently changing it, before anything is written, and name
// the field; they apply to dataset documents and to row payloads alike.
const (
	// MaxNumberDigits bounds a number written out in full, before and after its decimal point. Postgres holds up to
	// 131,072 and 16,383 digits, but a few bytes such as 1e100000 would then grow a document a thousandfold.
	MaxNumberDigits = 1000
	// MaxDocumentBytes bounds a dataset's own document, its description, tags, extensions and schemaRef as JSON
	// with numbers written out in full. Every listing returns up to 100 of them, so this caps a listing at about
	// 6.4 MB, while the datasets of Adobe's API reference are under 1 KiB each.
	MaxDocumentBytes = 64 << 10
	// MaxRowPayloadBytes bounds an event's fields as stored, numbers written out in full: the size of the longest
	// line an ingestion reads, so that a line cannot grow in storage past what it could have been sent as.
	MaxRowPayloadBytes = 1 << 20
)

// CheckJSONText refuses the JSON text of a document or event that decoding would change silently: bytes that are
// not UTF-8, and \u escapes of lone UTF-16 surrogates (encoding/json turns both into U+FFFD, so two different
// _ids would become one). raw must already have decoded without error; root names the whole of it in an error.
func CheckJSONText(raw []byte, root string) error {
	if off := invalidUTF8(raw); off >= 0 {
		field := fieldOr(pathAt(raw, off), root)
		return Invalid("invalid-utf8", field, "%s holds bytes that are not UTF-8 (at byte %d); send text as UTF-8", field, off)
	}
	if off := loneSurrogate(raw); off >= 0 {
		field := fieldOr(pathAt(raw, off), root)
		return Invalid("invalid-utf8", field, "%s holds %s, half of a UTF-16 surrogate pair (at byte %d), which is not a character", field, raw[off:off+6], off)
	}
	return nil
}

func fieldOr(path, root string) string {
	if path == "" {
		return root
	}
	return path
}

// invalidUTF8 returns the offset of the first byte of raw that is not UTF-8, or -1.
func invalidUTF8(raw []byte) int64 {
	if utf8.Valid(raw) {
		return -1
	}
	for i := 0; i < len(raw); {
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			return int64(i)
		}
		i += size
	}
	return -1
}

// loneSurrogate returns the offset of the first \u escape in raw that is a UTF-16 surrogate without its other half,
// or -1. In valid JSON a backslash appears only inside strings, so no string tracking is needed.
func loneSurrogate(raw []byte) int64 {
	for i := bytes.IndexByte(raw, '\\'); i >= 0 && i+1 < len(raw); {
		if raw[i+1] != 'u' || i+6 > len(raw) {
			i = nextBackslash(raw, i+2)
			continue
		}
		r := hex4(raw[i+2 : i+6])
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return int64(i)
			}
			if low := hex4(raw[i+8 : i+12]); low < 0xDC00 || low >= 0xE000 {
				return int64(i)
			}
			i = nextBackslash(raw, i+12)
		case r >= 0xDC00 && r < 0xE000:
			return int64(i)
		default:
			i = nextBackslash(raw, i+6)
		}
	}
	return -1
}

func nextBackslash(raw []byte, from int) int {
	if from >= len(raw) {
		return -1
	}
	j := bytes.IndexByte(raw[from:], '\\')
	if j < 0 {
		return -1
	}
	return from + j
}

// hex4 reads four hexadecimal digits; anything else gives -1.
func hex4(b []byte) int {
	n, err := strconv.ParseUint(string(b), 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// pathAt names the field of the JSON text raw whose token spans byte offset: its dotted path from the root
// ("" for the root itself or when raw cannot be walked).
func pathAt(raw []byte, offset int64) string {
	type frame struct {
		path    string
		object  bool
		key     string
		wantKey bool
		index   int
	}
	var stack []*frame
	current := func() string { // the path of the value about to be read
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object {
			return childPath(f.path, f.key)
		}
		return indexPath(f.path, f.index)
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey {
			if key, ok := tok.(string); ok {
				f := stack[len(stack)-1]
				f.key, f.wantKey = key, false
				if dec.InputOffset() > offset {
					return current()
				}
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &frame{path: current(), object: tok == json.Delim('{'), wantKey: true})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			if dec.InputOffset() > offset {
				return current()
			}
			valueDone()
		}
	}
}

// childPath is the path of key in the object at parent: dotted, or quoted in brackets when the key would make the
// path ambiguous or unreadable.
func childPath(parent, key string) string {
	if key == "" || strings.ContainsAny(key, `.[]"`) || !printable(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

func printable(s string) bool {
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// normalizeObject checks a decoded JSON object (numbers as json.Number) against the rules of what the service
// stores, and rewrites every number in it, in place, in the form Postgres keeps (CanonicalNumber), so that what a
// write answers is what a read shows. A refusal names the field by its path from the object.
func normalizeObject(obj map[string]any) error {
	if _, _, bad := normalize(obj); bad != nil {
		return bad.at("")
	}
	return nil
}

// badValue is a refused value inside a document. Every event of an ingestion is walked, so the path to the value is
// built only once one is refused, on the way out of the walk.
type badValue struct {
	steps []pathStep // from the value out to the root
	err   func(field string) error
}

// pathStep is one step of a path: an object's key, or an array's index when index >= 0.
type pathStep struct {
	key   string
	index int
}

func (b *badValue) under(step pathStep) *badValue {
	b.steps = append(b.steps, step)
	return b
}

func (b *badValue) at(root string) error {
	field := root
	for i := len(b.steps) - 1; i >= 0; i-- {
		if s := b.steps[i]; s.index >= 0 {
			field = indexPath(field, s.index)
		} else {
			field = childPath(field, s.key)
		}
	}
	return b.err(field)
}

func badText(s string) *badValue {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return nil
	}
	return &badValue{err: func(field string) error { return CheckText(field, s) }}
}

// normalize is normalizeObject's walk: the value, whether it is a new one (a number rewritten; objects and arrays
// are rewritten in place), or why it is refused.
func normalize(v any) (any, bool, *badValue) {
	switch x := v.(type) {
	case string:
		return v, false, badText(x)
	case json.Number:
		n, err := CanonicalNumber(string(x))
		if err != nil {
			return nil, false, &badValue{err: func(field string) error {
				return Invalid("number-out-of-range", field, "%s: %v", field, err)
			}}
		}
		if n == string(x) {
			return v, false, nil
		}
		return json.Number(n), true, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, &badValue{err: func(field string) error {
				return Invalid("number-out-of-range", field, "%s: %v is not a number JSON or Postgres can hold", field, x)
			}}
		}
	case map[string]any:
		for k, e := range x {
			if badText(k) != nil {
				return nil, false, firstBadKey(x)
			}
			n, changed, bad := normalize(e)
			if bad != nil {
				return nil, false, firstBadKey(x)
			}
			if changed {
				x[k] = n
			}
		}
	case []any:
		for i, e := range x {
			n, changed, bad := normalize(e)
			if bad != nil {
				return nil, false, bad.under(pathStep{index: i})
			}
			if changed {
				x[i] = n
			}
		}
	}
	return v, false, nil
}

// firstBadKey walks an object that holds a refused value again, in key order, so that of several the same one is
// named every time.
func firstBadKey(obj map[string]any) *badValue {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if bad := badText(k); bad != nil {
			return bad.under(pathStep{key: k, index: -1})
		}
		if _, _, bad := normalize(obj[k]); bad != nil {
			return bad.under(pathStep{key: k, index: -1})
		}
	}
	return nil
}

// CheckText returns an EINVALID error naming field when s is text the service cannot store or compare: it holds
// U+0000, which Postgres text cannot hold, or bytes that are not UTF-8. Every string of a document or event, and
// every query and path parameter, goes through it before it reaches SQL.
func CheckText(field, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return Invalid("nul-character", field, "%s holds the character U+0000 (NUL) at byte %d, which Postgres text cannot hold", field, i)
	}
	if !utf8.ValidString(s) {
		return Invalid("invalid-utf8", field, "%s holds bytes that are not UTF-8; send text as UTF-8", field)
	}
	return nil
}

// CanonicalNumber returns a JSON number literal written out in full, as Postgres' numeric keeps it and jsonb returns
// it: no exponent, as many digits after the point as the literal had less its exponent, and no sign on zero (1e2 →
// 100, 1.50e1 → 15.0, 1e-3 → 0.001, -0.0 → 0.0). The value is exactly the literal's. A literal whose full form has
// more than MaxNumberDigits digits before or after the point is refused, as is anything not a JSON number.
func CanonicalNumber(lit string) (string, error) {
	neg, intPart, fracPart, exp, err := splitNumber(lit)
	if err != nil {
		return "", err
	}
	if !strings.ContainsAny(lit, "eE") && len(intPart) <= MaxNumberDigits && len(fracPart) <= MaxNumberDigits &&
		(!neg || strings.Trim(intPart, "0") != "" || strings.Trim(fracPart, "0") != "") {
		return lit, nil // already written out in full: the common case, without a copy
	}
	digits := intPart + fracPart
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	point := int64(len(intPart)) + exp // where the point falls in digits
	scale := max(int64(len(fracPart))-exp, 0)
	zero := lead == len(digits)
	intDigits := int64(1)
	if !zero && point > int64(lead) {
		intDigits = point - int64(lead)
	}
	if intDigits > MaxNumberDigits || scale > MaxNumberDigits {
		return "", fmt.Errorf("the number %s has %d digits before and %d after the decimal point written out in full; "+
			"numbers are kept exactly, with at most %d digits on either side", compact(lit), intDigits, scale, MaxNumberDigits)
	}
	var b strings.Builder
	if neg && !zero {
		b.WriteByte('-')
	}
	switch {
	case zero || point <= int64(lead):
		b.WriteByte('0')
	case point <= int64(len(digits)):
		b.WriteString(digits[lead:point])
	default:
		b.WriteString(digits[lead:])
		b.WriteString(strings.Repeat("0", int(point)-len(digits)))
	}
	if scale > 0 {
		b.WriteByte('.')
		switch {
		case zero:
			b.WriteString(strings.Repeat("0", int(scale)))
		case point < 0:
			b.WriteString(strings.Repeat("0", int(-point)))
			b.WriteString(digits)
		default:
			b.WriteString(digits[point:])
		}
	}
	return b.String(), nil
}

// splitNumber takes a JSON number literal apart: its sign, the digits before and after the point, and the exponent.
func splitNumber(lit string) (neg bool, intPart, fracPart string, exp int64, err error) {
	bad := func() error { return fmt.Errorf("%s is not a JSON number", compact(lit)) }
	s := lit
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, rest
	}
	mant, expPart, hasExp := strings.Cut(strings.ReplaceAll(s, "E", "e"), "e")
	intPart, fracPart, hasFrac := strings.Cut(mant, ".")
	if !allDigits(intPart) || (len(intPart) > 1 && intPart[0] == '0') || (hasFrac && !allDigits(fracPart)) {
		return false, "", "", 0, bad()
	}
	if hasExp {
		sign := int64(1)
		if rest, ok := strings.CutPrefix(expPart, "-"); ok {
			sign, expPart = -1, rest
		} else {
			expPart = strings.TrimPrefix(expPart, "+")
		}
		if !allDigits(expPart) {
			return false, "", "", 0, bad()
		}
		// Nine digits of exponent are plenty: past them no literal a body can carry stays within MaxNumberDigits
		// unless it is zero, and a zero's exponent that large says nothing a client means.
		e := strings.TrimLeft(expPart, "0")
		if len(e) > 9 {
			return false, "", "", 0, fmt.Errorf("the exponent of %s is out of range: numbers are kept exactly, with at most %d digits on either side of the point", compact(lit), MaxNumberDigits)
		}
		if e != "" {
			n, _ := strconv.ParseInt(e, 10, 64) // nine digits or fewer: always parses
			exp = sign * n
		}
	}
	return neg, intPart, fracPart, exp, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// documentParts are the parts of a dataset's document that its owner writes, by field name; they are what
// MaxDocumentBytes bounds.
func documentParts(description *string, tags map[string][]string, extensions, schemaRef map[string]any) map[string]any {
	return map[string]any{"description": description, "tags": tags, "extensions": extensions, "schemaRef": schemaRef}
}

// documentSize returns the bytes of each part as JSON, and their sum.
func documentSize(parts map[string]any) (map[string]int, int, error) {
	sizes := make(map[string]int, len(parts))
	total := 0
	for name, part := range parts {
		raw, err := json.Marshal(part)
		if err != nil {
			return nil, 0, fmt.Errorf("measure %s: %w", name, err)
		}
		sizes[name] = len(raw)
		total += len(raw)
	}
	return sizes, total, nil
}

// checkDocumentSize refuses a dataset document over MaxDocumentBytes, naming the largest of the parts the request
// wrote. A document no larger than before (a size a dataset may have from before the bound) passes, so that its
// owner can still shrink it or change its TTL.
func checkDocumentSize(parts map[string]any, written []string, before int) error {
	sizes, total, err := documentSize(parts)
	if err != nil {
		return err
	}
	if total <= MaxDocumentBytes || total <= before {
		return nil
	}
	field := "body"
	for _, name := range written {
		if field == "body" || sizes[name] > sizes[field] {
			field = name
		}
	}
	return Invalid("document-too-large", field,
		"the dataset's description, tags, extensions and schemaRef would take %d bytes as JSON (numbers written out in full), %s %d of them; a dataset keeps at most %d",
		total, field, sizes[field], MaxDocumentBytes)
}
