package catalog_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// readerBundle is what the event reader tests share: the rules of a time-series dataset.
type readerBundle struct {
	rules catalog.RowContext
}

func setupReader(t testing.TB) *readerBundle {
	t.Helper()
	return &readerBundle{rules: catalog.RowContext{
		Dataset: &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.TimeSeries}},
		Lake:    catalog.BuiltinLimits[catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}],
		Now:     time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC),
	}}
}

// read reads every event of body, and the reader's error.
func (b *readerBundle) read(body io.Reader, format catalog.EventFormat) ([]catalog.Event, error) {
	r := catalog.NewEventReader(body, format, b.rules)
	var out []catalog.Event
	for r.Next() {
		out = append(out, r.Event())
	}
	return out, r.Err()
}

// lines returns the line of each event, and the reason of each refused one by its line.
func lines(events []catalog.Event) ([]int, map[int]string) {
	var all []int
	refused := map[int]string{}
	for _, ev := range events {
		all = append(all, ev.Line)
		if ev.Err != nil {
			refused[ev.Line] = catalog.ErrorMessage(ev.Err)
		}
	}
	return all, refused
}

const event = `{"timestamp":"2026-11-01T00:00:00Z","page":"/a"}`

func TestEventReaderNDJSON(t *testing.T) {
	t.Parallel()

	t.Run("CountsBlankLinesAndRefusesBadOnes", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		body := event + "\n\n  \r\nnot json\n" + `{"page":"/b"}` + "\r\n" + event
		events, err := b.read(strings.NewReader(body), catalog.NDJSON)
		require.NoError(t, err)
		all, refused := lines(events)
		require.Equal(t, []int{1, 4, 5, 6}, all)
		require.Equal(t, map[int]string{
			4: "the event must be a JSON object",
			5: "timestamp is required in a time-series dataset (an RFC 3339 time such as 2026-01-31T12:00:00Z)",
		}, refused)
		require.JSONEq(t, `{"page":"/a"}`, string(events[3].Row.Payload), "the last line needs no newline")
	})

	t.Run("LongLineRefusedWholeAndReadingGoesOn", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		long := `{"timestamp":"2026-11-01T00:00:00Z","pad":"` + strings.Repeat("x", catalog.MaxEventLine) + `"}`
		events, err := b.read(strings.NewReader(event+"\n"+long+"\n"+event+"\n"), catalog.NDJSON)
		require.NoError(t, err)
		all, refused := lines(events)
		require.Equal(t, []int{1, 2, 3}, all)
		require.Equal(t, map[int]string{2: fmt.Sprintf("the event is longer than %d bytes", catalog.MaxEventLine)}, refused)
	})

	t.Run("LinesLongerThanTheBufferAreWhole", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		pad := strings.Repeat("y", 200<<10)
		body := `{"timestamp":"2026-11-01T00:00:00Z","pad":"` + pad + `"}` + "\n" + event
		events, err := b.read(iotest.HalfReader(strings.NewReader(body)), catalog.NDJSON)
		require.NoError(t, err)
		require.Len(t, events, 2)
		require.NoError(t, events[0].Err)
		require.JSONEq(t, `{"pad":"`+pad+`"}`, string(events[0].Row.Payload))
		require.NoError(t, events[1].Err)
	})

	t.Run("ReadErrorAfterTheLinesBeforeIt", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		cut := errors.New("connection reset")
		events, err := b.read(io.MultiReader(strings.NewReader(event+"\n"), iotest.ErrReader(cut)), catalog.NDJSON)
		require.ErrorIs(t, err, cut)
		require.Len(t, events, 1)
	})

	t.Run("DefaultIngestedAt", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		b.rules.AllowIngestedAt = true
		def := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		b.rules.DefaultIngestedAt = &def
		events, err := b.read(strings.NewReader(event+"\n"+`{"timestamp":"2026-11-01T00:00:00Z","_ingestedAt":"2026-10-05T00:00:00Z"}`), catalog.NDJSON)
		require.NoError(t, err)
		require.Equal(t, def, *events[0].Row.IngestedAt)
		require.Equal(t, time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC), *events[1].Row.IngestedAt, "an event's own _ingestedAt wins")

		old := time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC)
		b.rules.DefaultIngestedAt = &old
		events, err = b.read(strings.NewReader(event), catalog.NDJSON)
		require.NoError(t, err)
		require.Equal(t, "_ingestedAt 1800-01-01T00:00:00Z must lie between 1900 and 9000", catalog.ErrorMessage(events[0].Err))
	})
}

func TestEventReaderJSONArray(t *testing.T) {
	t.Parallel()

	t.Run("ElementsByPosition", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		events, err := b.read(strings.NewReader(" [ "+event+", 3,\n"+event+" ] \n"), catalog.JSONArray)
		require.NoError(t, err)
		all, refused := lines(events)
		require.Equal(t, []int{1, 2, 3}, all)
		require.Equal(t, map[int]string{2: "the event must be a JSON object"}, refused)
	})

	for _, tc := range []struct {
		name, body, message string
		events              int
	}{
		{"NotAnArray", `{}`, "an application/json body must be a JSON array of events", 0},
		{"Empty", ``, "an application/json body must be a JSON array of events", 0},
		{"BrokenElement", `[` + event + `,{"a":]`, "element 2 of the array and everything after it is not valid JSON: invalid character ']' looking for beginning of value (at byte", 1},
		{"NotClosed", `[` + event, "the JSON array of events is not closed: the body ends after element 1 without ]", 1},
		{"GoesOn", `[` + event + `] []`, "the body goes on after the ] that closes its array of events", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupReader(t)
			events, err := b.read(strings.NewReader(tc.body), catalog.JSONArray)
			require.Len(t, events, tc.events, "the events before the break are read")
			var e *catalog.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, "malformed-json", e.Type)
			require.Equal(t, "body", e.Field)
			require.Contains(t, e.Message, tc.message)
		})
	}

	t.Run("ReadErrorAsItIs", func(t *testing.T) {
		t.Parallel()
		b := setupReader(t)
		cut := errors.New("connection reset")
		_, err := b.read(io.MultiReader(strings.NewReader("["+event+","), iotest.ErrReader(cut)), catalog.JSONArray)
		require.ErrorIs(t, err, cut)
	})
}

// TestEventReaderRows: Rows yields the valid rows and records the refused lines in the result.
func TestEventReaderRows(t *testing.T) {
	t.Parallel()
	b := setupReader(t)
	r := catalog.NewEventReader(strings.NewReader(event+"\n{}\n"+event), catalog.NDJSON, b.rules)
	res := &catalog.IngestResult{}
	n := 0
	for range r.Rows(res) {
		n++
	}
	require.NoError(t, r.Err())
	require.Equal(t, 2, n)
	require.Equal(t, 1, res.Rejected)
	require.Equal(t, 2, res.Errors[0].Line)
}

func ExampleEventReader() {
	rules := catalog.RowContext{Dataset: &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.TimeSeries}}}
	body := strings.NewReader(`{"timestamp":"2026-11-01T00:00:00Z","_id":"a"}` + "\n" + `{"_id":"b"}` + "\n")
	r := catalog.NewEventReader(body, catalog.NDJSON, rules)
	for r.Next() {
		ev := r.Event()
		if ev.Err != nil {
			fmt.Printf("line %d refused: %s\n", ev.Line, catalog.ErrorMessage(ev.Err))
			continue
		}
		fmt.Printf("line %d: row %s at %s\n", ev.Line, ev.Row.ID, ev.Row.Timestamp.Format(time.RFC3339))
	}
	if err := r.Err(); err != nil {
		fmt.Println("the body broke:", err)
	}
	// Output:
	// line 1: row a at 2026-11-01T00:00:00Z
	// line 2 refused: timestamp is required in a time-series dataset (an RFC 3339 time such as 2026-01-31T12:00:00Z)
}

// BenchmarkEventReader reads and validates a body of 5,000 events, as one POST of the ingestion benchmark sends
// (docs/benchmarks.md).
func BenchmarkEventReader(b *testing.B) {
	for _, tc := range []struct {
		name   string
		withID bool
		format catalog.EventFormat
	}{{"NDJSONWithID", true, catalog.NDJSON}, {"NDJSONWithoutID", false, catalog.NDJSON}, {"ArrayWithID", true, catalog.JSONArray}} {
		b.Run(tc.name, func(b *testing.B) {
			rb := setupReader(b)
			body := benchBody(tc.withID, tc.format)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r := catalog.NewEventReader(bytes.NewReader(body), tc.format, rb.rules)
				n := 0
				for r.Next() {
					if err := r.Event().Err; err != nil {
						b.Fatal(err)
					}
					n++
				}
				if r.Err() != nil || n != 5000 {
					b.Fatal(n, r.Err())
				}
			}
		})
	}
}

func benchBody(withID bool, format catalog.EventFormat) []byte {
	var buf bytes.Buffer
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	sep := "\n"
	if format == catalog.JSONArray {
		buf.WriteString("[")
		sep = ","
	}
	for i := range 5000 {
		if i > 0 {
			buf.WriteString(sep)
		}
		id := ""
		if withID {
			id = fmt.Sprintf(`"_id":"evt-%d",`, i)
		}
		fmt.Fprintf(&buf, `{"timestamp":%q,%s"page":"/cart/%d","user":{"id":"u%d","plan":"pro"},"value":%d.5}`,
			ts.Add(time.Duration(i)*time.Second).Format(time.RFC3339), id, i, i%100, i)
	}
	if format == catalog.JSONArray {
		buf.WriteString("]")
	} else {
		buf.WriteString("\n")
	}
	return buf.Bytes()
}
