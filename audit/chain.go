package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// GenesisHash is the PrevHash of an org's first event: there is no previous event to link to.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// canonicalTag opens the canonical content, so that a later change of its layout is a new tag, not a silent
// reinterpretation of old hashes.
const canonicalTag = "retention.audit.v1"

// canonicalTime is how the timestamp enters the canonical content: UTC with exactly microseconds, the precision
// Postgres keeps, so the value written and the value read back serialize alike.
const canonicalTime = "2006-01-02T15:04:05.000000Z"

// Canonical returns the event's canonical content, the bytes its Hash is the SHA-256 of. It is a JSON array of
// these values, in this order:
//
//	"retention.audit.v1", Org, Seq, PrevHash, ID, Sandbox, Timestamp, RequestID, AssetType, AssetID, AssetName,
//	Action, Status, User, ClientID, Details
//
// written without whitespace. Seq is a number; Timestamp is a string in UTC with microseconds
// (2006-01-02T15:04:05.000000Z); Details is an object (nil is {}); everything else is a string. Canonical JSON
// means: object keys sorted by their UTF-8 bytes; strings escape only '"', '\' and control characters below U+0020
// (as \u00XX), all else is raw UTF-8; numbers are exact decimals written as an integer of significant digits and,
// when not zero, an exponent (1.50 and 15e-1 are both 15e-1, 100 is 1e2, -0 is 0); true, false and null as JSON
// has them. Because numbers are normalized as decimals, a value survives the round trip through Postgres' jsonb
// (which rewrites 1.0 as 1.0 and 1e2 as 100) with the same hash, and no digit is lost to float64.
func (e *Event) Canonical() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(512)
	b.WriteByte('[')
	writeString(&b, canonicalTag)
	b.WriteByte(',')
	writeString(&b, e.Org)
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(e.Seq, 10))
	for _, s := range []string{
		e.PrevHash, e.ID, e.Sandbox, e.Timestamp.UTC().Format(canonicalTime), e.RequestID, e.AssetType, e.AssetID,
		e.AssetName, e.Action, e.Status, e.User, e.ClientID,
	} {
		b.WriteByte(',')
		writeString(&b, s)
	}
	b.WriteByte(',')
	if e.Details == nil {
		b.WriteString("{}")
	} else if err := writeCanonical(&b, e.Details); err != nil {
		return nil, fmt.Errorf("details of event %s: %w", e.ID, err)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// ComputeHash returns the hex SHA-256 of the event's canonical content.
func (e *Event) ComputeHash() (string, error) {
	content, err := e.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:]), nil
}

// Seal links the event after prev (the hash of the org's event seq-1, GenesisHash for the first) and sets its Hash.
// The timestamp is cut to microseconds first, the precision it is stored with, so the hash covers what is stored.
func (e *Event) Seal(seq int64, prev string) error {
	e.Timestamp = e.Timestamp.UTC().Truncate(time.Microsecond)
	e.Seq, e.PrevHash = seq, prev
	h, err := e.ComputeHash()
	if err != nil {
		return err
	}
	e.Hash = h
	return nil
}

// writeCanonical writes v as canonical JSON. The types JSON decodes to, and the Go numbers events carry, are written
// directly; any other value (a struct, a named string type, a typed map or slice) is written as its encoding/json
// form, decoded again, so that it hashes as it is stored.
func writeCanonical(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		return writeNumber(b, string(v))
	case float64:
		return writeNumber(b, strconv.FormatFloat(v, 'g', -1, 64))
	case int:
		return writeNumber(b, strconv.Itoa(v))
	case int64:
		return writeNumber(b, strconv.FormatInt(v, 10))
	case string:
		writeString(b, v)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // Go compares strings bytewise: UTF-8 byte order
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var decoded any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&decoded); err != nil {
			return err
		}
		return writeCanonical(b, decoded)
	}
	return nil
}

func writeNumber(b *bytes.Buffer, s string) error {
	n, err := normalizeNumber(s)
	if err != nil {
		return err
	}
	b.WriteString(n)
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteByte(byte(r))
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xf])
		default:
			// Invalid UTF-8 decodes as U+FFFD, as JSON encoders (and Postgres' refusal) leave it.
			b.WriteRune(r)
		}
		i += size
	}
	b.WriteByte('"')
}

// normalizeNumber rewrites a JSON number as an exact decimal: sign, significant digits without leading or trailing
// zeros, and a power of ten when it is not zero ("-15e-1" for -1.50, "1e2" for 100, "0" for 0.0).
func normalizeNumber(s string) (string, error) {
	orig := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := int64(0)
	if hasExp {
		var err error
		if exp, err = strconv.ParseInt(expPart, 10, 64); err != nil {
			return "", fmt.Errorf("number %q: bad exponent", orig)
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", fmt.Errorf("number %q is not a JSON number", orig)
	}
	exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	var out strings.Builder
	if neg {
		out.WriteByte('-')
	}
	out.WriteString(trimmed)
	if exp != 0 {
		out.WriteByte('e')
		out.WriteString(strconv.FormatInt(exp, 10))
	}
	return out.String(), nil
}
