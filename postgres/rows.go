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
	"github.com/jackc/pgx/v5/pgconn"

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

// write writes rows in chunks of s.chunkRows, each committed as it fills.
func (s *RowService) write(ctx context.Context, t *ingestTarget, rows iter.Seq[catalog.RowInput], res *catalog.IngestResult, opts catalog.IngestOptions) error {
	chunk := make([]catalog.RowInput, 0, s.chunkRows)
	flush := func() error {
		if len(chunk) == 0 {
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
			return err
		}
		res.Accepted += len(stored)
		res.ExpiredOnArrival += expiredOnArrival(t, stored, now)
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

// placedExpiry is the row's placed expiry under a setting (retention.Row.Placed): nil when the setting keeps rows
// forever or the row never expires.
func placedExpiry(in catalog.RowInput, ttl *retention.Period) *time.Time {
	return retention.Row{Timestamp: in.Timestamp, OwnExpiry: in.OwnExpiry, Never: in.Never}.Placed(ttl)
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
			if err = s.db.loadPartitions(ctx); err != nil {
				break
			}
		}
		var groups map[string]*placedGroup
		if groups, err = s.db.placeChunk(ctx, t, chunk, now); err != nil {
			break
		}
		if s.db.hooks.beforeChunkTx != nil {
			s.db.hooks.beforeChunkTx(slices.Sorted(maps.Keys(groups)))
		}
		if attempt == chunkAttempts-1 {
			err = s.db.copyPinned(ctx, t, chunk, groups, now)
		} else {
			err = s.db.inTx(ctx, func(tx pgx.Tx) error { return s.db.copyChunk(ctx, tx, t, chunk, groups, now) })
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

// settingsStillCurrent checks, in the chunk's transaction and under its lock on the dataset row (which a PATCH's
// FOR UPDATE conflicts with), that the settings the chunk was placed under are still in force. A row stored under
// a setting that ended before it arrived would be judged by that setting: a run could delete it before its expiry
// under the setting in force when it was ingested.
func settingsStillCurrent(ctx context.Context, tx pgx.Tx, t *ingestTarget) error {
	rows, err := tx.Query(ctx, selectCurrentSettings, t.ds.ID)
	if err != nil {
		return fmt.Errorf("read settings of %s: %w", t.ds.ID, err)
	}
	current, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Store string
		ID    int64
	}])
	if err != nil {
		return fmt.Errorf("read settings of %s: %w", t.ds.ID, err)
	}
	for _, c := range current {
		// A record dataset's rows carry no setting (id 0): they never expire, whatever its settings say.
		if placed, ok := t.settings[catalog.Store(c.Store)]; ok && placed.id != 0 && placed.id != c.ID {
			return errSettingsChanged
		}
	}
	return nil
}

// placementAttempts bounds how often placeChunk reads the partitions again because another replica created one
// that overlaps a cell it was about to create.
const placementAttempts = 3

// placeChunk groups the chunk's rows by the partition each goes to in each store (placedAt), and creates those that
// do not exist yet, after reading the partitions again so as not to miss one another replica made.
func (db *DB) placeChunk(ctx context.Context, t *ingestTarget, chunk []catalog.RowInput, now time.Time) (map[string]*placedGroup, error) {
	loaded := false
	for attempt := 0; ; attempt++ {
		groups, missing := db.group(t, chunk, now)
		if len(missing) == 0 {
			return groups, nil
		}
		if !loaded {
			if err := db.loadPartitions(ctx); err != nil {
				return nil, err
			}
			loaded = true
			continue
		}
		var err error
		for _, spec := range missing {
			if err = db.createPartition(ctx, spec); err != nil {
				break
			}
		}
		if err == nil {
			return groups, nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != invalidObjectDefinition || attempt >= placementAttempts {
			return nil, fmt.Errorf("create partition: %w", err)
		}
		if err := db.loadPartitions(ctx); err != nil {
			return nil, err
		}
	}
}

// group places the chunk's rows in each store with the partitions the cache knows, and returns the groups and the
// partitions among them that do not exist yet. Cells are calendar-aligned and at least a month wide, so the rows of
// one month of expiry, past and far rows aside, go to one partition: it is placed once per month.
func (db *DB) group(t *ingestTarget, chunk []catalog.RowInput, now time.Time) (map[string]*placedGroup, []partitionSpec) {
	groups := map[string]*placedGroup{}
	var missing []partitionSpec
	for store, cs := range t.settings {
		existing := db.partitionsOf(store)
		byMonth := map[int]partitionSpec{}
		for i := range chunk {
			in := &chunk[i]
			e := placedExpiry(*in, cs.ttl)
			var spec partitionSpec
			month := 0
			if e != nil && e.After(now.Add(-pastMargin)) && e.Before(farBoundary) {
				month = e.UTC().Year()*12 + int(e.UTC().Month())
			}
			if cached, ok := byMonth[month]; ok {
				spec = cached
			} else {
				spec = placedAt(store, e, now, existing)
				if month != 0 {
					byMonth[month] = spec
				}
			}
			key := spec.name()
			g := groups[key]
			if g == nil {
				g = &placedGroup{spec: spec, settingID: cs.id}
				groups[key] = g
				if !slices.ContainsFunc(existing, func(p partitionSpec) bool { return p.name() == key }) {
					missing = append(missing, spec)
				}
			}
			g.rows = append(g.rows, in)
		}
	}
	slices.SortFunc(missing, func(a, b partitionSpec) int { return strings.Compare(a.name(), b.name()) })
	return groups, missing
}

// placedGroup is the rows of a chunk bound for one partition.
type placedGroup struct {
	spec      partitionSpec
	settingID int64
	rows      []*catalog.RowInput
}

// lastPerID keeps the last event of each _id in a chunk, so that an _id sent twice is stored once, with the later
// content.
func lastPerID(chunk []catalog.RowInput) []catalog.RowInput {
	seen := make(map[string]int, len(chunk))
	out := chunk[:0:0]
	for _, in := range chunk {
		if i, ok := seen[in.ID]; ok {
			out[i] = in
			continue
		}
		seen[in.ID] = len(out)
		out = append(out, in)
	}
	return out
}

// datasetLockSQL serializes the chunks of one dataset, so two concurrent uploads of the same _id cannot both see it
// missing and both store it.
const datasetLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('rows:' || $1, 0))`

var rowColumns = []string{"dataset_id", "row_id", "ts", "ingested_at", "placed_expiry", "setting_id", "own_expiry", "never_expires", "payload"}

// datasetLiveSQL tells whether the dataset is still live, and keeps it so until the chunk commits: its row lock
// conflicts with the FOR UPDATE of DELETE /dataSets, so a delete waits for a chunk under way, and a chunk that
// waited for a delete sees it. No chunk commits after a delete has answered. The same holds for a PATCH of the
// rowOverrides switch, which it reads: no chunk stores an override after a switch to refused has answered.
const datasetLiveSQL = `SELECT deleted_at IS NULL, row_overrides_switch FROM datasets WHERE id = $1 FOR KEY SHARE`

// errDeletedWhileIngesting stops an ingestion whose dataset was deleted under it.
func errDeletedWhileIngesting(id string) error {
	return &catalog.Error{Code: catalog.ECONFLICT, Type: "dataset-deleted", Field: "id",
		Message: fmt.Sprintf("dataset %s was deleted while this body was being ingested; ingestion stopped there, and the rows stored before it go with the dataset", id)}
}

// copyChunk writes the chunk in its transaction. It takes its locks first, in the lock order (partition.go): the
// parents of the stores it writes to or deletes from, then its partitions. A partition a run dropped since the
// chunk was placed fails the lock (42P01) before anything is written; once they are locked, no run can drop a
// partition under the chunk (a drop waits at most its lock timeout, and checks the counters again afterwards,
// which then count this chunk's rows). Then it checks that its dataset is still live (datasetLiveSQL) and that the
// settings it was placed under are still in force (settingsStillCurrent).
func (db *DB) copyChunk(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput, groups map[string]*placedGroup, now time.Time) error {
	if err := tagIngestion(ctx, tx); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(groups))
	stores := slices.Collect(maps.Keys(t.settings))
	if slices.ContainsFunc(chunk, func(in catalog.RowInput) bool { return in.ClientID }) {
		stores = catalog.Stores // replacing an _id deletes from every store
	}
	if _, err := tx.Exec(ctx, lockRows(stores, names)); err != nil {
		return err
	}
	var live bool
	var overrides string
	if err := tx.QueryRow(ctx, datasetLiveSQL, t.ds.ID).Scan(&live, &overrides); err != nil {
		return fmt.Errorf("check dataset %s: %w", t.ds.ID, err)
	}
	if !live {
		return errDeletedWhileIngesting(t.ds.ID)
	}
	if catalog.RowOverrides(overrides) == catalog.OverridesRefused && slices.ContainsFunc(chunk, hasOverride) {
		return errSettingsChanged // the chunk's lines were read while overrides were allowed
	}
	if err := settingsStillCurrent(ctx, tx, t); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, datasetLockSQL, t.ds.ID); err != nil {
		return err
	}
	if err := db.replaceClientIDs(ctx, tx, t, chunk, now); err != nil {
		return err
	}
	if err := noteOverrides(ctx, tx, t, chunk); err != nil {
		return err
	}
	if err := recordIDs(ctx, tx, t.ds.ID, names, groups); err != nil {
		return err
	}
	for _, name := range names {
		g := groups[name]
		ttl := t.settings[g.spec.store].ttl
		var span groupSpan
		src := pgx.CopyFromSlice(len(g.rows), func(i int) ([]any, error) {
			in := g.rows[i]
			ingested := now
			if in.IngestedAt != nil {
				ingested = *in.IngestedAt
			}
			ts := in.Timestamp
			span.add(ingested, ts)
			return []any{t.ds.ID, in.ID, ts, ingested, placedValue(g.spec, placedExpiry(*in, ttl)), g.settingID, in.OwnExpiry, in.Never, in.Payload}, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{name}, rowColumns, src); err != nil {
			return err
		}
		if err := addStats(ctx, tx, name, t.ds.ID, g.settingID, int64(len(g.rows)), span); err != nil {
			return err
		}
	}
	return nil
}

// noteOverrides lists the chunk's stores in row_overrides when one of its rows has its own expiry, so that reads
// and runs stop bounding their scans of the dataset by event time.
func noteOverrides(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput) error {
	if !slices.ContainsFunc(chunk, hasOverride) {
		return nil
	}
	for store := range t.settings {
		if _, err := tx.Exec(ctx, `INSERT INTO row_overrides (dataset_id, store) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			t.ds.ID, string(store)); err != nil {
			return fmt.Errorf("note overrides of %s: %w", t.ds.ID, err)
		}
	}
	return nil
}

// hasOverride reports whether the row carries its own expiry (_expiresAt, _ttl or _ttl: -1).
func hasOverride(in catalog.RowInput) bool { return in.OwnExpiry != nil || in.Never }

// upsertStats adds a chunk's rows to their counter group. The group's earliest ingestion and event times only go
// down while it holds rows (a delete leaves them, so they are lower bounds, as laterGroupMayExpire needs), start
// afresh once it is empty, and stay NULL, unknown, where migration 0007 could not fill them in: LEAST alone would
// ignore the NULL and claim a bound the rows stored before it may not keep.
const upsertStats = `
INSERT INTO row_stats (partition_name, dataset_id, setting_id, row_count, max_ingested_at, min_ingested_at, min_ts)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (partition_name, dataset_id, setting_id) DO UPDATE
SET row_count = row_stats.row_count + EXCLUDED.row_count,
    max_ingested_at = GREATEST(row_stats.max_ingested_at, EXCLUDED.max_ingested_at),
    min_ingested_at = CASE WHEN row_stats.row_count = 0 THEN EXCLUDED.min_ingested_at
                           WHEN row_stats.min_ingested_at IS NOT NULL THEN LEAST(row_stats.min_ingested_at, EXCLUDED.min_ingested_at) END,
    min_ts = CASE WHEN row_stats.row_count = 0 THEN EXCLUDED.min_ts
                  WHEN row_stats.min_ts IS NOT NULL THEN LEAST(row_stats.min_ts, EXCLUDED.min_ts) END`

// groupSpan is what a chunk adds to a counter group besides its rows: their latest and earliest ingestion times and
// their earliest event time.
type groupSpan struct {
	maxIngested, minIngested, minTS time.Time
}

// add widens the span to a row's times.
func (g *groupSpan) add(ingested, ts time.Time) {
	if g.maxIngested.IsZero() || ingested.After(g.maxIngested) {
		g.maxIngested = ingested
	}
	if g.minIngested.IsZero() || ingested.Before(g.minIngested) {
		g.minIngested = ingested
	}
	if g.minTS.IsZero() || ts.Before(g.minTS) {
		g.minTS = ts
	}
}

func addStats(ctx context.Context, tx pgx.Tx, partition, datasetID string, settingID, n int64, span groupSpan) error {
	if _, err := tx.Exec(ctx, upsertStats, partition, datasetID, settingID, n, span.maxIngested, span.minIngested, span.minTS); err != nil {
		return fmt.Errorf("count rows of %s in %s: %w", datasetID, partition, err)
	}
	return nil
}

// replaceClientIDs removes the stored rows whose _id the chunk sends again, from every store, so that the chunk's
// version replaces them, as an upsert does. While the dataset is held it removes none: it marks them replaced at
// now instead (keepVersions), as S3 Object Lock keeps a held object's versions. Whether the dataset is held is read
// only when a probe may find a stored row: an event stream without re-sent _ids pays nothing for holds.
func (db *DB) replaceClientIDs(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput, now time.Time) error {
	var ids []string
	for _, in := range chunk {
		if in.ClientID {
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	parts, err := idPartitions(ctx, tx, t.ds.ID)
	if err != nil {
		return err
	}
	if db.hooks.afterPartitionLookup != nil {
		db.hooks.afterPartitionLookup()
	}
	found := probes(parts, ids)
	maybe := false
	for _, p := range found {
		maybe = maybe || (!p.parts.none() && len(p.ids) > 0)
	}
	if !maybe {
		return nil
	}
	// The chunk holds its dataset's row FOR KEY SHARE (datasetLiveSQL), which PlaceHold's FOR UPDATE of that row
	// waits for: no hold is placed between this answer and the chunk's commit, and one placed before it is seen.
	held, err := datasetHeld(ctx, tx, t.ds.ID)
	if err != nil {
		return err
	}
	if held {
		return keepVersions(ctx, tx, t, found, now)
	}
	for store, p := range found {
		if _, err := deleteIDsIn(ctx, tx, t.ds.ID, store, p.parts, p.ids, true); err != nil {
			return err
		}
	}
	return nil
}

// keepByIDSQL marks the current versions of the rows of dataset $1 with the _ids $2 replaced at $3, in place,
// through a store's parent table restricted to the partitions holding the dataset's rows (%[2]s). The rows stay in
// their partitions and counter groups, so the counters need no change.
const keepByIDSQL = `
UPDATE %[1]s r SET replaced_at = $3
WHERE r.dataset_id = $1 AND r.row_id = ANY($2) AND r.replaced_at IS NULL AND %[2]s
RETURNING r.row_id`

// maxAuditedRowIDs bounds the _ids a Replace event lists; its versionsKept counts them all.
const maxAuditedRowIDs = 100

// keepVersions marks the stored versions of the chunk's re-sent _ids replaced at now, in every store the probes
// found, and writes a Replace audit event counting them, in the chunk's transaction.
func keepVersions(ctx context.Context, tx pgx.Tx, t *ingestTarget, found map[catalog.Store]idProbe, now time.Time) error {
	perStore := map[string]any{}
	seen := map[string]bool{}
	total := 0
	for _, store := range catalog.Stores {
		p := found[store]
		if p.parts.none() || len(p.ids) == 0 {
			continue
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(keepByIDSQL, storeTable(store), p.parts.sql()), pgx.QueryExecModeExec, t.ds.ID, p.ids, now)
		if err != nil {
			return fmt.Errorf("keep versions of %s in %s: %w", t.ds.ID, storeTable(store), err)
		}
		kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("keep versions of %s in %s: %w", t.ds.ID, storeTable(store), err)
		}
		if len(kept) > 0 {
			perStore[string(store)] = len(kept)
			total += len(kept)
		}
		for _, id := range kept {
			seen[id] = true
		}
	}
	if total == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(seen))
	ids = ids[:min(len(ids), maxAuditedRowIDs)]
	return writeAuditEvent(ctx, tx, datasetEvent(t.caller, t.ds, audit.ActionReplace, now,
		map[string]any{"versionsKept": total, "stores": perStore, "rowIds": ids}))
}

// deleteByIDSQL deletes the rows of dataset $1 with the _ids $2 (%[3]s: their current versions only, or every
// version) through a store's parent table, restricted to the partitions that hold the dataset's rows (%[2]s,
// constants Postgres prunes with when it plans), and keeps each partition's counters exact. A deleted row's
// partition is the one whose range holds its placed expiry (the past one's rows are placed at -infinity, the far
// one's up to infinity): a row's tableoid names no table on a distributed store (docs/scaling.md).
const deleteByIDSQL = `
WITH gone AS (
    DELETE FROM %[1]s r WHERE r.dataset_id = $1 AND r.row_id = ANY($2) AND %[2]s%[3]s
    RETURNING r.placed_expiry, r.setting_id),
counted AS (
    SELECT p.name AS partition_name, g.setting_id, count(*) AS n
    FROM gone g JOIN row_partitions p ON p.store = $3 AND g.placed_expiry >= p.lower_bound
        AND (g.placed_expiry < p.upper_bound OR p.upper_bound = 'infinity')
    GROUP BY 1, 2),
stats AS (
    UPDATE row_stats st SET row_count = st.row_count - c.n FROM counted c
    WHERE st.partition_name = c.partition_name AND st.dataset_id = $1 AND st.setting_id = c.setting_id)
SELECT coalesce(sum(n), 0)::bigint FROM counted`

// deleteRowsByID deletes the rows with these _ids from both stores, keeping the counters exact, and returns how many
// rows it removed. It looks only in the partitions the counters say hold rows of the dataset: a probe of every
// partition of both stores for each _id made ingestion with client _ids several times slower. The counters are
// exact and every insert of the dataset's rows holds its advisory lock, as the caller does, so no row is missed.
// The caller holds the stores' parents (lockRows), so no run detaches a partition between the lookup and the
// delete; the statement names none anyway, where one naming each partition failed with 42P01 when a run had.
func (db *DB) deleteRowsByID(ctx context.Context, tx pgx.Tx, datasetID string, ids []string) (int64, error) {
	var total int64
	for _, store := range catalog.Stores {
		parts, err := datasetPartitions(ctx, tx, datasetID, store)
		if err != nil {
			return 0, err
		}
		if parts.none() {
			continue
		}
		if db.hooks.afterPartitionLookup != nil {
			db.hooks.afterPartitionLookup()
		}
		n, err := deleteIDsIn(ctx, tx, datasetID, store, parts, ids, false)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// deleteIDsIn deletes the rows of the dataset with these _ids from the partitions parts of a store (their current
// versions only, or with the versions a hold kept), keeping the counters exact, and returns how many it removed.
func deleteIDsIn(ctx context.Context, tx pgx.Tx, datasetID string, store catalog.Store, parts partitionFilter, ids []string, currentOnly bool) (int64, error) {
	if parts.none() || len(ids) == 0 {
		return 0, nil
	}
	var n int64
	versions := ""
	if currentOnly {
		versions = " AND r.replaced_at IS NULL"
	}
	query := fmt.Sprintf(deleteByIDSQL, storeTable(store), parts.sql(), versions)
	if err := tx.QueryRow(ctx, query, pgx.QueryExecModeExec, datasetID, ids, string(store)).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete rows of %s by _id from %s: %w", datasetID, storeTable(store), err)
	}
	return n, nil
}

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
		n, err := s.db.deleteRowsByID(ctx, tx, datasetID, []string{rowID})
		if err != nil {
			return err
		}
		if n == 0 {
			return catalog.Errorf(catalog.ENOTFOUND, "row %q was not found in dataset %s", rowID, datasetID)
		}
		return writeAuditEvent(ctx, tx, datasetEvent(c, ds, audit.ActionDelete, now, map[string]any{"rowId": rowID, "rowsDeleted": n}))
	})
}
