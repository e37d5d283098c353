package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// DefaultChunkRows is how many rows an ingestion commits at a time: large enough that COPY's per-statement cost
// vanishes, small enough that a streaming client sees its rows stored while it is still sending.
const DefaultChunkRows = 5000

// RowService implements catalog.RowService.
type RowService struct {
	db        *DB
	chunkRows int
}

// NewRowService returns a RowService on db committing chunkRows rows at a time (0: DefaultChunkRows).
func NewRowService(db *DB, chunkRows int) *RowService {
	if chunkRows <= 0 {
		chunkRows = DefaultChunkRows
	}
	return &RowService{db: db, chunkRows: chunkRows}
}

var _ catalog.RowService = (*RowService)(nil)

// currentSetting is the TTL setting in force for one store of a dataset.
type currentSetting struct {
	id  int64
	ttl *retention.Period
}

// ingestTarget is what an ingestion writes to: the dataset, its stores and their current settings.
type ingestTarget struct {
	caller   *catalog.Caller // whose ingestion it is, to read the target again (refresh)
	ds       *catalog.Dataset
	limits   catalog.Limits
	settings map[catalog.Store]currentSetting // the stores the rows go to
}

func (s *RowService) target(ctx context.Context, c *catalog.Caller, datasetID string) (*ingestTarget, error) {
	t := &ingestTarget{caller: c, settings: map[catalog.Store]currentSetting{}}
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if t.ds, err = findDataset(ctx, tx, c, datasetID, false); err != nil {
			return err
		}
		limits, err := findLimits(ctx, tx, c.Org)
		if err != nil {
			return err
		}
		t.limits = limits[t.ds.PolicyKey(catalog.LakeHouse)]
		rows, err := tx.Query(ctx, selectCurrentSettings, datasetID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var store string
			var cs currentSetting
			if err := rows.Scan(&store, &cs.id); err != nil {
				return err
			}
			st := catalog.Store(store)
			if st == catalog.Profile && !t.ds.ProfileEnabled() {
				continue // only profile-enabled datasets keep a profile copy
			}
			// The dataset row was read in the same transaction, so its TTL is this setting's.
			cs.ttl = t.ds.RowExpiration[st].TTL
			t.settings[st] = cs
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("prepare ingestion into %s: %w", datasetID, err)
	}
	return t, nil
}

// BeginIngest implements catalog.RowService.
func (s *RowService) BeginIngest(ctx context.Context, c *catalog.Caller, datasetID string, opts catalog.IngestOptions) (_ catalog.RowWriter, err error) {
	defer outage(&err)
	t, err := s.target(ctx, c, datasetID)
	if err != nil {
		return nil, err
	}
	rules := catalog.RowContext{Dataset: t.ds, Lake: t.limits, AllowIngestedAt: opts.AllowIngestedAt, Now: s.db.now()}
	return &rowWriter{s: s, t: t, rules: rules, opts: opts}, nil
}

// rowWriter implements catalog.RowWriter: the ingestion of one body, into the target BeginIngest read.
type rowWriter struct {
	s     *RowService
	t     *ingestTarget
	rules catalog.RowContext
	opts  catalog.IngestOptions
}

// Rules implements catalog.RowWriter. A PATCH during the ingestion changes where its later chunks go (refresh), not
// the rules its events were validated against: they are the dataset's when the ingestion began.
func (w *rowWriter) Rules() catalog.RowContext { return w.rules }

// Write implements catalog.RowWriter.
func (w *rowWriter) Write(ctx context.Context, rows iter.Seq[catalog.RowInput], res *catalog.IngestResult) (err error) {
	defer outage(&err)
	return w.s.write(ctx, w.t, rows, res, w.opts)
}

// IngestRows stores rows that are valid by construction, such as an operator's synthetic data, without the JSON
// round trip of an EventReader. Overrides are the caller's to keep within limits.
func (s *RowService) IngestRows(ctx context.Context, c *catalog.Caller, datasetID string, rows iter.Seq[catalog.RowInput], opts catalog.IngestOptions) (*catalog.IngestResult, error) {
	t, err := s.target(ctx, c, datasetID)
	if err != nil {
		return nil, err
	}
	res := &catalog.IngestResult{}
	return res, s.write(ctx, t, rows, res, opts)
}

// write writes rows in chunks of s.chunkRows, each committed as it fills. res says which lines each commit covered
// (IngestResult.CommittedThrough); when a chunk fails, the rejections of its lines are taken back (Uncommit), so
// that res counts exactly what the ingestion committed.
func (s *RowService) write(ctx context.Context, t *ingestTarget, rows iter.Seq[catalog.RowInput], res *catalog.IngestResult, opts catalog.IngestOptions) error {
	chunk := make([]catalog.RowInput, 0, s.chunkRows)
	flush := func() error {
		if len(chunk) == 0 {
			res.Commit() // lines read and all rejected
			return nil
		}
		now := s.db.now()
		startClocks(t.ds, chunk, now)
		stored, refused, err := s.writeChunk(ctx, t, chunk, now)
		for _, in := range refused {
			// Which of the two fields the line carried is gone with its text; the reason names both.
			res.Reject(in.Line, catalog.ErrOverridesRefused(t.ds.ID, "_expiresAt or _ttl"))
		}
		if err != nil {
			res.Uncommit()
			return err
		}
		res.Accepted += len(stored)
		res.ExpiredOnArrival += expiredOnArrival(t, stored, now)
		res.Commit()
		if opts.ChunkCommitted != nil {
			opts.ChunkCommitted(len(chunk))
		}
		chunk = chunk[:0]
		return nil
	}
	for in := range rows {
		chunk = append(chunk, in)
		if len(chunk) >= s.chunkRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// startClocks sets the clock start of the chunk's rows (retention.Clock) where the event reader could not: a
// record's write is its ingestion time, now unless an import gives its own. Rows of time-series datasets carry their
// event time already.
func startClocks(ds *catalog.Dataset, chunk []catalog.RowInput, now time.Time) {
	for i := range chunk {
		in := &chunk[i]
		ingested := now
		if in.IngestedAt != nil {
			ingested = *in.IngestedAt
		}
		in.Timestamp = ds.Clock().Start(in.Timestamp, ingested)
		if ds.Clock() == retention.LastWrite {
			in.IngestedAt = &ingested
		}
		if in.Timestamp.IsZero() {
			in.Timestamp = ingested // an operator's synthetic event without a time (IngestRows) dates from its storing
		}
	}
}

// expiredOnArrival counts the rows already past their expiry under the lake's current setting: a backfill of old
// events is accepted and hidden at once.
func expiredOnArrival(t *ingestTarget, chunk []catalog.RowInput, now time.Time) int {
	ttl := t.settings[catalog.LakeHouse].ttl
	if ttl == nil {
		return 0
	}
	n := 0
	for _, in := range chunk {
		if e := placedExpiry(in, ttl); e != nil && !e.After(now) {
			n++
		}
	}
	return n
}

// chunkAttempts bounds how often a chunk is placed again because a run dropped one of its partitions between the
// placement and the chunk's transaction. The transaction locks its partitions first, so once it has them no run
// can drop them under it, and a retry has done no work yet. A run may drop the same partition again and again,
// though (the past partition, or one the chunk made that is still empty, goes whole in every run), so the last
// attempt does not race: it pins its partitions (pinPartitions) before it writes.
const chunkAttempts = 5

// writeChunk stores one chunk in one transaction, in the partitions placeChunk chose, under the settings in force
// when the transaction writes it. Those include the rowOverrides switch: while it is refused, the rows carrying
// their own expiry are not stored but returned, for the ingestion to refuse their lines, even when they were read
// before the switch (the chunk commits after it).
func (s *RowService) writeChunk(ctx context.Context, t *ingestTarget, chunk []catalog.RowInput, now time.Time) (stored, refused []catalog.RowInput, err error) {
	for attempt := range chunkAttempts {
		if t.ds.RowOverrides == catalog.OverridesRefused {
			var out []catalog.RowInput
			chunk, out = splitOverrides(chunk)
			refused = append(refused, out...)
		}
		if len(chunk) == 0 {
			return nil, refused, nil
		}
		chunk := lastPerID(chunk)
		if attempt > 0 {
			if err = s.db.rows.loadPartitions(ctx); err != nil {
				break
			}
		}
		var groups map[string]*placedGroup
		if groups, err = s.db.rows.placeChunk(ctx, t, chunk, now); err != nil {
			break
		}
		if s.db.rows.hooks.beforeChunkTx != nil {
			s.db.rows.hooks.beforeChunkTx(slices.Sorted(maps.Keys(groups)))
		}
		if attempt == chunkAttempts-1 {
			err = s.db.rows.copyPinned(ctx, t, chunk, groups, now)
		} else {
			err = s.db.inTx(ctx, func(tx pgx.Tx) error { return s.db.rows.copyChunk(ctx, tx, t, chunk, groups, now) })
		}
		if errors.Is(err, errSettingsChanged) {
			// Rows ingested after a change follow only the new setting: read it, and place the chunk under it.
			if err = s.refresh(ctx, t); err != nil {
				break
			}
			// The chunk is stored after the change, so it is ingested after it too.
			now, err = s.db.now(), errSettingsChanged
			continue
		}
		if !isUndefinedTable(err) {
			break
		}
	}
	if err != nil {
		return nil, refused, fmt.Errorf("store %d rows of %s: %w", len(chunk), t.ds.ID, err)
	}
	return chunk, refused, nil
}

// splitOverrides parts the chunk into the rows without an expiry of their own and those with one, keeping the
// order of each.
func splitOverrides(chunk []catalog.RowInput) (kept, out []catalog.RowInput) {
	for _, in := range chunk {
		if hasOverride(in) {
			out = append(out, in)
			continue
		}
		kept = append(kept, in)
	}
	return kept, out
}

// refresh reads the target again, for the rest of the ingestion: a PATCH changed its settings meanwhile.
func (s *RowService) refresh(ctx context.Context, t *ingestTarget) error {
	fresh, err := s.target(ctx, t.caller, t.ds.ID)
	if err != nil {
		return err
	}
	*t = *fresh
	return nil
}

// errSettingsChanged says that a PATCH changed the dataset's TTL settings after the chunk was placed under them.
var errSettingsChanged = errors.New("the dataset's TTL settings changed since the chunk was placed")

// FindRows implements catalog.RowService. It reads in one snapshot (repeatable read), so that the partitions the
// counters name and the rows read agree: a partition made after the snapshot holds no row it can see. A page
// bounded by bytes is measured first (pageWithin) and then read, in the same snapshot, so both see the same rows.
func (s *RowService) FindRows(ctx context.Context, c *catalog.Caller, datasetID string, f catalog.RowFilter) (_ *catalog.RowPage, err error) {
	defer outage(&err)
	out := &catalog.RowPage{}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, false)
		if err != nil {
			return err
		}
		now := s.db.now()
		var hiddenThrough *time.Time
		if !f.IncludeExpired {
			if hiddenThrough, err = readBound(ctx, tx, ds, f.Store, now); err != nil {
				return err
			}
		}
		parts, err := datasetPartitions(ctx, tx, datasetID, f.Store)
		if err != nil || parts.none() {
			return err
		}
		// Each query's text names the dataset's partitions, so it is sent unprepared rather than filling the
		// statement cache.
		query, args := rowQuery(datasetID, f, now, hiddenThrough, parts)
		if f.MaxBytes > 0 {
			if f.Limit, out.Cut, err = pageWithin(ctx, tx, query, append([]any{pgx.QueryExecModeExec}, args...), f.Limit, f.MaxBytes); err != nil {
				return fmt.Errorf("measure rows of %s: %w", datasetID, err)
			}
			query, args = rowQuery(datasetID, f, now, hiddenThrough, parts)
		}
		rows, err := tx.Query(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
		if err != nil {
			return fmt.Errorf("read rows of %s: %w", datasetID, err)
		}
		out.Rows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.Row, error) {
			var r catalog.Row
			err := row.Scan(&r.ID, &r.Timestamp, &r.IngestedAt, &r.OwnExpiry, &r.Never, &r.Payload, &r.Expiry, &r.Expired, &r.ReplacedAt)
			return r, err
		})
		if err == nil && f.MaxBytes > 0 {
			var cut bool
			out.Rows, cut = withinBytes(out.Rows, f.MaxBytes)
			out.Cut = out.Cut || cut
		}
		return err
	})
	return out, err
}

// rowQuery is a page of the dataset's current, unexpired rows (with IncludeExpired, of all its stored rows, the
// expired ones marked, and the versions a hold kept), read through the store's parent table from the partitions
// that hold them (parts). Its arguments are named (pgx.StrictNamedArgs), as the expiry fragments it splices name
// theirs.
func rowQuery(datasetID string, f catalog.RowFilter, now time.Time, hiddenThrough *time.Time, parts partitionFilter) (string, []any) {
	args := pgx.StrictNamedArgs{"dataset": datasetID, "at": now, "limit": f.Limit}
	where := []string{"r.dataset_id = @dataset", parts.sql()}
	expired, hist := "false", ""
	order := "r.ts, r.row_id"
	if f.IncludeExpired {
		hist, expired = expiredJoined(f.Store)
		order += ", " + versionOrder
	} else {
		where = append(where, "NOT "+expiredInDataset(f.Store), "r.replaced_at IS NULL")
	}
	if hiddenThrough != nil {
		where, args["hidden_through"] = append(where, "r.ts > @hidden_through"), *hiddenThrough
	}
	if f.Start != nil {
		where, args["start"] = append(where, "r.ts >= @start"), *f.Start
	}
	if f.End != nil {
		where, args["end"] = append(where, "r.ts < @end"), *f.End
	}
	if f.After != nil {
		where = append(where, afterCursor(f, args))
	}
	query := `SELECT r.row_id, r.ts, r.ingested_at, r.own_expiry, r.never_expires, r.payload,
       ` + currentExpiry + `, ` + expired + `, r.replaced_at
FROM ` + storeTable(f.Store) + ` r
` + joinCurrentSetting(f.Store) + `
` + hist + `
WHERE ` + strings.Join(where, " AND ") + `
ORDER BY ` + order + `
LIMIT @limit`
	return query, []any{args}
}

// versionOrder orders the versions of one (ts, _id) in an IncludeExpired read: those a hold kept by when they were
// replaced, the current one last. Only such reads need it: a read of current rows holds one per _id.
const versionOrder = `coalesce(r.replaced_at, 'infinity')`

// afterCursor is the keyset condition of a page after the cursor, its values added to args.
func afterCursor(f catalog.RowFilter, args pgx.StrictNamedArgs) string {
	args["after_ts"], args["after_id"] = f.After.Timestamp, f.After.ID
	after := "@after_ts::timestamptz, @after_id::text"
	if !f.IncludeExpired {
		return "(r.ts, r.row_id) > (" + after + ")"
	}
	replaced := "'infinity'"
	if f.After.ReplacedAt != nil {
		replaced, args["after_replaced"] = "@after_replaced", *f.After.ReplacedAt
	}
	return "(r.ts, r.row_id, " + versionOrder + ") > (" + after + ", " + replaced + "::timestamptz)"
}

// DeleteRow implements catalog.RowService.
func (s *RowService) DeleteRow(ctx context.Context, c *catalog.Caller, datasetID, rowID string) (err error) {
	defer outage(&err)
	now := s.db.now()
	return s.db.inTx(ctx, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, false)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockRows(catalog.Stores, nil)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, datasetLockSQL, datasetID); err != nil {
			return err
		}
		if err := lockDatasetHoldShared(ctx, tx, datasetID); err != nil {
			return err
		}
		if err := refuseIfHeld(ctx, tx, datasetID, "deleting its rows"); err != nil {
			return err
		}
		// The Delete event's id names the removal, so that its manifest is found from the event.
		ev := datasetEvent(c, ds, audit.ActionDelete, now, nil)
		ev.ID = audit.NewID()
		n, err := s.db.rows.deleteRowsByID(ctx, tx, datasetID, []string{rowID}, removal{removalRowDelete, ev.ID}, now)
		if err != nil {
			return err
		}
		if n == 0 {
			return catalog.Errorf(catalog.ENOTFOUND, "row %q was not found in dataset %s", rowID, datasetID)
		}
		ev.Details = map[string]any{"rowId": rowID, "rowsDeleted": n}
		return writeAuditEvent(ctx, tx, ev)
	})
}
