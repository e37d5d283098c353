package postgres

import (
	"context"
	"errors"
	"fmt"
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

// The row store's ingestion write path: a chunk RowService.writeChunk hands over is placed (placeChunk: each row's
// partition by its placed expiry, creating those missing), then written in one transaction (copyChunk: locks,
// replaced _ids, COPY, counters, _id filters).

// placementAttempts bounds how often placeChunk reads the partitions again because another replica created one
// that overlaps a cell it was about to create.
const placementAttempts = 3

// placeChunk groups the chunk's rows by the partition each goes to in each store (placedAt), and creates those that
// do not exist yet, after reading the partitions again so as not to miss one another replica made.
func (rs *rowStore) placeChunk(ctx context.Context, t *ingestTarget, chunk []catalog.RowInput, now time.Time) (map[string]*placedGroup, error) {
	loaded := false
	for attempt := 0; ; attempt++ {
		groups, missing := rs.group(t, chunk, now)
		if len(missing) == 0 {
			return groups, nil
		}
		if !loaded {
			if err := rs.loadPartitions(ctx); err != nil {
				return nil, err
			}
			loaded = true
			continue
		}
		var err error
		for _, spec := range missing {
			if err = rs.createPartition(ctx, spec); err != nil {
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
		if err := rs.loadPartitions(ctx); err != nil {
			return nil, err
		}
	}
}

// group places the chunk's rows in each store with the partitions the cache knows, and returns the groups and the
// partitions among them that do not exist yet. Cells are calendar-aligned and at least a month wide, so the rows of
// one month of expiry, past and far rows aside, go to one partition: it is placed once per month.
func (rs *rowStore) group(t *ingestTarget, chunk []catalog.RowInput, now time.Time) (map[string]*placedGroup, []partitionSpec) {
	groups := map[string]*placedGroup{}
	var missing []partitionSpec
	for store, cs := range t.settings {
		existing := rs.partitionsOf(store)
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

var rowColumns = []string{"dataset_id", "row_id", "ts", "ingested_at", "placed_expiry", "setting_id", "own_expiry", "never_expires", "payload", "identities", "own_expiry_source"}

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
func (rs *rowStore) copyChunk(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput, groups map[string]*placedGroup, now time.Time) error {
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
	if err := checkWriteFence(ctx, tx, t.ds.Org); err != nil {
		return err // first: an org that moved away has no dataset row left to read
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
	if err := rs.replaceClientIDs(ctx, tx, t, chunk, now); err != nil {
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
			return []any{t.ds.ID, in.ID, ts, ingested, placedValue(g.spec, placedExpiry(*in, ttl)), g.settingID, in.OwnExpiry, in.Never, in.Payload, identitiesValue(in.Identities), overrideFieldValue(in.OwnExpiryField)}, nil
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
func (rs *rowStore) replaceClientIDs(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput, now time.Time) error {
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
	if rs.hooks.afterPartitionLookup != nil {
		rs.hooks.afterPartitionLookup()
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
		if _, err := deleteIDsIn(ctx, tx, t.ds.ID, store, p.parts, p.ids, true, nil); err != nil {
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
// one's up to infinity): a row's tableoid names no table on a distributed store (docs/scaling.md). A delete that
// lists its rows (listRowDelete) returns more of each row (%[4]s) and adds its CTE (%[5]s).
const deleteByIDSQL = `
WITH gone AS (
    DELETE FROM %[1]s r WHERE r.dataset_id = $1 AND r.row_id = ANY($2) AND %[2]s%[3]s
    RETURNING r.placed_expiry, r.setting_id%[4]s)%[5]s,
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
//
// The rows are listed in the manifest of the removal rm where the store's deletionManifest is on (listRowDelete).
func (rs *rowStore) deleteRowsByID(ctx context.Context, tx pgx.Tx, datasetID string, ids []string, rm removal, now time.Time) (int64, error) {
	var total int64
	for _, store := range catalog.Stores {
		parts, err := datasetPartitions(ctx, tx, datasetID, store)
		if err != nil {
			return 0, err
		}
		if parts.none() {
			continue
		}
		if rs.hooks.afterPartitionLookup != nil {
			rs.hooks.afterPartitionLookup()
		}
		n, err := deleteIDsIn(ctx, tx, datasetID, store, parts, ids, false, &listing{rm, now})
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// deleteIDsIn deletes the rows of the dataset with these _ids from the partitions parts of a store (their current
// versions only, or with the versions a hold kept), keeping the counters exact, and returns how many it removed.
// With list, it lists them in that removal's manifest (listRowDelete).
func deleteIDsIn(ctx context.Context, tx pgx.Tx, datasetID string, store catalog.Store, parts partitionFilter, ids []string, currentOnly bool, list *listing) (int64, error) {
	if parts.none() || len(ids) == 0 {
		return 0, nil
	}
	var n int64
	versions := ""
	if currentOnly {
		versions = " AND r.replaced_at IS NULL"
	}
	returning, listed, args := "", "", []any{pgx.QueryExecModeExec, datasetID, ids, string(store)}
	if list != nil {
		returning, listed = `, r.row_id, r.ts`, listRowDelete
		args = append(args, list.removal.kind, list.removal.id, list.now)
	}
	query := fmt.Sprintf(deleteByIDSQL, storeTable(store), parts.sql(), versions, returning, listed)
	if err := tx.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete rows of %s by _id from %s: %w", datasetID, storeTable(store), err)
	}
	return n, nil
}

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

// placedExpiry is the row's placed expiry under a setting (retention.Row.Placed): nil when the setting keeps rows
// forever or the row never expires.
func placedExpiry(in catalog.RowInput, ttl *retention.Period) *time.Time {
	return retention.Row{Timestamp: in.Timestamp, OwnExpiry: in.OwnExpiry, Never: in.Never}.Placed(ttl)
}

// The own_expiry_source of a row whose own expiry came from _ttl or _expiresAt (migration 0020).
const (
	sourceTTL       byte = 't'
	sourceExpiresAt byte = 'e'
)

// overrideFieldValue is a row's own_expiry_source column: NULL for a row without an own expiry, so that a row sent
// without one stores nothing more.
func overrideFieldValue(f catalog.OverrideField) any {
	switch f {
	case catalog.OverrideTTL:
		return sourceTTL
	case catalog.OverrideExpiresAt:
		return sourceExpiresAt
	}
	return nil
}

// overrideFieldOf reads an own_expiry_source column (as text): NULL, none or unknown, is NoOverrideField.
func overrideFieldOf(v *string) catalog.OverrideField {
	switch {
	case v == nil:
		return catalog.NoOverrideField
	case *v == string(sourceTTL):
		return catalog.OverrideTTL
	case *v == string(sourceExpiresAt):
		return catalog.OverrideExpiresAt
	}
	return catalog.NoOverrideField
}

// identitiesValue is a row's identities column: NULL for a row without any, so that the identities indexes hold
// only rows an order may find.
func identitiesValue(keys []string) any {
	if len(keys) == 0 {
		return nil
	}
	return keys
}

// deleteByIdentitySQL deletes the rows of dataset $1 carrying any of the identity keys $2 (every version: a kept one
// carries the person too) from a store's parent, restricted to the partitions that hold the dataset's rows (%[2]s),
// and keeps the counters exact as deleteByIDSQL does. %[3]s is the CTE "gone", the delete itself, in one of two
// forms (identityMatchFew, identityMatchMany). It returns the count, up to $4 of the row ids, and the keys that
// matched. When the store's deletionManifest is on, it lists the rows in work order $5's manifest at $6 (listed),
// in the same statement, as a delete by _id does.
var deleteByIdentitySQL = `
WITH keys AS MATERIALIZED (SELECT unnest($2::text[]) AS k),
%[3]s` +
	fmt.Sprintf(listGoneOf, `'`+removalWorkOrder+`'`, `$5`, `$6`, `'work-order'`) + `,
counted AS (
    SELECT p.name AS partition_name, g.setting_id, count(*) AS n
    FROM gone g JOIN row_partitions p ON p.store = $3 AND g.placed_expiry >= p.lower_bound
        AND (g.placed_expiry < p.upper_bound OR p.upper_bound = 'infinity')
    GROUP BY 1, 2),
stats AS (
    UPDATE row_stats st SET row_count = st.row_count - c.n FROM counted c
    WHERE st.partition_name = c.partition_name AND st.dataset_id = $1 AND st.setting_id = c.setting_id)
SELECT (SELECT coalesce(sum(n), 0)::bigint FROM counted),
       coalesce((SELECT array_agg(row_id) FROM (SELECT DISTINCT row_id FROM gone ORDER BY 1 LIMIT $4) i), '{}'),
       coalesce((SELECT array_agg(DISTINCT x.k) FROM (SELECT unnest(g.identities) AS k FROM gone g) x
                 WHERE x.k IN (SELECT k FROM keys)), '{}')`

// identityMatchFew is deleteByIdentitySQL's delete for a few keys: the rows carrying one of them (carriesKey).
var identityMatchFew = `gone AS (
    DELETE FROM %[1]s r WHERE r.dataset_id = $1 AND ` + carriesKey("$2::text[]") + ` AND %[2]s
    RETURNING r.placed_expiry, r.setting_id, r.row_id, r.ts, r.identities)`

// carriesKey is whether row r carries one of the keys of array expression keys, written so that each partition's
// two identities indexes answer it, each key looked up in both (migration 0024): the hash index on a row's first
// identity, and the GIN index of the rows of several, whose predicate the second arm repeats so that the planner may
// use it. A row's identities are sorted and distinct, and its first one is in the hash index whatever their number.
func carriesKey(keys string) string {
	return fmt.Sprintf(`(r.identities[1] = ANY(%[1]s) OR (cardinality(r.identities) > 1 AND r.identities && %[1]s))`, keys)
}

// identityMatchMany is deleteByIdentitySQL's delete for many keys: the dataset's rows that carry identities,
// reached through its index, each identity probed in one hash of the keys built once for the statement, and
// deleted by (partition, ctid). An overlap (&&) compares each row's identities with every key, and the indexes
// look every key up in every partition: with 1,000 keys the overlap took 362 s on 1M rows where a hash of the keys
// takes a scan of the dataset's rows (issue #31's benchmark).
const identityMatchMany = `pick AS MATERIALIZED (
    SELECT DISTINCT r.tableoid AS part, r.ctid AS tid FROM %[1]s r, unnest(r.identities) u(k)
    WHERE r.dataset_id = $1 AND %[2]s AND r.identities IS NOT NULL AND u.k IN (SELECT k FROM keys)),
gone AS (
    DELETE FROM %[1]s r USING pick p WHERE r.dataset_id = $1 AND %[2]s AND r.tableoid = p.part AND r.ctid = p.tid
    RETURNING r.placed_expiry, r.setting_id, r.row_id, r.ts, r.identities)`

// fewIdentities is the most keys an order's delete looks up through the identities indexes (identityMatchFew);
// more are matched through a hash of them (identityMatchMany).
const fewIdentities = 64

// identityDeleteSQL is deleteByIdentitySQL for store table, partitions parts and n keys.
func identityDeleteSQL(table string, parts partitionFilter, n int) string {
	match := identityMatchFew
	if n > fewIdentities {
		match = identityMatchMany
	}
	return fmt.Sprintf(fmt.Sprintf(deleteByIdentitySQL, "%[1]s", "%[2]s", match), table, parts.sql())
}

// identityRemoval is what deleteRowsByIdentity removed from one store.
type identityRemoval struct {
	n       int64
	rowIDs  []string // up to maxAuditedIdentities
	matched []string // the keys that matched rows
}

// deleteRowsByIdentity deletes the dataset's rows carrying any of keys from one store for a work order, keeping the
// counters exact and listing them in the order's deletion manifest when the store keeps one.
// The caller holds the locks of a delete by _id (lockRows, datasetLockSQL, the hold lock), as deleteRowsByID's do.
func (rs *rowStore) deleteRowsByIdentity(ctx context.Context, tx pgx.Tx, workOrderID, datasetID string, store catalog.Store, keys []string, now time.Time) (identityRemoval, error) {
	var out identityRemoval
	parts, err := datasetPartitions(ctx, tx, datasetID, store)
	if err != nil || parts.none() || len(keys) == 0 {
		return out, err
	}
	query := identityDeleteSQL(storeTable(store), parts, len(keys))
	if err := tx.QueryRow(ctx, query, pgx.QueryExecModeExec, datasetID, keys, string(store), maxAuditedIdentities,
		workOrderID, now).Scan(&out.n, &out.rowIDs, &out.matched); err != nil {
		return out, fmt.Errorf("delete rows of %s by identity from %s: %w", datasetID, storeTable(store), err)
	}
	return out, nil
}
