package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// pageSizesCursor measures a page's rows before they are read, in the page's order: the size of each payload as
// stored, decompressed (concatenating '{}' returns the detoasted value). That is about the size of its JSON text,
// at a small fraction of the cost of printing the text to measure it (docs/storage.md, "Figures behind code
// choices"); strings full of escaped characters print larger, which FindRows catches once it has the text. Through
// a cursor, Postgres computes only the rows fetched, so measuring stops soon after the bound whatever the page's
// limit.
const pageSizesCursor = `DECLARE page_sizes NO SCROLL CURSOR FOR SELECT pg_column_size(page.payload || '{}'::jsonb) FROM (%s) page`

// pageSizesFetches are the rows each FETCH of pageSizesCursor asks for: few at first, where a page of large rows
// ends, then more, so a page of small rows takes a handful of round trips.
var pageSizesFetches = []int{16, 64, 256, 1024}

// pageWithin measures the rows of query (rowQuery's, with args, in a transaction) and returns how many of them a
// page of at most limit rows and about maxBytes of payload holds, at least one, and whether maxBytes cut it short
// of the rows that follow.
func pageWithin(ctx context.Context, tx pgx.Tx, query string, args []any, limit, maxBytes int) (int, bool, error) {
	if _, err := tx.Exec(ctx, fmt.Sprintf(pageSizesCursor, query), args...); err != nil {
		return 0, false, err
	}
	n, total := 0, 0
	for i := 0; n < limit; i++ {
		fetch := pageSizesFetches[min(i, len(pageSizesFetches)-1)]
		rows, err := tx.Query(ctx, fmt.Sprintf(`FETCH %d FROM page_sizes`, fetch))
		if err != nil {
			return 0, false, err
		}
		sizes, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return 0, false, err
		}
		for _, size := range sizes {
			if n > 0 && total+size > maxBytes {
				return n, true, closePageSizes(ctx, tx)
			}
			n, total = n+1, total+size
		}
		if len(sizes) < fetch {
			break
		}
	}
	return min(n, limit), false, closePageSizes(ctx, tx)
}

func closePageSizes(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `CLOSE page_sizes`)
	return err
}

// withinBytes cuts rows, read, before the row whose payload would take the page past maxBytes, keeping at least
// one; it reports whether it cut. It makes the bound exact where pageWithin's measure was short.
func withinBytes(rows []catalog.Row, maxBytes int) ([]catalog.Row, bool) {
	total := 0
	for i, r := range rows {
		total += len(r.Payload)
		if i > 0 && total > maxBytes {
			return rows[:i], true
		}
	}
	return rows, false
}
