package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
)

// auditPostmanScripts are the Postman test scripts the run adds to the two requests of Adobe's Audit events folder,
// keyed by the request's name. They read WANT_EVENTS, the number of events the run's filter matches, and check the
// answers; the requests stay Adobe's.
var auditPostmanScripts = map[string][]string{
	"List audit events": {
		`pm.test("list answers 200", () => pm.response.to.have.status(200));`,
		`const body = pm.response.json();`,
		`const want = Number(pm.variables.get("WANT_EVENTS"));`,
		`pm.test("list answers a HAL page of the org's events", () => {`,
		`    pm.expect(body._embedded.events).to.be.an("array").with.lengthOf(want);`,
		`    body._embedded.events.forEach(e => pm.expect(e.imsOrgId).to.eql(pm.variables.get("IMS_ORG")));`,
		`    pm.expect(body.page.totalElements).to.eql(want);`,
		`    pm.expect(body.page.size).to.eql(50);`,
		`    pm.expect(body.queryId).to.be.a("string").and.not.empty;`,
		`    pm.expect(body._links.self.href).to.include("/data/foundation/audit/events");`,
		`    pm.expect(body._links.page.templated).to.eql(true);`,
		`});`,
		`const action = pm.variables.get("WANT_ACTION");`,
		`if (action) {`,
		`    pm.test("the filter holds", () => body._embedded.events.forEach(e => pm.expect(e.action).to.eql(action)));`,
		`}`,
	},
	"Export a list of audit events": {
		`pm.test("export answers 200", () => pm.response.to.have.status(200));`,
		`pm.test("export is CSV", () => pm.expect(pm.response.headers.get("Content-Type")).to.include("text/csv"));`,
		`const lines = pm.response.text().trim().split("\n");`,
		`pm.test("export has a header row and one row per event", () => {`,
		`    pm.expect(lines[0]).to.match(/^id,timestamp,imsOrgId,sandboxName,/);`,
		`    pm.expect(lines.length - 1).to.eql(Number(pm.variables.get("WANT_EVENTS")));`,
		`});`,
	},
}

// auditPostmanOrder is the order the run sends the requests in.
var auditPostmanOrder = []string{"List audit events", "Export a list of audit events"}

// TestPostmanAuditCollection runs the two requests of Adobe's own Audit Query Postman collection with newman: list
// and export, with Adobe's headers, query parameters (property={{property}}&limit=50&start={{start}}&queryId=…) and
// pre-request scripts, only the host changed. Once with every variable empty, so the pre-request scripts drop the
// parameters, and once with a property filter.
func TestPostmanAuditCollection(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	id := b.createDataset(t, datasetOpts{name: "postman-audit"})
	resp := b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id,
		body: map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P6M"}}}}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	// Events the run must not see: another sandbox, another org.
	b.record(t, audit.Event{Sandbox: "dev"})
	b.record(t, audit.Event{Org: newOrg()})

	root := repoRoot(t)
	newman := newmanPath(t, root)
	dir := t.TempDir()
	collection := filepath.Join(dir, "audit.postman_collection.json")
	writeAuditCollection(t, filepath.Join("testdata", "adobe", "postman", "audit-query.postman_collection.json"), collection, b.url)

	for _, tc := range []struct {
		name           string
		vars           []string
		events, action string
	}{
		{"NoVariables", nil, "2", ""},
		{"PropertyFilter", []string{"property=action==Update"}, "1", "Update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			report := filepath.Join(dir, tc.name+".json")
			args := []string{"run", collection,
				"--env-var", "ACCESS_TOKEN=" + b.token, "--env-var", "API_KEY=test", "--env-var", "IMS_ORG=" + b.org,
				"--env-var", "SANDBOX_NAME=prod", "--env-var", "WANT_EVENTS=" + tc.events, "--env-var", "WANT_ACTION=" + tc.action,
				"--timeout-request", "10000", "--color", "off", "--reporters", "cli,json", "--reporter-json-export", report,
			}
			for _, v := range tc.vars {
				args = append(args, "--env-var", v)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, newman, args...)
			cmd.Env = append(os.Environ(), "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
			cmd.WaitDelay = 5 * time.Second
			out, err := cmd.CombinedOutput()
			t.Logf("newman output:\n%s", out)
			require.NoError(t, err, "newman failed (exit code 0 expected); its output is logged above")

			run := readNewmanReport(t, report)
			require.Len(t, run.Executions, len(auditPostmanOrder), "executions: %s", run)
			for i, name := range auditPostmanOrder {
				require.Equal(t, name, run.Executions[i].Item.Name)
				require.Equal(t, http.StatusOK, run.Executions[i].Response.Code, "%s: executions: %s", name, run)
			}
			require.Zero(t, run.Stats.Assertions.Failed, "failures: %s", run.Failures)
			want, err := strconv.Atoi(tc.events)
			require.NoError(t, err)
			require.Positive(t, want)
			require.GreaterOrEqual(t, run.Stats.Assertions.Total, 5)
		})
	}
}

// writeAuditCollection writes to dst the requests of auditPostmanOrder from the Audit events folder of Adobe's
// collection at src, each with its test script added and its host changed to baseURL; all else is Adobe's.
func writeAuditCollection(t *testing.T, src, dst, baseURL string) {
	t.Helper()
	raw, err := os.ReadFile(src)
	require.NoError(t, err, "Adobe's Postman collection is testdata of the repository (testdata/adobe)")
	var adobe map[string]any
	require.NoError(t, json.Unmarshal(raw, &adobe))
	items := map[string]map[string]any{}
	for _, item := range postmanFolder(t, adobe, "Audit events") {
		items[item["name"].(string)] = item
	}
	var steps []any
	for _, name := range auditPostmanOrder {
		item, ok := items[name]
		require.True(t, ok, "Adobe's Audit events folder has no request named %q", name)
		req := item["request"].(map[string]any)
		require.Equal(t, http.MethodGet, req["method"], name)
		rehost(t, req["url"].(map[string]any), baseURL)
		events, _ := item["event"].([]any)
		item["event"] = append(events, map[string]any{
			"listen": "test", "script": map[string]any{"type": "text/javascript", "exec": auditPostmanScripts[name]},
		})
		steps = append(steps, item)
	}
	out, err := json.MarshalIndent(map[string]any{"info": adobe["info"], "item": steps}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, out, 0o600))
}
