package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

func rowsOfIDs(n int) []*catalog.RowInput {
	out := make([]*catalog.RowInput, n)
	for i := range out {
		out[i] = &catalog.RowInput{ID: fmt.Sprintf("id-%d", i)}
	}
	return out
}

// TestFilterWritesFillFiltersInOrder checks how a chunk's _ids fill a pair's filters: a new pair's first filter,
// then the next ones as each fills, and past maxIDFilters none at all (the pair goes unfiltered).
func TestFilterWritesFillFiltersInOrder(t *testing.T) {
	t.Parallel()
	t.Run("NewPairFillsFiltersInOrder", func(t *testing.T) {
		t.Parallel()
		var w filterWrites
		require.NoError(t, w.add("p", false, pgtype.Int4{}, pgtype.Int4{}, nil, rowsOfIDs(2*idFilterCapacity+1)))
		require.Equal(t, []int32{0, 1, 2}, w.seqs)
		require.Equal(t, []int32{idFilterCapacity, idFilterCapacity, 1}, w.ids)
		require.Empty(t, w.clear)
	})
	t.Run("UnfilteredPairStaysSo", func(t *testing.T) {
		t.Parallel()
		var w filterWrites
		require.NoError(t, w.add("p", true, pgtype.Int4{}, pgtype.Int4{}, nil, rowsOfIDs(3)))
		require.Empty(t, w.names)
		require.Empty(t, w.clear)
	})
	t.Run("EmptiedPairStartsAfresh", func(t *testing.T) {
		t.Parallel()
		raw, err := newIDFilter().MarshalBinary()
		require.NoError(t, err)
		var w filterWrites
		require.NoError(t, w.add("p", false, pgtype.Int4{Int32: 4, Valid: true}, pgtype.Int4{Int32: 9, Valid: true}, raw, rowsOfIDs(3)))
		require.Equal(t, []string{"p"}, w.clear)
		require.Equal(t, []int32{0}, w.seqs)
		require.Equal(t, []int32{3}, w.ids)
	})
	t.Run("FullPairGoesUnfiltered", func(t *testing.T) {
		t.Parallel()
		raw, err := newIDFilter().MarshalBinary()
		require.NoError(t, err)
		var w filterWrites
		require.NoError(t, w.add("q", false, pgtype.Int4{}, pgtype.Int4{}, nil, rowsOfIDs(1)))
		require.NoError(t, w.add("p", true, pgtype.Int4{Int32: maxIDFilters - 1, Valid: true},
			pgtype.Int4{Int32: idFilterCapacity, Valid: true}, raw, rowsOfIDs(1)))
		require.Equal(t, []string{"p"}, w.clear)
		require.Equal(t, []string{"q"}, w.names, "only the other pair's filter is written")
	})
}
