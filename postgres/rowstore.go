package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// rowStore is the partitioned store of dataset rows on one pool: it places rows in partitions by their expiry and
// writes them (ingest.go), keeps the partitions and the counters of each, filters by _id (idfilter.go), and runs
// the sweep's statements (sweep.go). It holds what the service keeps about the rows between requests, which is why
// it is a type of its own: the partition cache, the size cache and the test hooks.
type rowStore struct {
	db *DB

	// partitions caches each store's partitions, so ingestion does not ask the catalog for every chunk. A partition
	// a run drops is forgotten; the cache is read again before a partition is created, and when a chunk finds one
	// of its partitions gone (dropped by another replica).
	partitionsMu sync.Mutex
	partitions   map[catalog.Store][]partitionSpec

	// hooks let tests act at the points where a request has looked up partitions and not yet used them.
	hooks testHooks

	// sizes caches each lake partition's bytes per row for a minute: measuring a partition's size on disk costs a
	// file-system call per relation, too much for every GET of a dataset, and storageSize is an estimate anyway.
	// Only the partitions of the datasets asked about are measured, so that one tenant's many partitions cost
	// nothing to another's GET (internal/hostile holds it).
	sizesMu sync.Mutex
	sizes   map[string]measuredSize
}

// measuredSize is a partition's bytes per row and when it was measured.
type measuredSize struct {
	perRow float64
	at     time.Time
}

// testHooks are called, when set, at the points where a concurrent run could drop a partition under a request.
// Tests set them (export_test.go) to drop partitions there deterministically.
type testHooks struct {
	// beforeChunkTx gets the partitions a chunk was placed in, before the transaction that writes it begins.
	beforeChunkTx func(partitions []string)
	// afterPartitionLookup runs after a delete by _id has read which partitions hold the dataset's rows.
	afterPartitionLookup func()
	// afterPreviewCounters runs after a preview has read the dataset's counters, before it reads rows.
	afterPreviewCounters func()
	// afterRemoval runs after each removal transaction of a sweep (a drop, a batch, a block range) has committed.
	afterRemoval func()
	// dropTimeout, called at each attempt at a batch of drops, gives its BatchTimeout.
	dropTimeout func() time.Duration
	// pendingLocked gets the detached table whose pending listing a reader or a release has just locked, before it
	// lists the rows.
	pendingLocked func(ctx context.Context, name string)
	// afterManifestFlush runs after a reader of a run's manifest has written out the run's pending listings, before
	// it counts the manifest.
	afterManifestFlush func()
}

// sizesMaxAge is how long the bytes-per-row figures are reused.
const sizesMaxAge = time.Minute

// partitionSizes measures the named partitions; to_regclass makes one a run dropped meanwhile measure NULL, not
// fail.
const partitionSizes = `
SELECT p.name, pg_total_relation_size(to_regclass(p.name))::float8 / NULLIF(sum(st.row_count), 0)
FROM row_partitions p JOIN row_stats st ON st.partition_name = p.name
WHERE p.name = ANY($1) GROUP BY p.name`

// bytesPerRow returns the named lake partitions' sizes on disk divided by their rows, each measured at most once a
// minute. It measures on q, the caller's connection: a request that held one connection and waited for a second
// could, with as many such requests as the pool has connections, wait on the pool for ever.
func (rs *rowStore) bytesPerRow(ctx context.Context, q querier, partitions []string) (map[string]float64, error) {
	out := make(map[string]float64, len(partitions))
	var stale []string
	rs.sizesMu.Lock()
	for _, name := range partitions {
		if m, ok := rs.sizes[name]; ok && time.Since(m.at) < sizesMaxAge {
			out[name] = m.perRow
		} else {
			stale = append(stale, name)
		}
	}
	rs.sizesMu.Unlock()
	if len(stale) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, partitionSizes, stale)
	if err != nil {
		return nil, fmt.Errorf("measure partitions: %w", err)
	}
	measured := map[string]float64{}
	var name string
	var perRow *float64
	if _, err := pgx.ForEachRow(rows, []any{&name, &perRow}, func() error {
		if perRow != nil {
			measured[name] = *perRow
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("measure partitions: %w", err)
	}
	at := time.Now()
	rs.sizesMu.Lock()
	defer rs.sizesMu.Unlock()
	if rs.sizes == nil {
		rs.sizes = map[string]measuredSize{}
	}
	for name, m := range rs.sizes {
		if time.Since(m.at) >= sizesMaxAge {
			delete(rs.sizes, name) // a dropped partition's figure would otherwise stay forever
		}
	}
	for _, name := range stale {
		out[name] = measured[name]
		rs.sizes[name] = measuredSize{perRow: measured[name], at: at}
	}
	return out, nil
}
