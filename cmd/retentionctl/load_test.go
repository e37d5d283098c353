package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
)

// loadBundle is a migrated database, the CLI's environment for it and what the tests check the loads with.
type loadBundle struct {
	env      map[string]string
	pool     *pgxpool.Pool
	datasets *postgres.DatasetService
	rows     *postgres.RowService
}

func setupLoad(t *testing.T) *loadBundle {
	t.Helper()
	dbURL := testdb.New(t)
	db, err := postgres.Open(context.Background(), dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return &loadBundle{env: map[string]string{"DATABASE_URL": dbURL}, pool: db.Pool,
		datasets: postgres.NewDatasetService(db), rows: postgres.NewRowService(db, 0)}
}

func (b *loadBundle) createDataset(t *testing.T, org, name string, behavior catalog.DataBehavior) *catalog.Dataset {
	t.Helper()
	ds, err := b.datasets.CreateDataset(context.Background(), &catalog.Caller{User: "test", Org: org, Sandbox: catalog.DefaultSandbox},
		catalog.DatasetCreate{Name: name, Classification: catalog.Classification{DataBehavior: behavior, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	return ds
}

// storedRows is the dataset's row count from the counters ingestion keeps.
func (b *loadBundle) storedRows(t *testing.T, datasetID string) int64 {
	t.Helper()
	var n int64
	err := b.pool.QueryRow(context.Background(), `SELECT COALESCE(sum(row_count), 0)::bigint FROM row_stats WHERE dataset_id = $1`, datasetID).Scan(&n)
	require.NoError(t, err)
	return n
}

// ingestedAt returns each stored row's ingestion time, by the value of its "n" field.
func (b *loadBundle) ingestedAt(t *testing.T, datasetID string) map[string]time.Time {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT payload->>'n', ingested_at FROM lake_rows WHERE dataset_id = $1`, datasetID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var n string
		var at time.Time
		require.NoError(t, rows.Scan(&n, &at))
		out[n] = at.UTC()
	}
	require.NoError(t, rows.Err())
	return out
}

// loadedLine matches the summary line of a load.
var loadedLine = regexp.MustCompile(`^loaded (\d+) rows? into (\d+) datasets? in \d+\.\d s \(\d+ rows/s\)$`)

// lastLine returns the summary line, checking it is the last line printed.
func lastLine(t *testing.T, out string) string {
	t.Helper()
	require.True(t, strings.HasSuffix(out, "\n"), "%q", out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	require.Regexp(t, loadedLine, last)
	return last
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

const mixedEvents = `{"timestamp":"2026-11-01T10:00:00Z","n":"1"}
not json
{"timestamp":"2026-11-02T10:00:00Z","n":"2","_ingestedAt":"2026-11-03T00:00:00Z"}

{"n":"3"}
{"timestamp":"2026-11-04T10:00:00Z","n":"4"}
`

func TestLoadFiles(t *testing.T) {
	t.Parallel()

	t.Run("StoresGoodLinesAndReportsBadOnes", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		ds := b.createDataset(t, "O", "web", catalog.TimeSeries)
		file := writeFile(t, "events.ndjson", mixedEvents)

		out, err := ctl(t, b.env, "load", "-org", "O", "-dataset", "web", "-ingested-at", "2026-11-20T08:00:00+01:00", "-quiet", file)
		require.ErrorContains(t, err, "2 lines were rejected")
		require.Contains(t, out, file+":2: the event must be a JSON object\n")
		require.Contains(t, out, file+":5: timestamp is required in a time-series dataset")
		require.Equal(t, "loaded 3 rows into 1 dataset", lastLine(t, out)[:len("loaded 3 rows into 1 dataset")])

		require.EqualValues(t, 3, b.storedRows(t, ds.ID))
		got, err := b.rows.FindRows(context.Background(), &catalog.Caller{Org: "O", Sandbox: catalog.DefaultSandbox}, ds.ID,
			catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10})
		require.NoError(t, err)
		require.Len(t, got.Rows, 3)
		// -ingested-at is the default: a row's own _ingestedAt wins.
		require.Equal(t, map[string]time.Time{
			"1": time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC),
			"2": time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC),
			"4": time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC),
		}, b.ingestedAt(t, ds.ID))
	})

	t.Run("ManyFilesAndStdinByID", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		ds := b.createDataset(t, "O", "app", catalog.TimeSeries)
		b.createDataset(t, "OTHER", "app", catalog.TimeSeries)
		first := writeFile(t, "a.ndjson", `{"timestamp":"2026-11-01T10:00:00Z","n":"a"}`+"\n"+`{"timestamp":"2026-11-01T11:00:00Z","n":"b"}`)
		second := writeFile(t, "b.ndjson", "{\"timestamp\":\"2026-11-02T10:00:00Z\",\"n\":\"c\"}\r\n")
		var out, stderr bytes.Buffer
		stdin := strings.NewReader(`{"timestamp":"2026-11-03T10:00:00Z","n":"d","_ingestedAt":"2026-11-03T10:00:00Z"}` + "\n\n")
		env := func(name string) string { return b.env[name] }
		// Stored timestamps carry milliseconds: the window is widened to them, not to the machine's speed.
		before := time.Now().Truncate(time.Millisecond)
		err := runLoad(context.Background(), []string{"-org", "O", "-dataset", ds.ID, first, "-", second}, env, stdin, &out, &stderr)
		after := time.Now()
		require.NoError(t, err)
		require.Equal(t, "loaded 4 rows into 1 dataset", lastLine(t, out.String())[:len("loaded 4 rows into 1 dataset")])
		require.Equal(t, out.String(), lastLine(t, out.String())+"\n", "nothing else is printed")
		require.EqualValues(t, 4, b.storedRows(t, ds.ID))
		ingested := b.ingestedAt(t, ds.ID)
		require.Len(t, ingested, 4)
		require.Equal(t, time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC), ingested["d"], "an operator's import keeps _ingestedAt")
		require.False(t, ingested["a"].Before(before) || ingested["a"].After(after),
			"without one, a row is ingested while the load runs: %s, not within [%s, %s]", ingested["a"], before, after)

		// Without a terminal the count is plain lines, no carriage returns.
		bar := stderr.String()
		require.NotContains(t, bar, "\r")
		require.True(t, strings.HasSuffix(bar, "\n"), "%q", bar)
		lines := strings.Split(strings.TrimSuffix(bar, "\n"), "\n")
		require.Contains(t, lines[len(lines)-1], "(4/-, ", "%q", bar)
	})

	// The CLI reads lines with the API's reader: it trimmed Unicode spaces the API refuses, and had a line limit
	// of its own.
	t.Run("RefusesWhatTheAPIRefuses", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		ds := b.createDataset(t, "O", "web", catalog.TimeSeries)
		good := `{"timestamp":"2026-11-01T10:00:00Z","n":"1"}`
		long := `{"timestamp":"2026-11-01T10:00:00Z","pad":"` + strings.Repeat("x", catalog.MaxEventLine) + `"}`
		file := writeFile(t, "events.ndjson", good+"\n\u00a0"+good+"\n"+long+"\n")

		out, err := ctl(t, b.env, "load", "-org", "O", "-dataset", "web", "-quiet", file)
		require.ErrorContains(t, err, "2 lines were rejected")
		require.Contains(t, out, file+":2: ")
		require.Contains(t, out, fmt.Sprintf("%s:3: the event is longer than %d bytes\n", file, catalog.MaxEventLine))
		require.EqualValues(t, 1, b.storedRows(t, ds.ID))
	})

	// A load stores which field set a row's own expiry, as POST rows does (migration 0020), so that an explanation
	// tells a _ttl from an _expiresAt: the instant alone cannot.
	t.Run("RecordsWhichFieldSetTheOwnExpiry", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		ds := b.createDataset(t, "O", "web", catalog.TimeSeries)
		file := writeFile(t, "events.ndjson", `{"timestamp":"2026-11-01T10:00:00Z","n":"ttl","_ttl":"P90D"}
{"timestamp":"2026-11-01T10:00:00Z","n":"at","_expiresAt":"2027-01-30T10:00:00Z"}
{"timestamp":"2026-11-01T10:00:00Z","n":"plain"}
`)
		_, err := ctl(t, b.env, "load", "-org", "O", "-dataset", "web", "-quiet", file)
		require.NoError(t, err)
		rows, err := b.pool.Query(context.Background(), `SELECT payload->>'n', coalesce(own_expiry_source::text, 'NULL')
			FROM lake_rows WHERE dataset_id = $1`, ds.ID)
		require.NoError(t, err)
		got := map[string]string{}
		var n, source string
		_, err = pgx.ForEachRow(rows, []any{&n, &source}, func() error {
			got[n] = source
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"ttl": "t", "at": "e", "plain": "NULL"}, got, "the same instant, two fields")
	})

	t.Run("UnknownDataset", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		ds := b.createDataset(t, "OTHER", "web", catalog.TimeSeries)
		file := writeFile(t, "events.ndjson", mixedEvents)
		for _, name := range []string{"web", ds.ID} {
			out, err := ctl(t, b.env, "load", "-org", "O", "-dataset", name, "-quiet", file)
			require.ErrorContains(t, err, `-dataset: no dataset has the id or name "`+name+`" in org O, sandbox prod`)
			require.Empty(t, out)
		}
		require.Zero(t, b.storedRows(t, ds.ID))
	})
}

func TestLoadGenerate(t *testing.T) {
	t.Parallel()

	t.Run("MillionRows", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		// The progress bar goes to the test binary's stderr, which is no terminal: this also runs the plain-line bar
		// under the race detector, fed by both workers.
		out := mustCtl(t, b.env, "load", "-org", "O", "-generate", "1000000", "-datasets", "4",
			"-from", "2024-11-23", "-to", "2026-11-23")
		m := loadedLine.FindStringSubmatch(lastLine(t, out))
		require.Equal(t, []string{"1000000", "4"}, m[1:])

		ctx := context.Background()
		var datasets, counted, stored int64
		err := b.pool.QueryRow(ctx, `
SELECT count(*), COALESCE(sum((SELECT sum(s.row_count) FROM row_stats s WHERE s.dataset_id = d.id)), 0)::bigint,
       (SELECT count(*) FROM lake_rows)
FROM datasets d WHERE d.org_id = 'O' AND d.name LIKE 'synthetic-%'`).Scan(&datasets, &counted, &stored)
		require.NoError(t, err)
		require.EqualValues(t, 4, datasets)
		require.EqualValues(t, 1_000_000, counted)
		require.EqualValues(t, 1_000_000, stored)
		var users []string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(DISTINCT user_id) FROM audit_events WHERE org_id = 'O'`).Scan(&users))
		require.Equal(t, []string{"dev@acme.example"}, users, "the identity of the token `retentionctl token` mints, as the API records it")
	})

	t.Run("ActsAsTheExportedToken", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		env := maps.Clone(b.env)
		env["TOKEN"] = mustCtl(t, map[string]string{}, "token", "-org", "O", "-sub", "alice@acme.example")
		lastLine(t, mustCtl(t, env, "load", "-org", "O", "-generate", "10", "-quiet"))
		var users []string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT array_agg(DISTINCT user_id) FROM audit_events WHERE org_id = 'O'`).Scan(&users))
		require.Equal(t, []string{"alice@acme.example"}, users)
	})

	t.Run("OrgsInTurnAndEventIngestion", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		args := []string{"load", "-org", "O", "-orgs", "O2", "-generate", "1000", "-datasets", "3", "-name-prefix", "bench",
			"-from", "2026-01-01", "-to", "2026-02-01T00:00:00Z", "-ingested-at-event", "-workers", "3", "-quiet"}
		lastLine(t, mustCtl(t, b.env, args...))
		lastLine(t, mustCtl(t, b.env, args...)) // a second load adds rows to the same datasets

		rows, err := b.pool.Query(context.Background(), `
SELECT d.org_id, d.name, d.data_behavior, count(r.*), count(*) FILTER (WHERE r.ingested_at <> r.ts),
       min(r.ts) >= '2026-01-01' AND max(r.ts) < '2026-02-01'
FROM datasets d LEFT JOIN lake_rows r ON r.dataset_id = d.id GROUP BY 1, 2, 3 ORDER BY 2`)
		require.NoError(t, err)
		defer rows.Close()
		var got []string
		for rows.Next() {
			var org, name, behavior string
			var n, lagging int64
			var inRange bool
			require.NoError(t, rows.Scan(&org, &name, &behavior, &n, &lagging, &inRange))
			require.Zero(t, lagging, "-ingested-at-event: each row is ingested at its event time")
			require.True(t, inRange)
			got = append(got, fmt.Sprintf("%s %s %s %d", org, name, behavior, n))
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"O bench-000 time-series 668", "O2 bench-001 time-series 666", "O bench-002 time-series 666"}, got)
	})

	t.Run("BarWithoutTerminal", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		var out, stderr bytes.Buffer
		env := func(name string) string { return b.env[name] }
		err := runLoad(context.Background(), []string{"-org", "O", "-generate", "12000", "-datasets", "2"}, env, nil, &out, &stderr)
		require.NoError(t, err)
		lastLine(t, out.String())
		bar := stderr.String()
		require.NotContains(t, bar, "\r")
		lines := strings.Split(strings.TrimSuffix(bar, "\n"), "\n")
		require.Contains(t, lines[0], "0%", "%q", bar)
		require.NotContains(t, lines[0], "rows/hr", "no rate before the first rows: %q", bar)
		require.Contains(t, lines[len(lines)-1], "100%", "%q", bar)
		require.Contains(t, lines[len(lines)-1], "(12000/12000, ", "%q", bar)
	})

	t.Run("PeopleCarryIdentities", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		lastLine(t, mustCtl(t, b.env, "load", "-org", "O", "-generate", "2000", "-datasets", "2", "-people", "50", "-quiet"))
		// Each row carries one of the 50 people's identityMap in its payload, and the key its primary e-mail gives
		// in the identities column, as the API extracts it; the ECID is not a key, the e-mail being primary.
		var rows, people, mismatched int64
		err := b.pool.QueryRow(context.Background(), `
SELECT count(*), count(DISTINCT identities),
       count(*) FILTER (WHERE identities <> ARRAY['email:' || (payload->'identityMap'->'email'->0->>'id')]
                           OR payload->'identityMap'->'ECID'->0->>'id' IS NULL OR payload->>'page' IS NULL)
FROM lake_rows`).Scan(&rows, &people, &mismatched)
		require.NoError(t, err)
		require.EqualValues(t, 2000, rows)
		require.EqualValues(t, 50, people, "2,000 rows drawn from 50 people reach every one of them")
		require.Zero(t, mismatched)
	})

	t.Run("RecordDatasetInTheWay", func(t *testing.T) {
		t.Parallel()
		b := setupLoad(t)
		b.createDataset(t, "O", "synthetic-001", catalog.Record)
		_, err := ctl(t, b.env, "load", "-org", "O", "-generate", "10", "-datasets", "2", "-quiet")
		require.ErrorContains(t, err, "-name-prefix: dataset synthetic-001")
		require.ErrorContains(t, err, "is not time-series")
	})
}

func TestLoadFlags(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "events.ndjson", mixedEvents)
	// Flags are checked before the database is opened: no DATABASE_URL is needed to refuse them.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoOrg", []string{"-generate", "10"}, "-org is required"},
		{"GenerateZero", []string{"-org", "O", "-generate", "0"}, "-generate must be a positive number of rows"},
		{"GenerateNegative", []string{"-org", "O", "-generate", "-5"}, "-generate must be a positive number of rows"},
		{"DatasetsZero", []string{"-org", "O", "-generate", "10", "-datasets", "0"}, "-datasets must be between 1 and the -generate rows"},
		{"DatasetsOverRows", []string{"-org", "O", "-generate", "10", "-datasets", "11"}, "-datasets must be between 1 and the -generate rows (10)"},
		{"WorkersZero", []string{"-org", "O", "-generate", "10", "-workers", "0"}, "-workers must be at least 1"},
		{"PeopleNegative", []string{"-org", "O", "-generate", "10", "-people", "-1"}, "-people must be 0"},
		{"PeopleWithFiles", []string{"-org", "O", "-dataset", "web", "-people", "5", file}, "-people applies only with -generate"},
		{"BadFrom", []string{"-org", "O", "-generate", "10", "-from", "yesterday"}, "-from must be a day such as 2024-11-23"},
		{"ToBeforeFrom", []string{"-org", "O", "-generate", "10", "-from", "2026-01-02", "-to", "2026-01-01"}, "-to 2026-01-01T00:00:00Z must be after -from"},
		{"OrgTwice", []string{"-org", "O", "-generate", "10", "-orgs", "O2,O"}, "-orgs names O twice"},
		{"BothIngestedAt", []string{"-org", "O", "-generate", "10", "-ingested-at", "2026-01-01T00:00:00Z", "-ingested-at-event"}, "exclude each other"},
		{"GenerateWithFiles", []string{"-org", "O", "-generate", "10", file}, "-generate reads no files"},
		{"GenerateWithDataset", []string{"-org", "O", "-generate", "10", "-dataset", "web"}, "-dataset does not apply with -generate"},
		{"BadIngestedAt", []string{"-org", "O", "-dataset", "web", "-ingested-at", "2026-01-01", file}, "-ingested-at must be an RFC 3339 time"},
		{"NoDataset", []string{"-org", "O", file}, "-dataset is required"},
		{"NoFiles", []string{"-org", "O", "-dataset", "web"}, "at least one NDJSON file"},
		{"GenerateFlagWithFiles", []string{"-org", "O", "-dataset", "web", "-datasets", "2", file}, "-datasets applies only with -generate"},
		{"FlagAfterFiles", []string{"-org", "O", "-dataset", "web", file, "-quiet"}, `"-quiet": flags go before the files`},
		{"StdinTwice", []string{"-org", "O", "-dataset", "web", "-", "-"}, "- (stdin) can be named only once"},
		{"MissingFile", []string{"-org", "O", "-dataset", "web", filepath.Join(t.TempDir(), "none.ndjson")}, "none.ndjson: no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := ctl(t, map[string]string{}, append([]string{"load"}, tc.args...)...)
			require.ErrorContains(t, err, tc.want)
			require.NotErrorIs(t, err, errUsage)
			require.Empty(t, out)
		})
	}

	t.Run("UnknownFlagIsUsage", func(t *testing.T) {
		t.Parallel()
		var stderr bytes.Buffer
		err := runLoad(context.Background(), []string{"-rows", "10"}, func(string) string { return "" }, nil, &bytes.Buffer{}, &stderr)
		require.ErrorIs(t, err, errUsage)
		require.Contains(t, stderr.String(), "usage: retentionctl load")
	})

	t.Run("NeedsDatabaseURL", func(t *testing.T) {
		t.Parallel()
		_, err := ctl(t, map[string]string{}, "load", "-org", "O", "-dataset", "web", file)
		require.ErrorContains(t, err, "DATABASE_URL")
	})
}
