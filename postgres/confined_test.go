package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// The tests of this file hold the hot paths to statements that each touch the rows of one dataset: the condition
// under which a store distributed by dataset (docs/scaling.md, on Citus) runs each of them on the one node that
// holds that dataset, as a router query, instead of on every node.

// distributionColumn is the column each table would be distributed by (docs/scaling.md): the dataset. The stores'
// partitions (lake_rows_p202501, …) inherit their parent's.
var distributionColumn = map[string]string{
	"lake_rows": "dataset_id", "profile_rows": "dataset_id", "row_stats": "dataset_id", "ttl_settings": "dataset_id",
	"row_overrides": "dataset_id", "row_expirations": "dataset_id", "datasets": "id",
}

// distributedBy returns the distribution column of a relation a plan scans, and false for a table that is not
// distributed by dataset (row_partitions, ttl_policies, the audit tables, …).
func distributedBy(relation string) (string, bool) {
	if isStorePartition(relation) {
		return "dataset_id", true
	}
	col, ok := distributionColumn[relation]
	return col, ok
}

// isStorePartition reports whether a relation is a partition of a store's table.
func isStorePartition(relation string) bool {
	return strings.HasPrefix(relation, "lake_rows_") || strings.HasPrefix(relation, "profile_rows_")
}

// recordedStatement is a statement a connection sent while a hot path ran, with the arguments it was sent with.
type recordedStatement struct {
	path, sql string
	args      []any
}

// statementRecorder is a pgx tracer that records every statement and COPY of the pool's connections while a path
// is set: the statements a hot path sends, whatever function builds them.
type statementRecorder struct {
	mu     sync.Mutex
	path   string
	stmts  []recordedStatement
	copies map[string][]string // path → tables COPY wrote to
}

// TraceQueryStart implements pgx.QueryTracer. A statement with named arguments is recorded as pgx sends it, with
// its parameters numbered.
func (r *statementRecorder) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path != "" {
		sql, args := data.SQL, statementArgs(data.Args)
		if rw := queryRewriter(data.Args); rw != nil {
			var err error
			if sql, args, err = rw.RewriteQuery(ctx, conn, sql, args); err != nil {
				sql = "-- " + err.Error() // fails to plan, naming the error
			}
		}
		r.stmts = append(r.stmts, recordedStatement{path: r.path, sql: sql, args: args})
	}
	return ctx
}

// queryRewriter returns the rewriter (pgx.NamedArgs) among the options in front of a statement's arguments, if any.
func queryRewriter(args []any) pgx.QueryRewriter {
	for _, a := range args {
		switch a := a.(type) {
		case pgx.QueryRewriter:
			return a
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
			continue
		}
		return nil
	}
	return nil
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r *statementRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (r *statementRecorder) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path != "" {
		r.copies[r.path] = append(r.copies[r.path], data.TableName.Sanitize())
	}
	return ctx
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (r *statementRecorder) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// statementArgs drops the options pgx takes in front of a statement's arguments (its exec mode).
func statementArgs(args []any) []any {
	for len(args) > 0 {
		switch args[0].(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
			args = args[1:]
			continue
		}
		break
	}
	return slices.Clone(args)
}

// confinementBundle is a database whose pool records what the hot paths send, with the services they go through.
type confinementBundle struct {
	*sweepBundle
	previews *postgres.PreviewService
	rec      *statementRecorder
}

func setupConfinement(t *testing.T) *confinementBundle {
	t.Helper()
	rec := &statementRecorder{copies: map[string][]string{}}
	db, err := postgres.OpenTraced(context.Background(), testdb.New(t), rec)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	b := &confinementBundle{sweepBundle: setupSweepOn(t, db), rec: rec}
	b.previews = postgres.NewPreviewService(db, period(t, "P1D"))
	return b
}

// on records the statements fn sends as the hot path name.
func (b *confinementBundle) on(t *testing.T, name string, fn func()) {
	t.Helper()
	b.rec.mu.Lock()
	b.rec.path = name
	b.rec.mu.Unlock()
	defer func() {
		b.rec.mu.Lock()
		b.rec.path = ""
		b.rec.mu.Unlock()
	}()
	fn()
}

// TestHotPathsTouchOneDataset drives every hot path (ingestion with and without _id, a re-sent _id, also under a
// legal hold, pages of rows, the TTL limits, a dataset's GET, a PATCH of its TTL, a delete by _id, previews with
// and without override rows) and asks Postgres, through EXPLAIN, whether each statement they sent touches the
// rows of one dataset only.
//
// The statements are recorded by a tracer on the pool, so none is missed whatever builds it, and each is planned
// again with the arguments it was sent with (EXPLAIN (VERBOSE) shows every condition with its qualified columns and
// the bound values). A statement passes when every scan of a table distributed by dataset (distributionColumn) is
// restricted, by a top-level conjunct of its own conditions or of a join above it, to its distribution column
// equal to one value, or equal to the distribution column of another such scan (a co-located join), and when all
// those values are the same dataset. That is what lets Citus route the statement to one shard group. A dataset
// listed in an array (= ANY) passes only alone. Statements that plan no rows (BEGIN, SET, LOCK TABLE, CREATE TABLE
// … PARTITION OF) are not planned; COPY writes the one dataset of its chunk (ingest.go, copyChunk), and is checked to
// go into the stores' partitions. The exemptions (hotPathExemptions) are named with why, as docs/scaling.md lists
// them. TestConfinementCheckFindsCrossDatasetStatements holds the check able to fail.
func TestHotPathsTouchOneDataset(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	ctx := context.Background()
	plain, overridden := b.newDataset(t, "plain"), b.newDataset(t, "overridden")
	for _, id := range []string{plain, overridden} {
		b.setTTL(t, id, "P3M")
	}
	// Both datasets share partitions, so that a statement reading a partition's rows or counters by anything but
	// the dataset would read the other's.
	b.ingestLines(t, overridden, `{"timestamp":"2024-11-02T00:00:00Z","_id":"o1"}`,
		`{"timestamp":"2024-12-02T00:00:00Z","_id":"o2","_ttl":"P10D"}`)
	b.now = b.now.Add(time.Hour)

	b.on(t, "IngestWithoutIDs", func() {
		b.ingestLines(t, plain, `{"timestamp":"2024-11-01T00:00:00Z","v":1}`, `{"timestamp":"2024-12-01T00:00:00Z","v":2}`)
	})
	b.on(t, "IngestWithIDs", func() {
		b.ingestLines(t, plain, `{"timestamp":"2024-11-03T00:00:00Z","_id":"a"}`, `{"timestamp":"2024-12-03T00:00:00Z","_id":"b"}`)
	})
	b.on(t, "IngestResentID", func() {
		b.ingestLines(t, plain, `{"timestamp":"2024-12-04T00:00:00Z","_id":"a","v":"again"}`)
	})
	b.on(t, "ReadPages", func() {
		page, err := b.rows.FindRows(ctx, b.caller, plain, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 2})
		require.NoError(t, err)
		require.Len(t, page.Rows, 2)
		last := page.Rows[1]
		start := time.Date(2024, 10, 1, 0, 0, 0, 0, time.UTC)
		page, err = b.rows.FindRows(ctx, b.caller, plain, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10,
			Start: &start, After: &catalog.RowCursor{Timestamp: last.Timestamp, ID: last.ID}, MaxBytes: 1 << 20})
		require.NoError(t, err)
		require.Len(t, page.Rows, 2)
	})
	b.on(t, "ReadTTL", func() {
		_, limits, err := b.datasets.TTLLimits(ctx, b.caller, plain)
		require.NoError(t, err)
		require.NotEmpty(t, limits)
	})
	b.on(t, "GetDataset", func() {
		ds, err := b.datasets.FindDatasetByID(ctx, b.caller, plain)
		require.NoError(t, err)
		require.Equal(t, int64(4), ds.Metrics.RowCount)
	})
	b.on(t, "PatchTTL", func() { b.setTTL(t, plain, "P2M") })
	b.on(t, "IngestAfterPatch", func() {
		b.ingestLines(t, plain, `{"timestamp":"2024-12-05T00:00:00Z","_id":"c"}`)
	})
	b.on(t, "DeleteByID", func() { require.NoError(t, b.rows.DeleteRow(ctx, b.caller, plain, "b")) })
	// The row phase after the shortened TTL: keyset batches by index.
	b.on(t, "RowPhase", func() { b.sweepDatasetOnce(t, plain, "00000000-0000-0000-0000-0000000000c1") })
	b.on(t, "Preview", func() {
		for _, id := range []string{plain, overridden} {
			_, err := b.previews.Preview(ctx, b.caller, id, catalog.LakeHouse, nil, true)
			require.NoError(t, err)
			_, err = b.previews.Preview(ctx, b.caller, id, catalog.LakeHouse, new(period(t, "P1M")), false)
			require.NoError(t, err)
		}
	})
	// A re-sent _id of a held dataset keeps the stored version (keepVersions) and writes a Replace event.
	b.placeHold(t, overridden)
	b.on(t, "IngestResentIDUnderHold", func() {
		b.ingestLines(t, overridden, `{"timestamp":"2024-11-02T00:00:00Z","_id":"o1","v":"again"}`)
	})

	planned, perPath := 0, map[string]int{}
	for _, st := range b.rec.stmts {
		if why, ok := hotPathExemptions[st.sql]; ok {
			t.Logf("%s: exempt (%s)", st.path, why)
			continue
		}
		if !plannable(st.sql) {
			continue
		}
		planned++
		perPath[st.path]++
		violations, err := confinementViolations(ctx, b.db.Pool, st.sql, st.args)
		require.NoError(t, err, "%s: %s", st.path, st.sql)
		for _, v := range violations {
			t.Errorf("%s: %s\nin: %s", st.path, v, oneLine(st.sql))
		}
	}
	t.Logf("statements planned, by hot path: %v", perPath)
	require.True(t, slices.ContainsFunc(b.rec.stmts, func(st recordedStatement) bool {
		return st.path == "RowPhase" && strings.Contains(st.sql, "ORDER BY r.ts, r.row_id LIMIT")
	}), "the row phase deleted in keyset batches")
	require.True(t, slices.ContainsFunc(b.rec.stmts, func(st recordedStatement) bool {
		return st.path == "IngestResentIDUnderHold" && strings.Contains(st.sql, "SET replaced_at")
	}), "the held dataset's re-sent _id kept its stored version")
	require.Greater(t, planned, 50, "the hot paths were recorded")
	for _, path := range []string{"IngestWithoutIDs", "IngestWithIDs", "IngestResentID", "IngestAfterPatch", "IngestResentIDUnderHold"} {
		require.NotEmpty(t, b.rec.copies[path], "%s copied its rows", path)
		for _, table := range b.rec.copies[path] {
			require.Regexp(t, `^"(lake|profile)_rows_p\w+"$`, table, "%s copies straight into a partition", path)
		}
	}
}

// sweepDatasetOnce records a running run and sweeps the dataset's rows as its part for the dataset does.
func (b *confinementBundle) sweepDatasetOnce(t *testing.T, id, runID string) {
	t.Helper()
	b.startRun(t, runID, retention.Period{})
	_, err := b.sweeper.SweepDataset(context.Background(), postgres.Sweep{RunID: runID, Store: catalog.LakeHouse, At: b.now}, id)
	require.NoError(t, err)
}

// hotPathExemptions are the statements of the hot paths that read across datasets by design, and why
// (docs/scaling.md, "What the test holds").
var hotPathExemptions = map[string]string{
	postgres.PartitionSizesSQL: "storageSize divides each partition's size by the rows of every dataset in it, measured at most once a minute",
}

// plannable reports whether a statement reads or writes rows, so that EXPLAIN can plan it.
func plannable(sql string) bool {
	fields := strings.Fields(sql)
	if len(fields) == 0 {
		return false
	}
	switch strings.ToUpper(fields[0]) {
	case "SELECT", "WITH", "INSERT", "UPDATE", "DELETE":
		return true
	}
	return false
}

// TestConfinementCheckFindsCrossDatasetStatements holds the check of TestHotPathsTouchOneDataset able to fail: it
// must find every statement here that reads rows of several datasets, and pass the one that reads one dataset's.
func TestConfinementCheckFindsCrossDatasetStatements(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	ctx := context.Background()
	one, other := b.newDataset(t, "one"), b.newDataset(t, "other")
	b.ingestLines(t, one, `{"timestamp":"2024-12-01T00:00:00Z","_id":"x"}`)
	b.ingestLines(t, other, `{"timestamp":"2024-12-01T00:00:00Z","_id":"y"}`)
	shared := b.partitionsOf(t, one)
	require.Equal(t, shared, b.partitionsOf(t, other), "the datasets share a partition")
	for _, tc := range []struct {
		name, sql, want string
		args            []any
	}{
		{name: "JoinBySettingID", want: "ttl_settings h is not restricted to one dataset",
			sql:  `SELECT count(*) FROM lake_rows r JOIN ttl_settings h ON h.id = r.setting_id WHERE r.dataset_id = $1`,
			args: []any{one}},
		{name: "SeveralDatasets", want: "row_stats is restricted to several datasets",
			sql:  `SELECT dataset_id, sum(row_count) FROM row_stats WHERE dataset_id = ANY($1) GROUP BY 1`,
			args: []any{[]string{one, other}}},
		{name: "TwoDatasetsJoined", want: "scans name 2 datasets",
			sql:  `SELECT count(*) FROM lake_rows r JOIN row_stats st ON st.dataset_id = $2 WHERE r.dataset_id = $1`,
			args: []any{one, other}},
		{name: "DatasetInsideOr", want: "row_stats st is not restricted to one dataset",
			sql:  `SELECT count(*) FROM row_stats st WHERE st.dataset_id = $1 OR st.row_count > 1`,
			args: []any{one}},
		{name: "WholePartition", want: shared[0] + " r is not restricted to one dataset",
			sql: `DELETE FROM ` + shared[0] + ` r WHERE r.placed_expiry <= now()`},
		{name: "CountersOfAPartition", want: "row_stats st is not restricted to one dataset",
			sql: postgres.PartitionSizesSQL, args: []any{shared}},
		{name: "OneDatasetCoLocated", want: "",
			sql:  `SELECT count(*) FROM lake_rows r JOIN ttl_settings h ON h.dataset_id = r.dataset_id AND h.id = r.setting_id WHERE r.dataset_id = $1`,
			args: []any{one}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			violations, err := confinementViolations(ctx, b.db.Pool, tc.sql, tc.args)
			require.NoError(t, err)
			if tc.want == "" {
				require.Empty(t, violations)
				return
			}
			require.NotEmpty(t, violations)
			require.Contains(t, strings.Join(violations, "\n"), tc.want)
		})
	}
}

// confinementViolations plans sql with args (EXPLAIN, in a transaction rolled back) and returns what confines it to
// no single dataset, as TestHotPathsTouchOneDataset defines it; none when every scan of a table distributed by
// dataset is restricted to one and the same dataset.
func confinementViolations(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, sql string, args []any) ([]string, error) {
	scans, err := plannedScans(ctx, pool, sql, args)
	if err != nil {
		return nil, err
	}
	cols := map[string]string{} // alias → distribution column, of every scan of a distributed table
	for _, s := range scans {
		cols[s.alias] = s.column
		// The scans of a store's partitions are aliased r_1, r_2, …; conditions above them name the parent, r.
		if m := partitionAlias.FindStringSubmatch(s.alias); m != nil && isStorePartition(s.relation) {
			cols[m[1]] = s.column
		}
	}
	var violations []string
	values := map[string]bool{}
	for _, s := range scans {
		vals, ok := s.restriction(cols, args)
		switch {
		case !ok:
			violations = append(violations, fmt.Sprintf("%s is not restricted to one dataset (conditions: %s)", s.name(), strings.Join(s.conds, "; ")))
		case len(vals) > 1:
			violations = append(violations, fmt.Sprintf("%s is restricted to several datasets: %v", s.name(), vals))
		}
		for _, v := range vals {
			values[v] = true
		}
	}
	if len(values) > 1 {
		violations = append(violations, fmt.Sprintf("scans name %d datasets", len(values)))
	}
	return violations, nil
}

// plannedScans plans sql with args (EXPLAIN, in a transaction rolled back) and returns its scans of tables
// distributed by dataset, with their conditions (collectScans).
func plannedScans(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, sql string, args []any) ([]planScan, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	plan, err := explain(ctx, tx, sql, args)
	if err != nil {
		return nil, err
	}
	var scans []planScan
	collectScans(plan[0]["Plan"].(map[string]any), nil, &scans)
	return scans, nil
}

// explain returns the plan of sql with args, from EXPLAIN (VERBOSE, FORMAT JSON): the conditions with qualified
// columns and the arguments bound. The arguments are encoded as the statement itself types them (Postgres does not
// infer every parameter's type through EXPLAIN), in the unnamed statement, so the plan is the custom one a request
// gets.
func explain(ctx context.Context, tx pgx.Tx, sql string, args []any) ([]map[string]any, error) {
	conn := tx.Conn()
	desc, err := conn.PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	if len(desc.ParamOIDs) != len(args) {
		return nil, fmt.Errorf("describe: %d parameters, %d arguments", len(desc.ParamOIDs), len(args))
	}
	values := make([][]byte, len(args))
	for i, a := range args {
		if values[i], err = conn.TypeMap().Encode(desc.ParamOIDs[i], pgtype.TextFormatCode, a, nil); err != nil {
			return nil, fmt.Errorf("encode argument %d: %w", i+1, err)
		}
	}
	res := conn.PgConn().ExecParams(ctx, `EXPLAIN (VERBOSE, FORMAT JSON) `+sql, values, desc.ParamOIDs, nil, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("explain: %w", res.Err)
	}
	var plan []map[string]any
	if err := json.Unmarshal(res.Rows[0][0], &plan); err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return plan, nil
}

// planScan is a scan of a table distributed by dataset, with the conditions that restrict its rows: its own and
// those of the joins above it.
type planScan struct {
	relation, alias, column string
	conds                   []string
}

func (s planScan) name() string {
	if s.alias == s.relation {
		return s.relation
	}
	return s.relation + " " + s.alias
}

// scanConds and joinConds are the keys of EXPLAIN's JSON that hold a node's conditions on its own rows and, for a
// join, on the pairs it joins.
var (
	scanConds = []string{"Index Cond", "Recheck Cond", "Filter", "TID Cond"}
	joinConds = []string{"Hash Cond", "Merge Cond", "Join Filter"}
)

// collectScans appends the scans of distributed tables in the plan node and below it; above holds the join
// conditions of the nodes above it.
func collectScans(node map[string]any, above []string, scans *[]planScan) {
	var here []string
	for _, key := range joinConds {
		if c, ok := node[key].(string); ok {
			here = append(here, c)
		}
	}
	above = append(slices.Clip(above), here...)
	if rel, ok := node["Relation Name"].(string); ok && node["Node Type"] != "ModifyTable" {
		if col, ok := distributedBy(rel); ok {
			alias, _ := node["Alias"].(string)
			s := planScan{relation: rel, alias: alias, column: col, conds: slices.Clone(above)}
			for _, key := range scanConds {
				if c, ok := node[key].(string); ok {
					s.conds = append(s.conds, c)
				}
			}
			// A bitmap heap scan's index conditions are on the bitmap index scans below it.
			for _, child := range children(node) {
				if ic, ok := child["Index Cond"].(string); ok && strings.HasPrefix(fmt.Sprint(child["Node Type"]), "Bitmap") {
					s.conds = append(s.conds, ic)
				}
			}
			*scans = append(*scans, s)
		}
	}
	for _, child := range children(node) {
		collectScans(child, above, scans)
	}
}

func children(node map[string]any) []map[string]any {
	list, _ := node["Plans"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

var (
	// partitionAlias is the alias EXPLAIN gives the scan of one partition of a table aliased as its first group.
	partitionAlias = regexp.MustCompile(`^(\w+)_\d+$`)
	// equalsValue is "alias.column = 'value'::text" (or a parameter, in a generic plan).
	equalsValue = regexp.MustCompile(`^(\w+)\.(\w+) = (?:'((?:[^']|'')*)'::text|\$(\d+))$`)
	// equalsArray is "alias.column = ANY ('{…}'::text[])" (or a parameter).
	equalsArray = regexp.MustCompile(`^(\w+)\.(\w+) = ANY \((?:'((?:[^']|'')*)'::text\[\]|\$(\d+))\)$`)
	// equalsColumn is "alias.column = alias.column".
	equalsColumn = regexp.MustCompile(`^(\w+)\.(\w+) = (\w+)\.(\w+)$`)
)

// restriction returns the datasets the scan's conditions restrict it to, and false when none of their top-level
// conjuncts restricts its distribution column to a value or to another scan's distribution column (cols).
func (s planScan) restriction(cols map[string]string, args []any) ([]string, bool) {
	restricted := false
	var values []string
	for _, cond := range s.conds {
		for _, c := range conjuncts(cond) {
			if m := equalsValue.FindStringSubmatch(c); m != nil && m[1] == s.alias && m[2] == s.column {
				restricted = true
				values = append(values, boundValue(m[3], m[4], args)...)
			}
			if m := equalsArray.FindStringSubmatch(c); m != nil && m[1] == s.alias && m[2] == s.column {
				restricted = true
				values = append(values, arrayValues(m[3], m[4], args)...)
			}
			if m := equalsColumn.FindStringSubmatch(c); m != nil {
				for _, pair := range [][2][2]string{{{m[1], m[2]}, {m[3], m[4]}}, {{m[3], m[4]}, {m[1], m[2]}}} {
					own, other := pair[0], pair[1]
					if own[0] == s.alias && own[1] == s.column && other[0] != s.alias && cols[other[0]] == other[1] {
						restricted = true
					}
				}
			}
		}
	}
	slices.Sort(values)
	return slices.Compact(values), restricted
}

// boundValue is the value of an equality: the literal, or the argument a parameter names.
func boundValue(literal, param string, args []any) []string {
	if param == "" {
		return []string{strings.ReplaceAll(literal, "''", "'")}
	}
	var n int
	_, _ = fmt.Sscan(param, &n)
	if n < 1 || n > len(args) {
		return []string{"$" + param}
	}
	return []string{fmt.Sprint(args[n-1])}
}

// arrayValues is the elements of an = ANY array: of the literal (Postgres' text form), or of the argument a
// parameter names.
func arrayValues(literal, param string, args []any) []string {
	if param != "" {
		var n int
		_, _ = fmt.Sscan(param, &n)
		if ids, ok := args[n-1].([]string); ok && n >= 1 && n <= len(args) {
			return ids
		}
		return []string{"$" + param, "…"}
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(literal, "{"), "}")
	if inner == "" {
		return nil
	}
	var out []string
	for _, v := range strings.Split(inner, ",") {
		out = append(out, strings.Trim(v, `"`))
	}
	return out
}

// conjuncts splits a condition as EXPLAIN prints it into its top-level AND terms, each without its outer
// parentheses: an equality under an OR restricts nothing.
func conjuncts(cond string) []string {
	cond = stripParens(strings.TrimSpace(cond))
	var out []string
	depth, inQuote, start := 0, false, 0
	for i := 0; i < len(cond); i++ {
		switch c := cond[i]; {
		case c == '\'':
			inQuote = !inQuote
		case inQuote:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0 && strings.HasPrefix(cond[i:], " AND "):
			out = append(out, stripParens(strings.TrimSpace(cond[start:i])))
			start = i + len(" AND ")
			i += len(" AND ") - 1
		}
	}
	return append(out, stripParens(strings.TrimSpace(cond[start:])))
}

// stripParens removes parentheses that enclose the whole expression.
func stripParens(s string) string {
	for len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' && closesAtEnd(s) {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// closesAtEnd reports whether the parenthesis that opens s closes at its last character.
func closesAtEnd(s string) bool {
	depth, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			inQuote = !inQuote
		case inQuote:
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i == len(s)-1
			}
		}
	}
	return false
}

// oneLine is a statement on one line, for messages.
func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }

// TestRunJoinsNoRowsAcrossDatasets holds a whole run (drops, the boundary walk beside them, and the row phase after a
// shortened TTL) to statements that never join rows of one dataset with another's. A run's statements read many
// datasets by design (a drop checks every group of a partition, a walk deletes every dataset's expired rows of a
// block range), so they are not held to one dataset as the hot paths are; but each join between tables distributed
// by dataset must pair rows of the same dataset (crossDatasetJoins), which a store distributed by dataset runs on
// each node alone (docs/scaling.md): the drop check's and the row phase's listing (groupJoins) and the walk
// (DeleteBlocks) joined a row's setting by its id only, the shape TestJoinCheckFindsJoinsAcrossDatasets finds.
func TestRunJoinsNoRowsAcrossDatasets(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	ctx := context.Background()
	kept, shortened := b.newDataset(t, "kept"), b.newDataset(t, "shortened")
	b.setTTL(t, kept, "P1M")
	b.setTTL(t, shortened, "P3M")
	for _, id := range []string{kept, shortened} {
		b.ingestLines(t, id, `{"timestamp":"2024-10-15T00:00:00Z"}`, `{"timestamp":"2024-11-15T00:00:00Z"}`,
			`{"timestamp":"2024-12-15T00:00:00Z"}`, `{"timestamp":"2024-12-31T12:00:00Z"}`)
	}
	b.now = b.now.Add(time.Hour)
	b.setTTL(t, shortened, "P1M")
	b.now = b.now.Add(20 * 24 * time.Hour)

	var removed map[string]int64
	b.on(t, "Run", func() { removed = b.sweep(t, "00000000-0000-0000-0000-0000000000d1", retention.Period{}, true) })
	require.Equal(t, map[string]int64{kept: 3, shortened: 3}, removed, "drops, the walk and the row phase all removed rows")

	planned := 0
	for _, st := range b.rec.stmts {
		if !plannable(st.sql) {
			continue
		}
		planned++
		violations, err := crossDatasetJoins(ctx, b.db.Pool, st.sql, st.args)
		require.NoError(t, err, st.sql)
		for _, v := range violations {
			t.Errorf("%s\nin: %s", v, oneLine(st.sql))
		}
	}
	require.Greater(t, planned, 10, "the run was recorded")
}

// TestJoinCheckFindsJoinsAcrossDatasets holds crossDatasetJoins able to fail: a join of a row's setting by its id
// alone is found, in the shape groupJoins had, and the co-located join passes.
func TestJoinCheckFindsJoinsAcrossDatasets(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	ctx := context.Background()
	id := b.newDataset(t, "one")
	b.ingestLines(t, id, `{"timestamp":"2024-12-01T00:00:00Z"}`)
	for _, tc := range []struct{ name, sql, want string }{
		{name: "RowsBySettingID", want: "ttl_settings h",
			sql: `SELECT count(*) FROM lake_rows r JOIN ttl_settings h ON h.id = r.setting_id`},
		{name: "CountersBySettingID", want: "ttl_settings h",
			sql: `SELECT count(*) FROM row_stats st LEFT JOIN ttl_settings h ON h.id = st.setting_id WHERE h.ttl IS NOT NULL`},
		{name: "CoLocated", want: "",
			sql: `SELECT count(*) FROM row_stats st LEFT JOIN ttl_settings h ON h.dataset_id = st.dataset_id AND h.id = st.setting_id
			      WHERE h.ttl IS NOT NULL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			violations, err := crossDatasetJoins(ctx, b.db.Pool, tc.sql, nil)
			require.NoError(t, err)
			if tc.want == "" {
				require.Empty(t, violations)
				return
			}
			require.NotEmpty(t, violations)
			require.Contains(t, strings.Join(violations, "\n"), tc.want)
		})
	}
}

// columnRef is a qualified column in a condition as EXPLAIN prints it: alias.column.
var columnRef = regexp.MustCompile(`\b([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)\b`)

// crossDatasetJoins plans sql with args and returns each scan of a table distributed by dataset whose conditions
// (its own, or those of a join above it) name a column of another such scan that no chain of equalities between
// distribution columns ties it to, anywhere in the plan: a join that may pair rows of different datasets.
func crossDatasetJoins(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, sql string, args []any) ([]string, error) {
	scans, err := plannedScans(ctx, pool, sql, args)
	if err != nil {
		return nil, err
	}
	cols, names := map[string]string{}, map[string]string{}
	for _, s := range scans {
		cols[s.canonical()], names[s.canonical()] = s.column, s.name()
	}
	tied := tiedScans(scans, cols)
	var violations []string
	for _, s := range scans {
		for _, other := range s.joined(cols) {
			if tied.find(s.canonical()) != tied.find(other) {
				violations = append(violations, fmt.Sprintf("%s joins %s without equal %s (conditions: %s)",
					s.name(), names[other], s.column, strings.Join(s.conds, "; ")))
			}
		}
	}
	slices.Sort(violations)
	return slices.Compact(violations), nil
}

// canonical is the alias conditions name the scan by: its parent's for the scan of a store's partition (r for r_1).
func (s planScan) canonical() string {
	if m := partitionAlias.FindStringSubmatch(s.alias); m != nil && isStorePartition(s.relation) {
		return m[1]
	}
	return s.alias
}

// aliasSets is a union-find over scans' aliases.
type aliasSets map[string]string

func (u aliasSets) find(a string) string {
	for u[a] != "" && u[a] != a {
		a = u[a]
	}
	return a
}

// tiedScans groups the scans that a top-level equality of their distribution columns joins, directly or through
// others: the rows of one group are of one dataset.
func tiedScans(scans []planScan, cols map[string]string) aliasSets {
	u := aliasSets{}
	for _, s := range scans {
		for _, cond := range s.conds {
			for _, c := range conjuncts(cond) {
				m := equalsColumn.FindStringSubmatch(c)
				if m == nil || cols[m[1]] != m[2] || cols[m[3]] != m[4] {
					continue
				}
				u[u.find(m[1])] = u.find(m[3])
			}
		}
	}
	return u
}

// joined returns the other distributed scans, by canonical alias, whose columns the scan's conditions name.
func (s planScan) joined(cols map[string]string) []string {
	var out []string
	for _, cond := range s.conds {
		for _, m := range columnRef.FindAllStringSubmatch(cond, -1) {
			if _, ok := cols[m[1]]; ok && m[1] != s.canonical() && m[1] != s.alias && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}
