package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
)

func sampleEvent() *audit.Event {
	return &audit.Event{
		ID: "6ecc125d-da03-4882-a944-88c707ddc3f7", Org: "ORG@AdobeOrg", Sandbox: "prod",
		Timestamp: time.Date(2025, 6, 24, 16, 50, 28, 318_123_456, time.UTC), RequestID: "req-1",
		AssetType: audit.AssetDataset, AssetID: "685ad754fb1abe2b263df4b3", AssetName: "my-dataset",
		Action: audit.ActionUpdate, Status: audit.StatusSuccess, User: "u@example.com", ClientID: "client",
		Details: map[string]any{"rowExpiration": map[string]any{"adobe_lakeHouse": map[string]any{
			"before": map[string]any{"ttlValue": "P3M"}, "after": map[string]any{"ttlValue": "P6M"},
		}}, "rowsDeleted": int64(9_007_199_254_740_993)},
	}
}

// roundTrip gives the event's details back as the storage adapter reads them from jsonb: Postgres' text of the
// value, decoded with json.Number.
func roundTrip(t *testing.T, stored string) map[string]any {
	t.Helper()
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(stored)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&out))
	return out
}

func TestCanonical(t *testing.T) {
	t.Parallel()

	t.Run("FixedLayout", func(t *testing.T) {
		t.Parallel()
		ev := sampleEvent()
		ev.Details = map[string]any{"b": 1.50, "a": []any{"x\"\\\n", nil, true}, "é": "ü<"}
		require.NoError(t, ev.Seal(7, audit.GenesisHash))
		content, err := ev.Canonical()
		require.NoError(t, err)
		require.Equal(t, `["retention.audit.v1","ORG@AdobeOrg",7,"`+audit.GenesisHash+`","6ecc125d-da03-4882-a944-88c707ddc3f7",`+
			`"prod","2025-06-24T16:50:28.318123Z","req-1","Dataset","685ad754fb1abe2b263df4b3","my-dataset","Update","Success",`+
			`"u@example.com","client",{"a":["x\"\\\u000a",null,true],"b":15e-1,"é":"ü<"}]`, string(content))
		require.Len(t, ev.Hash, 64)
	})

	t.Run("SurvivesJSONBRoundTrip", func(t *testing.T) {
		t.Parallel()
		ev := sampleEvent()
		require.NoError(t, ev.Seal(1, audit.GenesisHash))
		want := ev.Hash
		// jsonb sorts keys its own way, drops whitespace and writes numbers as numeric: none of it may matter.
		ev.Details = roundTrip(t, `{"rowsDeleted": 9007199254740993, "rowExpiration": {"adobe_lakeHouse": {"after": {"ttlValue": "P6M"}, "before": {"ttlValue": "P3M"}}}}`)
		got, err := ev.ComputeHash()
		require.NoError(t, err)
		require.Equal(t, want, got)
	})

	t.Run("NumbersAreExactDecimals", func(t *testing.T) {
		t.Parallel()
		hashOf := func(details string) string {
			ev := sampleEvent()
			ev.Details = roundTrip(t, details)
			h, err := ev.ComputeHash()
			require.NoError(t, err)
			return h
		}
		require.Equal(t, hashOf(`{"n": 100}`), hashOf(`{"n": 1e2}`))
		require.Equal(t, hashOf(`{"n": 1.50}`), hashOf(`{"n": 15E-1}`))
		require.Equal(t, hashOf(`{"n": 0.0}`), hashOf(`{"n": -0}`))
		require.NotEqual(t, hashOf(`{"n": 9007199254740993}`), hashOf(`{"n": 9007199254740992}`), "no digit is lost to float64")
		require.NotEqual(t, hashOf(`{"n": 1}`), hashOf(`{"n": "1"}`))
	})

	t.Run("EveryFieldCounts", func(t *testing.T) {
		t.Parallel()
		base := sampleEvent()
		require.NoError(t, base.Seal(3, audit.GenesisHash))
		edits := map[string]func(e *audit.Event){
			"Org": func(e *audit.Event) { e.Org = "OTHER" }, "Seq": func(e *audit.Event) { e.Seq = 4 },
			"PrevHash": func(e *audit.Event) { e.PrevHash = "1" + e.PrevHash[1:] }, "ID": func(e *audit.Event) { e.ID = "x" },
			"Sandbox":   func(e *audit.Event) { e.Sandbox = "dev" },
			"Timestamp": func(e *audit.Event) { e.Timestamp = e.Timestamp.Add(time.Microsecond) },
			"RequestID": func(e *audit.Event) { e.RequestID = "r" }, "AssetType": func(e *audit.Event) { e.AssetType = "Schema" },
			"AssetID": func(e *audit.Event) { e.AssetID = "a" }, "AssetName": func(e *audit.Event) { e.AssetName = "n" },
			"Action": func(e *audit.Event) { e.Action = "Delete" }, "Status": func(e *audit.Event) { e.Status = "Failure" },
			"User": func(e *audit.Event) { e.User = "v" }, "ClientID": func(e *audit.Event) { e.ClientID = "c" },
			"Details": func(e *audit.Event) { e.Details = map[string]any{} },
		}
		for name, edit := range edits {
			ev := *base
			edit(&ev)
			h, err := ev.ComputeHash()
			require.NoError(t, err)
			require.NotEqual(t, base.Hash, h, name)
		}
	})

	t.Run("FieldBoundariesAreUnambiguous", func(t *testing.T) {
		t.Parallel()
		a, b := sampleEvent(), sampleEvent()
		a.AssetID, a.AssetName = "ab", "c"
		b.AssetID, b.AssetName = "a", "bc"
		ha, err := a.ComputeHash()
		require.NoError(t, err)
		hb, err := b.ComputeHash()
		require.NoError(t, err)
		require.NotEqual(t, ha, hb)
	})

	t.Run("SealCutsToMicroseconds", func(t *testing.T) {
		t.Parallel()
		ev := sampleEvent()
		require.NoError(t, ev.Seal(1, audit.GenesisHash))
		require.Equal(t, 318_123_000, ev.Timestamp.Nanosecond())
		require.Equal(t, int64(1), ev.Seq)
		require.Equal(t, audit.GenesisHash, ev.PrevHash)
	})
}
