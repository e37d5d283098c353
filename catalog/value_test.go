package catalog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// decodeNumbers decodes a JSON object as the API does, numbers as json.Number.
func decodeNumbers(t *testing.T, body string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]string{
		"0": "0", "-0": "0", "-0.0": "0.0", "0e10": "0", "0.000": "0.000", "0e-3": "0.000",
		"1e2": "100", "1E+2": "100", "1.0": "1.0", "1.50e1": "15.0", "-12.5e-1": "-1.25", "0.001e5": "100",
		"1e-3": "0.001", "123.456e-10": "0.0000000123456", "-7": "-7",
		"9007199254740993":         "9007199254740993",
		"0.1000000000000000000001": "0.1000000000000000000001",
		"1e400":                    "1" + strings.Repeat("0", 400),
		"1e999":                    "1" + strings.Repeat("0", 999),
		"1e-1000":                  "0." + strings.Repeat("0", 999) + "1",
		"0e999999999":              "0",
	} {
		got, err := catalog.CanonicalNumber(lit)
		require.NoError(t, err, lit)
		require.Equal(t, want, got, lit)
	}
	for _, lit := range []string{
		"1e1000", "1e200000", "1e-1001", "1e-200000", "1e9999999999", "0e-1001", strings.Repeat("9", 1001),
		"", "-", "01", "1.", ".1", "1e", "1e+", "+1", "0x10", "NaN", "Infinity", "1_000",
	} {
		_, err := catalog.CanonicalNumber(lit)
		require.Error(t, err, lit)
	}
}

func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw, field string // field "" means the text passes
	}{
		{"Plain", `{"a":"b","c":[1,"d"]}`, ""},
		{"SurrogatePair", `{"a":"\ud83d\ude00"}`, ""},
		{"EscapedBackslashBeforeU", `{"a":"\\ud800"}`, ""},
		{"UTF8", `{"a":"é✓"}`, ""},
		{"InvalidByteInValue", "{\"ext\":{\"custom\":{\"s\":\"a\xffb\"}}}", "ext.custom.s"},
		{"InvalidByteInKey", "{\"ext\":{\"k\xfe\":1}}", "ext.k\ufffd"},
		{"InvalidByteInArray", "{\"tags\":{\"team\":[\"ok\",\"\xc3\"]}}", "tags.team[1]"},
		{"InvalidByteAtRoot", "\"\xff\"", "body"},
		{"LoneHigh", `{"a":{"b":"x\ud800y"}}`, "a.b"},
		{"LoneLow", `{"a":["\udc00"]}`, "a[0]"},
		{"HighThenNonLow", `{"a":"\ud800\u0041"}`, "a"},
		{"AfterNestedValues", `{"a":{"b":[1,{"c":2}],"d":"ok"},"e":"\udfff"}`, "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, json.Valid([]byte(tc.raw)), "the test's JSON must be valid")
			err := catalog.CheckJSONText([]byte(tc.raw), "body")
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			requireInvalid(t, err, "invalid-utf8", tc.field)
		})
	}
}

func TestParseRefusesUnstorableValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, typ, field string
	}{
		{"NULInDescription", `{"description":"a\u0000b"}`, "nul-character", "description"},
		{"NULInTagValue", `{"tags":{"team":["w\u0000"]}}`, "nul-character", "tags.team[0]"},
		{"NULInTagName", `{"tags":{"t\u0000":["w"]}}`, "nul-character", `tags["t\x00"]`},
		{"NULInExtensionKey", `{"extensions":{"custom":{"\u0000":1}}}`, "nul-character", `extensions.custom["\x00"]`},
		{"NULInExtensionValue", `{"extensions":{"custom":{"a":[{"b":"\u0000"}]}}}`, "nul-character", "extensions.custom.a[0].b"},
		{"HugeNumber", `{"extensions":{"custom":{"n":1e200000}}}`, "number-out-of-range", "extensions.custom.n"},
		{"ThousandDigitNumber", `{"extensions":{"custom":{"n":1e1000}}}`, "number-out-of-range", "extensions.custom.n"},
		{"TinyNumber", `{"extensions":{"custom":{"n":-1e-5000}}}`, "number-out-of-range", "extensions.custom.n"},
	} {
		t.Run("Patch"+tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := catalog.ParsePatch(decodeNumbers(t, tc.body))
			require.Nil(t, p)
			requireInvalid(t, err, tc.typ, tc.field)
		})
		t.Run("Create"+tc.name, func(t *testing.T) {
			t.Parallel()
			body := decodeNumbers(t, tc.body)
			body["name"] = "n"
			if ext, ok := body["extensions"]; ok {
				delete(body, "extensions")
				body["schemaRef"] = ext
			}
			_, err := catalog.ParseCreate(body)
			requireInvalid(t, err, tc.typ, strings.Replace(tc.field, "extensions.", "schemaRef.", 1))
		})
	}
	t.Run("CreateNULInName", func(t *testing.T) {
		t.Parallel()
		_, err := catalog.ParseCreate(decodeNumbers(t, `{"name":"a\u0000"}`))
		requireInvalid(t, err, "nul-character", "name")
	})
}

func TestParseKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	p, err := catalog.ParsePatch(decodeNumbers(t,
		`{"extensions":{"custom":{"i":9007199254740993,"dec":0.1000000000000000000001,"big":1e400,"e":1.50e1,"a":[-0,1e-3]}}}`))
	require.NoError(t, err)
	raw, err := json.Marshal(p.Extensions)
	require.NoError(t, err)
	want := fmt.Sprintf(`{"custom":{"a":[0,0.001],"big":1%s,"dec":0.1000000000000000000001,"e":15.0,"i":9007199254740993}}`, strings.Repeat("0", 400))
	require.Equal(t, want, string(raw), "the numbers' text, not only their values")

	create, err := catalog.ParseCreate(decodeNumbers(t, `{"name":"n","schemaRef":{"v":1e400,"i":9007199254740993}}`))
	require.NoError(t, err)
	raw, err = json.Marshal(create.SchemaRef)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"i":9007199254740993`)
	require.Contains(t, string(raw), `"v":1`+strings.Repeat("0", 400))
}

func TestDocumentSizeBound(t *testing.T) {
	t.Parallel()
	// big is an extension value that alone takes the whole bound.
	big := strings.Repeat("x", catalog.MaxDocumentBytes)

	t.Run("CreateTooLarge", func(t *testing.T) {
		t.Parallel()
		tags := map[string]any{}
		for i := range 200 {
			tags[fmt.Sprintf("t%03d", i)] = []any{strings.Repeat("v", 400)}
		}
		_, err := catalog.ParseCreate(map[string]any{"name": "n", "tags": tags})
		ce := requireInvalid(t, err, "document-too-large", "tags")
		require.Contains(t, ce.Message, fmt.Sprint(catalog.MaxDocumentBytes))
	})

	t.Run("PatchGrowingPastTheBound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := catalog.ParsePatch(map[string]any{"description": "short", "extensions": map[string]any{"blob": big}})
		require.NoError(t, err, "the body alone is for ApplyPatch to judge")
		_, _, err = b.apply(t, p)
		requireInvalid(t, err, "document-too-large", "extensions")
	})

	t.Run("ManyPatchesCannotAddUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ds := b.ds
		chunk := strings.Repeat("y", catalog.MaxDocumentBytes/8)
		var err error
		for i := 0; err == nil; i++ {
			require.Less(t, i, 20, "the document kept growing")
			var p *catalog.Patch
			p, err = catalog.ParsePatch(map[string]any{"extensions": map[string]any{fmt.Sprintf("k%d", i): chunk}})
			require.NoError(t, err)
			var next *catalog.Dataset
			if next, _, err = catalog.ApplyPatch(ds, p, b.limits, b.caller, b.now); err == nil {
				ds = next
			}
		}
		requireInvalid(t, err, "document-too-large", "extensions")
		raw, merr := json.Marshal(ds.Extensions)
		require.NoError(t, merr)
		require.LessOrEqual(t, len(raw), catalog.MaxDocumentBytes)
	})

	t.Run("OversizedDocumentMayShrinkOrChangeTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.Extensions["legacy"] = big + big // stored before the bound existed
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P3M"}))
		require.NoError(t, err)
		p, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"legacy": big}})
		require.NoError(t, err)
		_, _, err = b.apply(t, p)
		require.NoError(t, err, "a patch that shrinks an oversized document is allowed")
		p, err = catalog.ParsePatch(map[string]any{"extensions": map[string]any{"more": "x"}})
		require.NoError(t, err)
		_, _, err = b.apply(t, p)
		requireInvalid(t, err, "document-too-large", "extensions")
	})
}

func TestParseRowRefusesUnstorableValues(t *testing.T) {
	t.Parallel()
	rc := catalog.RowContext{Dataset: &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.Record}}}
	for _, tc := range []struct {
		name, line, reason string
	}{
		{"NULInValue", `{"_id":"a","page":"x\u0000"}`, "page holds the character U+0000"},
		{"NULInID", `{"_id":"a\u0000"}`, "_id holds the character U+0000"},
		{"NULInNestedKey", `{"a":{"b\u0000":1}}`, `a["b\x00"] holds the character U+0000`},
		{"HugeNumber", `{"n":1e200000}`, "n: the number 1e200000"},
		{"InvalidUTF8ID", "{\"_id\":\"\xff\"}", "_id holds bytes that are not UTF-8"},
		{"LoneSurrogateID", `{"_id":"\ud800"}`, `_id holds \ud800`},
		{"InvalidUTF8Deep", "{\"a\":[{\"b\":\"\xfe\"}]}", "a[0].b holds bytes that are not UTF-8"},
		{"ExpandsPastTheBound", `{"_id":"a","n":[` + strings.Repeat(`1e999,`, catalog.MaxRowPayloadBytes/1000) + `1]}`, "an event keeps at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := rc.ParseRow([]byte(tc.line))
			require.Error(t, err)
			require.Equal(t, catalog.EINVALID, catalog.ErrorCode(err))
			require.Contains(t, catalog.ErrorMessage(err), tc.reason)
		})
	}

	t.Run("DistinctInvalidIDsNeverMerge", func(t *testing.T) {
		t.Parallel()
		for _, line := range []string{"{\"_id\":\"\xff\"}", "{\"_id\":\"\xfe\"}", `{"_id":"\udc00"}`} {
			_, err := rc.ParseRow([]byte(line))
			require.Error(t, err, "%q would be stored as U+FFFD, the same _id as the others", line)
		}
		in, err := rc.ParseRow([]byte(`{"_id":"\ufffd"}`))
		require.NoError(t, err, "U+FFFD sent as itself is an ordinary character")
		require.Equal(t, "\ufffd", in.ID)
	})

	t.Run("NumbersExact", func(t *testing.T) {
		t.Parallel()
		in, err := rc.ParseRow([]byte(`{"_id":"n","i":9007199254740993,"dec":0.1000000000000000000001,"big":1e400}`))
		require.NoError(t, err)
		require.Contains(t, string(in.Payload), `"i":9007199254740993`)
		require.Contains(t, string(in.Payload), `"dec":0.1000000000000000000001`)
		require.True(t, bytes.Contains(in.Payload, []byte(`"big":1`+strings.Repeat("0", 400))), "%s", in.Payload)
	})
}
