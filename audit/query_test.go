package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

func TestParseFilter(t *testing.T) {
	t.Parallel()

	t.Run("EveryField", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			term   string
			field  audit.Field
			op     audit.Op
			values []string
		}{
			{"action==Update", audit.FieldAction, audit.OpEq, []string{"Update"}},
			{"action==create,update", audit.FieldAction, audit.OpEq, []string{"create", "update"}},
			{"action!=Expire", audit.FieldAction, audit.OpNe, []string{"Expire"}},
			{"assetType==Dataset", audit.FieldAssetType, audit.OpEq, []string{"Dataset"}},
			{"assetId==685ad754fb1abe2b263df4b3", audit.FieldAssetID, audit.OpEq, []string{"685ad754fb1abe2b263df4b3"}},
			{"assetName==my dataset", audit.FieldAssetName, audit.OpEq, []string{"my dataset"}},
			{"user==a@example.com,b@example.com", audit.FieldUser, audit.OpEq, []string{"a@example.com", "b@example.com"}},
			{"status!=Success", audit.FieldStatus, audit.OpNe, []string{"Success"}},
			{"requestId==5YGdpTX5", audit.FieldRequestID, audit.OpEq, []string{"5YGdpTX5"}},
			{"type==core", audit.FieldType, audit.OpEq, []string{"core"}},
			{"timestamp>2020-01-01T02:46:48.610862Z", audit.FieldTimestamp, audit.OpGt, []string{"2020-01-01T02:46:48.610862Z"}},
			{"timestamp<2020-02-08T02:46:48Z", audit.FieldTimestamp, audit.OpLt, []string{"2020-02-08T02:46:48Z"}},
			{"timestamp>=2020-02-08T02:46:48+01:00", audit.FieldTimestamp, audit.OpGe, []string{"2020-02-08T02:46:48+01:00"}},
			{"timestamp<=2021-08-04T21:58:09.745+0000", audit.FieldTimestamp, audit.OpLe, []string{"2021-08-04T21:58:09.745+0000"}},
			{"timestamp==2020-01-01T00:00:00Z,2020-01-02T00:00:00Z", audit.FieldTimestamp, audit.OpEq, []string{"2020-01-01T00:00:00Z", "2020-01-02T00:00:00Z"}},
		} {
			f, err := audit.ParseFilter(tc.term)
			require.NoError(t, err, tc.term)
			require.Equal(t, tc.field, f.Field, tc.term)
			require.Equal(t, tc.op, f.Op, tc.term)
			require.Equal(t, tc.values, f.Values, tc.term)
			if tc.field == audit.FieldTimestamp {
				require.Len(t, f.Times, len(tc.values), tc.term)
			}
		}
	})

	t.Run("TimesAreUTC", func(t *testing.T) {
		t.Parallel()
		f, err := audit.ParseFilter("timestamp>2020-02-08T02:46:48+01:00")
		require.NoError(t, err)
		require.Equal(t, time.Date(2020, 2, 8, 1, 46, 48, 0, time.UTC), f.Times[0])
		// An unencoded + in a query string arrives as a space.
		f, err = audit.ParseFilter("timestamp>2020-02-08T02:46:48 01:00")
		require.NoError(t, err)
		require.Equal(t, time.Date(2020, 2, 8, 1, 46, 48, 0, time.UTC), f.Times[0])
	})

	t.Run("MalformedNamesTheTerm", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ term, typ string }{
			{"action", "invalid-filter"},
			{"action=Update", "invalid-filter"},
			{"==Update", "invalid-filter"},
			{"action==", "invalid-filter"},
			{"action==Create,", "invalid-filter"},
			{"action==,Create", "invalid-filter"},
			{"action~Up.*", "invalid-filter"},
			{"action>Update", "invalid-filter"},
			{"assetName<m", "invalid-filter"},
			{"timestamp>yesterday", "invalid-filter"},
			{"timestamp>2020-01-01", "invalid-filter"},
			{"timestamp>2020-01-01T00:00:00Z,2020-02-01T00:00:00Z", "invalid-filter"},
			{"type==audit", "invalid-filter"},
			{"datasetId==x", "unknown-filter-field"},
			{"imsOrgId==OTHER@AdobeOrg", "unknown-filter-field"},
			{"sandboxName==dev", "unknown-filter-field"},
			{"Action==Update", "unknown-filter-field"},
		} {
			_, err := audit.ParseFilter(tc.term)
			var ce *catalog.Error
			require.ErrorAs(t, err, &ce, tc.term)
			require.Equal(t, catalog.EINVALID, ce.Code, tc.term)
			require.Equal(t, tc.typ, ce.Type, tc.term)
			require.Equal(t, "property", ce.Field, tc.term)
			require.Contains(t, ce.Message, tc.term)
		}
	})
}

func TestParseQuery(t *testing.T) {
	t.Parallel()

	// invalid requires p refused as EINVALID about field and returns the message.
	invalid := func(t *testing.T, p audit.Params, field string) string {
		t.Helper()
		_, err := audit.ParseQuery(p)
		var ce *catalog.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, catalog.EINVALID, ce.Code)
		require.Equal(t, field, ce.Field)
		return ce.Message
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		q, err := audit.ParseQuery(audit.Params{})
		require.NoError(t, err)
		require.Equal(t, 50, q.Limit)
		require.Zero(t, q.Start)
		require.Empty(t, q.Filters)
		require.Equal(t, []audit.Order{{Field: audit.FieldTimestamp, Desc: true}}, q.OrderBy)
	})

	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		for _, ok := range []string{"1", "1000", "73"} {
			_, err := audit.ParseQuery(audit.Params{Limit: ok})
			require.NoError(t, err, ok)
		}
		for _, bad := range []string{"0", "1001", "-5", "ten", "5.5"} {
			require.Contains(t, invalid(t, audit.Params{Limit: bad}, "limit"), bad)
		}
	})

	t.Run("Start", func(t *testing.T) {
		t.Parallel()
		q, err := audit.ParseQuery(audit.Params{Start: "150"})
		require.NoError(t, err)
		require.Equal(t, 150, q.Start)
		for _, bad := range []string{"-1", "x", "1e3"} {
			invalid(t, audit.Params{Start: bad}, "start")
		}
	})

	t.Run("OrderBy", func(t *testing.T) {
		t.Parallel()
		q, err := audit.ParseQuery(audit.Params{OrderBy: "+timestamp"})
		require.NoError(t, err)
		require.Equal(t, []audit.Order{{Field: audit.FieldTimestamp}}, q.OrderBy)
		q, err = audit.ParseQuery(audit.Params{OrderBy: "assetName,-timestamp"})
		require.NoError(t, err)
		require.Equal(t, []audit.Order{{Field: audit.FieldAssetName}, {Field: audit.FieldTimestamp, Desc: true}}, q.OrderBy)
		q, err = audit.ParseQuery(audit.Params{OrderBy: " timestamp"})
		require.NoError(t, err, "a + sent unencoded arrives as a space")
		require.Equal(t, []audit.Order{{Field: audit.FieldTimestamp}}, q.OrderBy)
		for _, bad := range []string{"-color", "timestamp,timestamp", "*timestamp", "-", "timestamp,", "type"} {
			invalid(t, audit.Params{OrderBy: bad}, "orderBy")
		}
	})

	t.Run("QueryIDRoundTrips", func(t *testing.T) {
		t.Parallel()
		q, err := audit.ParseQuery(audit.Params{
			Property: []string{"action==Create,Update", "timestamp>2020-01-01T00:00:00+01:00", "assetName==a&b=c?"},
			OrderBy:  "+assetName", Limit: "7", Start: "14",
		})
		require.NoError(t, err)
		again, err := audit.ParseQuery(audit.Params{QueryID: q.ID(), Start: "21"})
		require.NoError(t, err)
		require.Equal(t, q.Filters, again.Filters)
		require.Equal(t, q.OrderBy, again.OrderBy)
		require.Equal(t, 7, again.Limit, "the queryId carries the limit")
		require.Equal(t, 21, again.Start, "but not the start")
		require.Equal(t, q.ID(), again.ID())

		other, err := audit.ParseQuery(audit.Params{QueryID: q.ID(), Limit: "3"})
		require.NoError(t, err)
		require.Equal(t, 3, other.Limit, "a limit beside the queryId wins")
		require.Zero(t, other.Start)
	})

	t.Run("QueryIDRefusals", func(t *testing.T) {
		t.Parallel()
		q, err := audit.ParseQuery(audit.Params{Property: []string{"action==Update"}})
		require.NoError(t, err)
		invalid(t, audit.Params{QueryID: q.ID(), Property: []string{"action==Create"}}, "queryId")
		invalid(t, audit.Params{QueryID: q.ID(), OrderBy: "-timestamp"}, "queryId")
		invalid(t, audit.Params{QueryID: "not base64!"}, "queryId")
		invalid(t, audit.Params{QueryID: "aGVsbG8"}, "queryId")
		invalid(t, audit.Params{QueryID: q.ID(), Limit: "0"}, "limit")
	})

	t.Run("BadFilterAmongGoodOnes", func(t *testing.T) {
		t.Parallel()
		require.Contains(t, invalid(t, audit.Params{Property: []string{"action==Update", "color==red"}}, "property"), "color==red")
	})
}
