package catalog_test

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// A row's payload is written as json.Marshal writes the event's decoded fields, byte for byte (keys sorted; HTML
// characters, control characters and U+2028/U+2029 escaped), so that PayloadSize, which the bound on a row's size
// judges, means what it meant: the events are fixed ones with every escape, and random ones from a fixed seed.
func TestPayloadIsWrittenAsJSONMarshalWritesIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ds := &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}}
	rc := catalog.RowContext{Dataset: ds, Lake: catalog.BuiltinLimits[ds.PolicyKey(catalog.LakeHouse)], Now: now}
	check := func(t *testing.T, fields string) {
		t.Helper()
		want, err := json.Marshal(decodeNumbers(t, fields))
		require.NoError(t, err)
		raw := `{"timestamp":"2026-11-24T11:00:00Z","_id":"r1",` + strings.TrimPrefix(fields, "{")
		if fields == "{}" {
			raw = `{"timestamp":"2026-11-24T11:00:00Z","_id":"r1"}`
		}
		in, err := rc.ParseRow([]byte(raw))
		require.NoError(t, err, raw)
		require.Equal(t, string(want), string(in.Payload), raw)
		require.Equal(t, len(want), in.PayloadSize)
	}
	t.Run("Escapes", func(t *testing.T) {
		t.Parallel()
		for _, fields := range []string{
			`{}`,
			`{"html":"<a href=\"x\">&amp;</a>","ctl":"x\u0001\b\f\n\r\t\u001f\u007f","sep":"a\u2028b\u2029c","back":"\\\/"}`,
			`{"é✓":"😀 \ud83d\ude00","":"","k<>&":[],"nested":{"z":1,"a":[null,true,false,{"b":-0.5}],"m":{}}}`,
			`{"identityMap":{"email":[{"id":"a@example.com","primary":true}],"ECID":[{"id":"0123"}]},"n":12345678901234567890}`,
			`{"big":1000,"small":0.0150,"neg":0.0,"arr":[[[]],[{}]]}`,
		} {
			check(t, fields)
		}
	})
	t.Run("Random", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(31, 31))
		for range 500 {
			check(t, randomObject(r, 3, "f"))
		}
	})
}

// randomObject writes a random JSON object at most depth deep, its keys starting with prefix (no key of the service's), with strings drawn from characters json.Marshal
// escapes and ones it does not.
func randomObject(r *rand.Rand, depth int, prefix string) string {
	n := r.IntN(5)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"` + prefix + randomString(r)[1:] + ":" + randomValue(r, depth-1)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func randomValue(r *rand.Rand, depth int) string {
	switch k := r.IntN(7); {
	case k == 0 && depth > 0:
		return randomObject(r, depth, "")
	case k == 1 && depth > 0:
		vals := make([]string, r.IntN(4))
		for i := range vals {
			vals[i] = randomValue(r, depth-1)
		}
		return "[" + strings.Join(vals, ",") + "]"
	case k == 2:
		return strconv.FormatInt(r.Int64N(1<<40)-(1<<39), 10)
	case k == 3:
		return []string{"true", "false", "null"}[r.IntN(3)]
	default:
		return randomString(r)
	}
}

func randomString(r *rand.Rand) string {
	pool := []string{"a", "Z", "0", " ", "<", ">", "&", `\"`, `\\`, `\/`, `\n`, `\t`, `\b`, `\f`, `\r`, `\u001b`, `\u007f`,
		"é", "✓", "😀", `\u2028`, `\u2029`, `\ud83d\ude00`, "'", "_id"}
	var b strings.Builder
	b.WriteByte('"')
	for range r.IntN(8) {
		b.WriteString(pool[r.IntN(len(pool))])
	}
	b.WriteByte('"')
	return b.String()
}
