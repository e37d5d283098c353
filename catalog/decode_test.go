package catalog_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// jsonDecoded is what ParseRow read events with before decodeEvent: json.Decoder with UseNumber into a map, then
// More.
func jsonDecoded(raw []byte) (obj map[string]any, more, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false, false
	}
	return obj, dec.More(), true
}

// sameAsJSONDecoder checks that decodeEvent accepts raw exactly when json.Decoder does, with the same values and
// the same answer to More.
func sameAsJSONDecoder(t *testing.T, raw []byte) {
	t.Helper()
	want, wantMore, wantOK := jsonDecoded(raw)
	got, more, err := catalog.DecodeEvent(raw)
	require.Equal(t, wantOK, err == nil && got != nil, "accepted? %q", raw)
	if wantOK {
		require.Equal(t, want, got, "%q", raw)
		require.Equal(t, wantMore, more, "more? %q", raw)
	}
}

// An event is decoded as encoding/json decodes it (issue #31 replaced the decoder for speed): the same values, the
// same refusals, the same answer to "does anything follow?", on fixed lines with every corner of the grammar and on
// random events and random corruptions of them from a fixed seed.
func TestDecodeEventIsJSONDecoder(t *testing.T) {
	t.Parallel()
	t.Run("Fixed", func(t *testing.T) {
		t.Parallel()
		deep := func(n int) string { return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
		for _, line := range []string{
			`{}`, ` {} `, "\t{\r\n}\n", `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":[1,2,{"c":null}]},"d":true,"e":false}`,
			`{"s":"\"\\\/\b\f\n\r\t\u0041\u00e9\u2028"}`, `{"p":"\ud83d\ude00"}`, `{"lone":"\ud800"}`, `{"low":"\udc00x"}`,
			`{"h":"\ud800\u0041"}`, `{"h":"\ud800\ud800"}`, `{"h":"\ud800\uZZZZ"}`, `{"bad":"\x"}`, `{"bad":"\'"}`, `{"u":"\u12"}`,
			"{\"ctl\":\"a\x01b\"}", "{\"nl\":\"a\nb\"}", "{\"utf\":\"a\xffb\"}", "{\"k\xfe\":1}", "{\"cut\":\"\xe2\x82\"}", "{\"del\":\"\x7f\"}",
			`{"n":0}`, `{"n":-0}`, `{"n":-0.0e-0}`, `{"n":1E+5}`, `{"n":123.456e78}`, `{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"n":.5}`,
			`{"n":1e}`, `{"n":1e+}`, `{"n":+1}`, `{"n":--1}`, `{"n":1.5.5}`, `{"n":0x1}`, `{"n":NaN}`,
			`{"l":tru}`, `{"l":truex}`, `{"l":nul}`, `{"l":nulll}`, `{"l":False}`,
			`{} x`, `{}}`, `{}]`, `{} {}`, `{}  ,`, `{}[`, `{"a":1}   `, `{} 1`,
			`[]`, `[{}]`, `null`, `1`, `"s"`, `true`, ``, `   `, `{`, `}`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{,}`, `{"a"}`,
			`{"a":}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a" 1}`, `{1:2}`, `{'a':1}`, "\ufeff{}", `{"a":"b"`, `{"a":"b}`,
			deep(9999), deep(10000),
		} {
			sameAsJSONDecoder(t, []byte(line))
		}
	})
	t.Run("Random", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(31, 32))
		pool := []byte(`{}[]":,\/ -+.0123456789eEtfnaulr` + "\t\n\x01\x80\xe2")
		for range 400 {
			line := []byte(spaced(r, randomObject(r, 3, "")))
			sameAsJSONDecoder(t, line)
			for range 10 {
				m := bytes.Clone(line)
				switch i := r.IntN(len(m)); r.IntN(3) {
				case 0:
					m = append(m[:i], m[i+1:]...)
				case 1:
					m = append(m[:i], append([]byte{pool[r.IntN(len(pool))]}, m[i:]...)...)
				default:
					m[i] = pool[r.IntN(len(pool))]
				}
				sameAsJSONDecoder(t, m)
			}
		}
	})
}

// spaced puts white space after some of the structural characters of a JSON text (and some inside its strings,
// which changes them, equally for both decoders).
func spaced(r *rand.Rand, s string) string {
	var b strings.Builder
	for _, c := range s {
		b.WriteRune(c)
		if strings.ContainsRune(`{}[]:,`, c) && r.IntN(3) == 0 {
			b.WriteString([]string{" ", "\t", "\r\n", "  "}[r.IntN(4)])
		}
	}
	return b.String()
}
