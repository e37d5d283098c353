package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
)

// A re-sent _id replaces its row wherever it lives, and rows are placed by expiry, so the stored version may be in
// any partition holding the dataset. Probing each of them for every _id of a chunk cost more than the COPY itself
// (docs/storage.md, "Replacing re-sent _ids"). Each (partition, dataset) pair therefore keeps Bloom filters of the
// _ids stored in it (row_id_filters, migration 0012), written in the chunk's transaction under the dataset's
// advisory lock, which every writer of the dataset's rows holds: a chunk probes a partition only for the _ids its
// filters may hold. A filter never forgets an _id (deleted rows leave their bits), so it only errs towards a probe.
//
// A pair holding rows and no filter is unfiltered (rows stored before migration 0012, or more _ids than
// maxIDFilters filters hold): every _id is probed there. A pair's filters start once it holds no row. A drop of the
// partition deletes them just before its own transaction (forgetIDFilters), which leaves the pairs unfiltered if
// the drop does not follow, and the foreign key's cascade, in the drop's transaction, takes any written since.

// Each filter is small enough to stay in its table row (no TOAST) and is rewritten whole when a chunk adds to it;
// a pair fills them one after the other. A "maybe" costs a probe of every partition that answers it for the chunk,
// so false positives must be rare across a chunk's thousands of _ids and a pair's filters: with 32 bits an _id and
// 22 hashes, a full filter answers "maybe" for about one absent _id in five million.
const (
	idFilterBits     = 14336
	idFilterHashes   = 22
	idFilterCapacity = idFilterBits / 32
	// maxIDFilters bounds what a chunk reads per pair: past it, the pair's filters go and the pair is probed.
	maxIDFilters = 96
)

// newIDFilter returns an empty filter of the shape every stored filter has.
func newIDFilter() *bloom.BloomFilter { return bloom.New(idFilterBits, idFilterHashes) }

// selectIDPartitions lists the partitions of both stores that hold rows of dataset $1, with their filters of the
// dataset (none: the partition is unfiltered), in seq order.
const selectIDPartitions = `
SELECT p.name, p.store, p.lower_bound, p.upper_bound, f.filter
FROM row_partitions p
LEFT JOIN row_id_filters f ON f.partition_name = p.name AND f.dataset_id = $1
WHERE EXISTS (SELECT 1 FROM row_stats st WHERE st.partition_name = p.name AND st.dataset_id = $1 AND st.row_count > 0)
ORDER BY p.store, p.lower_bound, f.seq`

// idPartition is a partition holding rows of a dataset, with the dataset's filters there (nil: unfiltered).
type idPartition struct {
	name    string
	store   catalog.Store
	rng     partitionRange
	filters []*bloom.BloomFilter
}

// mayHold reports whether the partition may hold the _id whose filter locations are locs.
func (p *idPartition) mayHold(locs []uint64) bool {
	if p.filters == nil {
		return true
	}
	return slices.ContainsFunc(p.filters, func(f *bloom.BloomFilter) bool { return f.TestLocations(locs) })
}

// idPartitions reads the partitions holding rows of the dataset, in store and range order, with their filters.
func idPartitions(ctx context.Context, tx pgx.Tx, datasetID string) ([]*idPartition, error) {
	rows, err := tx.Query(ctx, selectIDPartitions, datasetID)
	if err != nil {
		return nil, fmt.Errorf("find partitions of %s: %w", datasetID, err)
	}
	var out []*idPartition
	var name, store string
	var lower, upper pgtype.Timestamptz
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &store, &lower, &upper, &raw}, func() error {
		if n := len(out); n == 0 || out[n-1].name != name {
			out = append(out, &idPartition{name: name, store: catalog.Store(store), rng: rangeOf(lower, upper)})
		}
		if raw == nil {
			return nil
		}
		f := &bloom.BloomFilter{}
		if err := f.UnmarshalBinary(raw); err != nil {
			return fmt.Errorf("read the _id filter of %s in %s: %w", datasetID, name, err)
		}
		p := out[len(out)-1]
		p.filters = append(p.filters, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find partitions of %s: %w", datasetID, err)
	}
	return out, nil
}

// probes is, per store, the partitions to probe and the _ids to probe them for: the _ids some filter may hold in
// some partition, and the partitions where some _id may be (adjacent ones merged into one range).
func probes(parts []*idPartition, ids []string) map[catalog.Store]idProbe {
	locs := make([][]uint64, len(ids))
	for i, id := range ids {
		locs[i] = bloom.Locations([]byte(id), idFilterHashes)
	}
	out := map[catalog.Store]idProbe{}
	for _, p := range parts {
		pr := out[p.store]
		hit := false
		for i, id := range ids {
			if p.mayHold(locs[i]) {
				hit = true
				if pr.seen == nil {
					pr.seen = map[string]bool{}
				}
				if !pr.seen[id] {
					pr.seen[id] = true
					pr.ids = append(pr.ids, id)
				}
			}
		}
		if hit {
			pr.parts = pr.parts.with(p.rng)
		}
		out[p.store] = pr
	}
	return out
}

// idProbe is what one store is probed for.
type idProbe struct {
	parts partitionFilter
	ids   []string
	seen  map[string]bool
}

// selectIDFilterState reads, for each partition a chunk writes to, whether the dataset holds rows there and its last
// filter there, if any.
const selectIDFilterState = `
SELECT n.name,
       EXISTS (SELECT 1 FROM row_stats st WHERE st.partition_name = n.name AND st.dataset_id = $1 AND st.row_count > 0),
       f.seq, f.ids, f.filter
FROM unnest($2::text[]) AS n (name)
LEFT JOIN LATERAL (
    SELECT seq, ids, filter FROM row_id_filters
    WHERE dataset_id = $1 AND partition_name = n.name ORDER BY seq DESC LIMIT 1) f ON true`

// upsertIDFilters writes filters of dataset $1, one per (partition, seq).
const upsertIDFilters = `
INSERT INTO row_id_filters (partition_name, dataset_id, seq, ids, filter)
SELECT f.partition_name, $1, f.seq, f.ids, f.filter
FROM unnest($2::text[], $3::integer[], $4::integer[], $5::bytea[]) AS f (partition_name, seq, ids, filter)
ON CONFLICT (dataset_id, partition_name, seq) DO UPDATE SET ids = EXCLUDED.ids, filter = EXCLUDED.filter`

// filterWrites is the filters a chunk writes, and the pairs whose filters it deletes first.
type filterWrites struct {
	clear     []string
	names     []string
	seqs, ids []int32
	filters   [][]byte
}

// recordIDs adds the _ids of the chunk's groups to their pairs' filters, in the chunk's transaction, which holds the
// dataset's advisory lock: no other writer of the dataset's rows runs meanwhile. It must run before the groups'
// rows are counted (addStats), since a pair's filters start only where it holds no row yet.
func recordIDs(ctx context.Context, tx pgx.Tx, datasetID string, names []string, groups map[string]*placedGroup) error {
	rows, err := tx.Query(ctx, selectIDFilterState, datasetID, names)
	if err != nil {
		return fmt.Errorf("read the _id filters of %s: %w", datasetID, err)
	}
	var w filterWrites
	var name string
	var hasRows bool
	var seq, n pgtype.Int4
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &hasRows, &seq, &n, &raw}, func() error {
		return w.add(name, hasRows, seq, n, raw, groups[name].rows)
	})
	if err != nil {
		return fmt.Errorf("read the _id filters of %s: %w", datasetID, err)
	}
	if len(w.clear) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM row_id_filters WHERE dataset_id = $1 AND partition_name = ANY($2)`, datasetID, w.clear); err != nil {
			return fmt.Errorf("clear the _id filters of %s: %w", datasetID, err)
		}
	}
	if len(w.names) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, upsertIDFilters, datasetID, w.names, w.seqs, w.ids, w.filters); err != nil {
		return fmt.Errorf("write the _id filters of %s: %w", datasetID, err)
	}
	return nil
}

// add plans the filter writes of one pair: its state (whether it holds rows, its last filter) and the rows the
// chunk adds to it.
func (w *filterWrites) add(name string, hasRows bool, seq, n pgtype.Int4, raw []byte, rows []*catalog.RowInput) error {
	if raw == nil && hasRows {
		return nil // unfiltered: its rows' _ids are in no filter, so a filter started now would miss them
	}
	start := !hasRows || raw == nil // a pair that holds no row starts afresh, dropping the bits of deleted rows
	if start && raw != nil {
		w.clear = append(w.clear, name)
	}
	f, s, count := newIDFilter(), int32(0), int32(0)
	if !start {
		f = &bloom.BloomFilter{}
		if err := f.UnmarshalBinary(raw); err != nil {
			return fmt.Errorf("read the _id filter of %s: %w", name, err)
		}
		s, count = seq.Int32, n.Int32
	}
	for _, in := range rows {
		if count >= idFilterCapacity {
			w.put(name, s, count, f)
			if s+1 >= maxIDFilters {
				w.clear = append(w.clear, name) // too many _ids for filters to pay: the pair goes unfiltered
				w.drop(name)
				return nil
			}
			f, s, count = newIDFilter(), s+1, 0
		}
		f.AddString(in.ID)
		count++
	}
	w.put(name, s, count, f)
	return nil
}

// put plans the write of one filter.
func (w *filterWrites) put(name string, seq, n int32, f *bloom.BloomFilter) {
	raw, _ := f.MarshalBinary() // writes to a bytes.Buffer, which cannot fail
	w.putRaw(name, seq, n, raw)
}

func (w *filterWrites) putRaw(name string, seq, n int32, raw []byte) {
	w.names, w.seqs, w.ids, w.filters = append(w.names, name), append(w.seqs, seq), append(w.ids, n), append(w.filters, raw)
}

// drop forgets the planned writes of a pair.
func (w *filterWrites) drop(name string) {
	var k filterWrites
	k.clear = w.clear
	for i := range w.names {
		if w.names[i] != name {
			k.putRaw(w.names[i], w.seqs[i], w.ids[i], w.filters[i])
		}
	}
	*w = k
}
