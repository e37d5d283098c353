package postgres_test

import (
	"bytes"
	"context"
	"iter"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// ingest is an ingestion as the API makes it: the events, one a line and numbered from 1, read as an NDJSON body
// by catalog's event reader, validated against the rules the row service gives, and written by it.
func ingest(ctx context.Context, rows *postgres.RowService, c *catalog.Caller, datasetID string, events iter.Seq[[]byte], opts catalog.IngestOptions) (*catalog.IngestResult, error) {
	var body bytes.Buffer
	for ev := range events {
		if bytes.IndexByte(ev, '\n') >= 0 {
			panic("an event of ingest spans lines: " + string(ev))
		}
		body.Write(ev)
		body.WriteByte('\n')
	}
	w, err := rows.BeginIngest(ctx, c, datasetID, opts)
	if err != nil {
		return nil, err
	}
	r := catalog.NewEventReader(&body, catalog.NDJSON, w.Rules())
	res := &catalog.IngestResult{}
	if err := w.Write(ctx, r.Rows(res), res); err != nil {
		return res, err
	}
	return res, r.Err()
}

// rawEvents is lines as ingest takes them.
func rawEvents(lines ...string) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for _, l := range lines {
			if !yield([]byte(l)) {
				return
			}
		}
	}
}
