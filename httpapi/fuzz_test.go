package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzPatchV2 sends random and mutated PATCH v2 bodies to a real dataset: no body may get a 5xx, and a rejected
// body may not change the dataset.
func FuzzPatchV2(f *testing.F) {
	for _, seed := range []string{
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P3M"}}}}`,
		`{"extensions":{"adobe_unifiedProfile":{"rowExpiration":{"ttlValue":"P30D"}}}}`,
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":null}}}}`,
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P1.5M"}}}}`,
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":90}}}}`,
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P6M","setBy":"user"}}}}`,
		`{"description":"d","tags":{"a":["b"],"c":null}}`,
		`{"extensions":{"custom":{"x":[1,2,{"y":null}]}}}`,
		`{"name":"x"}`, `{"classification":{"managedBy":"SYSTEM"}}`, `[]`, `null`, `{`, ``, `{"tags":{"":[]}}`,
		// Values no column can hold or float64 cannot carry, in every writable place.
		`{"extensions":{"custom":{"n":1e400}}}`, `{"extensions":{"custom":{"n":1e200000}}}`, `{"extensions":{"c":[-1e-200000]}}`,
		`{"extensions":{"custom":{"i":9007199254740993,"dec":0.1000000000000000000001}}}`,
		`{"description":"\u0000"}`, `{"tags":{"t":["\u0000"]}}`, `{"tags":{"\u0000":["x"]}}`, `{"extensions":{"\u0000":1}}`,
		"{\"description\":\"\xff\"}", `{"extensions":{"custom":{"s":"\ud800"}}}`, `{"extensions":{"adobe_lakeHouse":{"note":1e400}}}`,
	} {
		f.Add([]byte(seed))
	}
	b := setup(f)
	id := b.createDataset(f, datasetOpts{name: "fuzzed"})
	f.Fuzz(func(t *testing.T, body []byte) {
		before, beforeTag := b.getDocumentExact(t, id)
		resp := b.patch(t, id, body, nil)
		require.Less(t, resp.status, 500, "body %q answered %s", body, resp.body)
		if resp.status == http.StatusOK {
			return
		}
		after, afterTag := b.getDocumentExact(t, id)
		require.Equal(t, settled(before), settled(after), "rejected body %q changed the dataset", body)
		require.Equal(t, beforeTag, afterTag)
	})
}
