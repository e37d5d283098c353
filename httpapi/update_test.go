package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// v1Update sends a Catalog v1 PATCH or PUT of /dataSets/{id} under prefix ("" or Adobe's base path).
func (b *testBundle) v1Update(t testing.TB, method, prefix, id string, body any, headers map[string]string) *response {
	t.Helper()
	return b.do(t, request{method: method, path: prefix + "/dataSets/" + id, body: body, headers: headers})
}

// requireReference requires the v1 answer: 200 with ["@/dataSets/{id}"] and the dataset's new version as ETag.
func requireReference(t testing.TB, resp *response, id, version string) {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var refs []string
	require.NoError(t, json.Unmarshal(resp.body, &refs), "body: %s", resp.body)
	require.Equal(t, []string{"@/dataSets/" + id}, refs)
	require.Equal(t, `"`+version+`"`, resp.header.Get("ETag"))
}

func TestCatalogV1Patch(t *testing.T) {
	t.Parallel()

	t.Run("SentAttributesReplaceTheRestStays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{tags: map[string][]string{"team": {"web"}}})
		require.Equal(t, http.StatusOK, b.patch(t, id, map[string]any{"extensions": map[string]any{"acme": map[string]any{"cost": 1}}}, nil).status)
		audits := b.auditCount(t, id)
		resp := b.v1Update(t, http.MethodPatch, "", id, map[string]any{"description": "clicks", "tags": map[string]any{"owner": []string{"ann"}}}, nil)
		requireReference(t, resp, id, "1.0.2")
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "clicks", doc["description"])
		require.Equal(t, map[string]any{"owner": []any{"ann"}}, doc["tags"], "tags are replaced whole: team is gone")
		require.Equal(t, map[string]any{"cost": float64(1)}, doc["extensions"].(map[string]any)["acme"], "extensions were not sent")
		require.Equal(t, audits+1, b.auditCount(t, id))
		action, _ := b.lastAudit(t, id)
		require.Equal(t, "Update", action)
	})

	t.Run("UnderAdobeBasePathAndLowercase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		requireReference(t, b.v1Update(t, http.MethodPatch, "/data/foundation/catalog", id, map[string]any{"description": "a"}, nil), id, "1.0.1")
		resp := b.do(t, request{method: http.MethodPatch, path: "/datasets/" + id, body: map[string]any{"description": "b"}})
		requireReference(t, resp, id, "1.0.2")
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "b", doc["description"])
	})

	t.Run("TTLUnderTheRulesOfV2", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.v1Update(t, http.MethodPatch, "", id, ttlBody(map[string]any{"adobe_lakeHouse": "P3M"}), nil)
		requireReference(t, resp, id, "1.0.1")
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "P3M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, "custom", rowExpiration(t, doc, "adobe_lakeHouse")["valueStatus"])
		require.Equal(t, "P3M", rowExpiration(t, doc, "adobe_unifiedProfile")["ttlValue"], "the profile is lowered with the lake, as v2 does")
		_, details := b.lastAudit(t, id)
		lake := details["rowExpiration"].(map[string]any)["adobe_lakeHouse"].(map[string]any)
		require.Equal(t, "P12M", lake["before"].(map[string]any)["ttlValue"])
		require.Equal(t, "P3M", lake["after"].(map[string]any)["ttlValue"])

		for _, tc := range []struct {
			value any
			typ   string
		}{{"P1D", "ttl-out-of-range"}, {"P11Y", "ttl-out-of-range"}, {"P1.5M", "invalid-ttl"}, {90, "invalid-ttl"}} {
			resp := b.v1Update(t, http.MethodPatch, "", id, ttlBody(map[string]any{"adobe_lakeHouse": tc.value}), nil)
			p := requireProblem(t, resp, http.StatusBadRequest, "extensions.adobe_lakeHouse.rowExpiration.ttlValue")
			require.Equal(t, tc.typ, p.Type)
		}
		after, tag := b.getDataset(t, id)
		require.Equal(t, "P3M", rowExpiration(t, after, "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, `"1.0.1"`, tag)
	})

	t.Run("SwitchThroughV1", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		requireReference(t, b.v1Update(t, http.MethodPatch, "", id, overridesBody("refused"), nil), id, "1.0.1")
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "refused", rowExpiration(t, doc, "adobe_lakeHouse")["rowOverrides"])
		_, details := b.lastAudit(t, id)
		require.Equal(t, map[string]any{"before": "allowed", "after": "refused"}, details["rowOverrides"])
	})

	t.Run("Rename", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{name: "old"})
		b.createDataset(t, datasetOpts{name: "taken"})
		requireReference(t, b.v1Update(t, http.MethodPatch, "", id, map[string]any{"name": "new"}, nil), id, "1.0.1")
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "new", doc["name"])
		_, details := b.lastAudit(t, id)
		require.Equal(t, map[string]any{"before": "old", "after": "new"}, details["name"])
		p := requireProblem(t, b.v1Update(t, http.MethodPatch, "", id, map[string]any{"name": "taken"}, nil), http.StatusConflict, "name")
		require.Contains(t, p.Detail, `"taken" already exists`)
		require.Equal(t, "1.0.1", b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id}).json(t)[id].(map[string]any)["version"])
		created := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "old"}})
		require.Equal(t, http.StatusCreated, created.status, "the old name is free again")
	})

	t.Run("IfMatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		stale := b.v1Update(t, http.MethodPatch, "", id, map[string]any{"description": "x"}, map[string]string{"If-Match": `"1.0.7"`})
		p := requireProblem(t, stale, http.StatusPreconditionFailed, "If-Match")
		require.Equal(t, "version-mismatch", p.Type)
		requireReference(t, b.v1Update(t, http.MethodPatch, "", id, map[string]any{"description": "x"}, map[string]string{"If-Match": `"1.0.0"`}), id, "1.0.1")
		requireReference(t, b.v1Update(t, http.MethodPut, "", id, map[string]any{"name": "n"}, map[string]string{"If-Match": "1.0.1"}), id, "1.0.2")
		requireProblem(t, b.v1Update(t, http.MethodPut, "", id, map[string]any{"name": "n"}, map[string]string{"If-Match": `"1.0.1"`}), http.StatusPreconditionFailed, "If-Match")
		requireReference(t, b.v1Update(t, http.MethodPut, "", id, map[string]any{"name": "n"}, map[string]string{"If-Match": "*"}), id, "1.0.3")
	})

	t.Run("MissingIs404BadIDIs400", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, method := range []string{http.MethodPatch, http.MethodPut} {
			requireProblem(t, b.v1Update(t, method, "", "5ba9452f7de80408007fc52a", map[string]any{"name": "x"}, nil), http.StatusNotFound, "")
			requireProblem(t, b.v1Update(t, method, "", "xyz", map[string]any{"name": "x"}, nil), http.StatusBadRequest, "id")
		}
	})
}

func TestCatalogV1Put(t *testing.T) {
	t.Parallel()

	t.Run("ReplacesWritableAttributesKeepsSettings", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{name: "orders", tags: map[string][]string{"team": {"web"}}})
		require.Equal(t, http.StatusOK, b.patch(t, id, map[string]any{"description": "old", "extensions": map[string]any{
			"acme":            map[string]any{"cost": 1},
			"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P6M", "rowOverrides": "refused"}},
		}}, nil).status)
		resp := b.v1Update(t, http.MethodPut, "/data/foundation/catalog", id, map[string]any{"name": "orders", "tags": map[string]any{"owner": []string{"bob"}}}, nil)
		requireReference(t, resp, id, "1.0.2")
		doc, _ := b.getDataset(t, id)
		require.NotContains(t, doc, "description", "left out: cleared")
		require.Equal(t, map[string]any{"owner": []any{"bob"}}, doc["tags"])
		require.NotContains(t, doc["extensions"], "acme", "the caller's extension keys left out are cleared")
		lake := rowExpiration(t, doc, "adobe_lakeHouse")
		require.Equal(t, "P6M", lake["ttlValue"], "a PUT without rowExpiration never disables expiry")
		require.Equal(t, "refused", lake["rowOverrides"])
		action, details := b.lastAudit(t, id)
		require.Equal(t, "Update", action)
		// No setting changed; what the PUT cleared and replaced is listed, before and after.
		require.Equal(t, map[string]any{
			"description": map[string]any{"before": "old", "after": nil},
			"tags":        map[string]any{"before": map[string]any{"team": []any{"web"}}, "after": map[string]any{"owner": []any{"bob"}}},
			"extensions":  map[string]any{"before": map[string]any{"acme": map[string]any{"cost": float64(1)}}, "after": map[string]any{}},
		}, details)
	})

	t.Run("WithTTLAndSwitch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{name: "orders"})
		body := map[string]any{"name": "orders", "description": "d", "extensions": map[string]any{
			"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P2Y", "rowOverrides": "refused"}},
		}}
		requireReference(t, b.v1Update(t, http.MethodPut, "", id, body, nil), id, "1.0.1")
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "P2Y", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, "refused", rowExpiration(t, doc, "adobe_lakeHouse")["rowOverrides"])
		_, details := b.lastAudit(t, id)
		require.Contains(t, details, "rowExpiration")
		require.Contains(t, details, "rowOverrides")
	})

	t.Run("NameRequired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		p := requireProblem(t, b.v1Update(t, http.MethodPut, "", id, map[string]any{"description": "d"}, nil), http.StatusBadRequest, "name")
		require.Equal(t, "missing-field", p.Type)
	})
}

// TestCatalogV1Refuses: bodies either route refuses, each a 400 naming the field (or 413, 415), and none changes the
// dataset or writes an audit event.
func TestCatalogV1Refuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "kept"})
	before, tag := b.getDataset(t, id)
	audits := b.auditCount(t, id)
	re := "extensions.adobe_lakeHouse.rowExpiration"
	for _, tc := range []struct {
		name, body, typ, field string
	}{
		{"ID", `{"name":"kept","id":"5ba9452f7de80408007fc52a"}`, "read-only-field", "id"},
		{"Version", `{"name":"kept","version":"1.0.9"}`, "read-only-field", "version"},
		{"Created", `{"name":"kept","created":1}`, "read-only-field", "created"},
		{"Updated", `{"name":"kept","updated":1}`, "read-only-field", "updated"},
		{"ImsOrg", `{"name":"kept","imsOrg":"OTHER@AdobeOrg"}`, "read-only-field", "imsOrg"},
		{"SandboxName", `{"name":"kept","sandboxName":"dev"}`, "read-only-field", "sandboxName"},
		{"SandboxID", `{"name":"kept","sandboxId":"x"}`, "read-only-field", "sandboxId"},
		{"CreatedUser", `{"name":"kept","createdUser":"x"}`, "read-only-field", "createdUser"},
		{"UpdatedUser", `{"name":"kept","updatedUser":"x"}`, "read-only-field", "updatedUser"},
		{"CreatedClient", `{"name":"kept","createdClient":"x"}`, "read-only-field", "createdClient"},
		{"SchemaRef", `{"name":"kept","schemaRef":{"id":"x"}}`, "read-only-field", "schemaRef"},
		{"Classification", `{"name":"kept","classification":{"managedBy":"SYSTEM"}}`, "read-only-field", "classification.managedBy"},
		{"ValueStatus", `{"name":"kept","extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P3M","valueStatus":"default"}}}}`, "read-only-field", re + ".valueStatus"},
		{"Metrics", `{"name":"kept","extensions":{"adobe_lakeHouse":{"metrics":{"rowCount":0}}}}`, "read-only-field", "extensions.adobe_lakeHouse.metrics"},
		{"Unkept", `{"name":"kept","enableErrorDiagnostics":true}`, "unknown-field", "enableErrorDiagnostics"},
		{"Unknown", `{"name":"kept","colour":"red"}`, "unknown-field", "colour"},
		{"NameNUL", `{"name":"ke\u0000pt"}`, "nul-character", "name"},
		{"NameInvalidUTF8", "{\"name\":\"k\xffept\"}", "invalid-utf8", "name"},
		{"NameTooLong", `{"name":"` + strings.Repeat("n", catalog.MaxNameLength+1) + `"}`, "invalid-field", "name"},
		{"NameType", `{"name":["kept"]}`, "invalid-type", "name"},
		{"DescriptionNUL", `{"name":"kept","description":"a\u0000"}`, "nul-character", "description"},
		{"DescriptionType", `{"name":"kept","description":7}`, "invalid-type", "description"},
		{"TagsType", `{"name":"kept","tags":"web"}`, "invalid-type", "tags"},
		{"TagValueType", `{"name":"kept","tags":{"team":[1]}}`, "invalid-type", "tags.team[0]"},
		{"ExtensionsType", `{"name":"kept","extensions":[]}`, "invalid-type", "extensions"},
		{"ExtensionOverflow", `{"name":"kept","extensions":{"acme":{"n":1e200000}}}`, "", "extensions.acme.n"},
		{"TTLHuge", `{"name":"kept","extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P99999999999999999999Y"}}}}`, "invalid-ttl", re + ".ttlValue"},
		{"SwitchValue", `{"name":"kept","extensions":{"adobe_lakeHouse":{"rowExpiration":{"rowOverrides":"no"}}}}`, "invalid-field", re + ".rowOverrides"},
		{"NotJSON", `{"name":`, "malformed-json", "body"},
		{"TwoValues", `{"name":"kept"} {}`, "malformed-json", "body"},
		{"Array", `[{"op":"add","path":"/name","value":"x"}]`, "invalid-type", "body"},
	} {
		for _, method := range []string{http.MethodPatch, http.MethodPut} {
			t.Run(method+tc.name, func(t *testing.T) {
				p := requireProblem(t, b.v1Update(t, method, "", id, tc.body, nil), http.StatusBadRequest, tc.field)
				if tc.typ != "" {
					require.Equal(t, tc.typ, p.Type, "detail: %s", p.Detail)
				}
			})
		}
	}
	t.Run("JSONPatchIs415", func(t *testing.T) {
		resp := b.v1Update(t, http.MethodPatch, "", id, `[{"op":"add","path":"/name","value":"x"}]`,
			map[string]string{"Content-Type": "application/json-patch+json"})
		requireProblem(t, resp, http.StatusUnsupportedMediaType, "Content-Type")
	})
	t.Run("BodyTooLarge", func(t *testing.T) {
		body := `{"name":"kept","description":"` + strings.Repeat("x", 1<<20) + `"}`
		require.Equal(t, http.StatusRequestEntityTooLarge, b.v1Update(t, http.MethodPut, "", id, body, nil).status)
	})
	after, afterTag := b.getDataset(t, id)
	require.Equal(t, settled(before), settled(after), "a refused v1 update changes nothing")
	require.Equal(t, tag, afterTag)
	require.Equal(t, audits, b.auditCount(t, id))
}
