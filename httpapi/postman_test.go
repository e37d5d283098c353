package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// adobeHost is where Adobe's collection sends its requests; it is the one thing the test changes in them.
const adobeHost = "https://platform.adobe.io"

// postmanDatasetName is the dataset the run creates and deletes, named in the dataSet variable.
const postmanDatasetName = "postman-ds"

// postmanStep is one request of Adobe's Datasets folder and the Postman test script the run adds to it, so that
// newman itself fails on a wrong answer. The scripts only read responses; the requests stay Adobe's.
type postmanStep struct {
	name   string   // the request's name in Adobe's collection
	method string   // its method, checked so that a changed collection fails loudly instead of testing something else
	status int      // the status the service must answer
	script []string // the Postman test script added to the request
}

// postmanSteps run in this order: create first, because the others need the id it returns.
var postmanSteps = []postmanStep{
	{name: "Create a new dataset", method: http.MethodPost, status: http.StatusCreated, script: []string{
		`pm.test("create answers 201", () => pm.response.to.have.status(201));`,
		`const refs = pm.response.json();`,
		`pm.test("create answers one dataset reference", () => {`,
		`    pm.expect(refs).to.be.an("array").with.lengthOf(1);`,
		`    pm.expect(refs[0]).to.match(/^@\/dataSets\/[0-9a-f]+$/);`,
		`});`,
		`// The later requests address the dataset through the :DATASET_ID path variable, whose value is {{DATASET_ID}}.`,
		`pm.collectionVariables.set("DATASET_ID", refs[0].split("/").pop());`,
	}},
	{name: "Retrieve a list of datasets", method: http.MethodGet, status: http.StatusOK, script: []string{
		`pm.test("list answers 200", () => pm.response.to.have.status(200));`,
		`pm.test("list holds the new dataset", () => {`,
		`    pm.expect(pm.response.json()).to.have.property(pm.collectionVariables.get("DATASET_ID"));`,
		`});`,
	}},
	{name: "Look up a dataset", method: http.MethodGet, status: http.StatusOK, script: []string{
		`pm.test("look up answers 200", () => pm.response.to.have.status(200));`,
		`pm.test("look up answers the dataset keyed by its id", () => {`,
		`    const id = pm.collectionVariables.get("DATASET_ID");`,
		`    const body = pm.response.json();`,
		`    pm.expect(Object.keys(body)).to.eql([id]);`,
		`    pm.expect(body[id].name).to.eql("` + postmanDatasetName + `");`,
		`});`,
	}},
	{name: "Delete a dataset", method: http.MethodDelete, status: http.StatusOK, script: []string{
		`pm.test("delete answers 200", () => pm.response.to.have.status(200));`,
		`pm.test("delete answers the deleted dataset's reference", () => {`,
		`    pm.expect(pm.response.json()).to.eql(["@/dataSets/" + pm.collectionVariables.get("DATASET_ID")]);`,
		`});`,
	}},
}

// TestPostmanCatalogCollection runs requests of Adobe's own Catalog Service Postman collection with newman against
// the service: create, list, look up and delete a dataset, with Adobe's headers, query parameters and pre-request
// scripts, only the host changed. It proves that an Adobe client works against the service as it is.
func TestPostmanCatalogCollection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := repoRoot(t)
	newman := newmanPath(t, root)

	dir := t.TempDir()
	collection := filepath.Join(dir, "catalog-datasets.postman_collection.json")
	report := filepath.Join(dir, "report.json")
	writePostmanCollection(t, filepath.Join("testdata", "adobe", "postman", "catalog-service.postman_collection.json"), collection, b.url)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, newman, "run", collection,
		"--env-var", "ACCESS_TOKEN="+b.token,
		"--env-var", "API_KEY=test",
		"--env-var", "IMS_ORG="+b.org,
		"--env-var", "SANDBOX_NAME=prod",
		"--env-var", `dataSet={"name":"`+postmanDatasetName+`","description":"from Adobe's collection"}`,
		"--timeout-request", "10000",
		"--color", "off",
		"--reporters", "cli,json",
		"--reporter-json-export", report,
	)
	// A proxy configured on the machine must not see requests meant for the local test server.
	cmd.Env = append(os.Environ(), "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	// Should newman leave a child holding its output open, Wait returns anyway once the context has ended.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("newman output:\n%s", out)
	require.NoError(t, err, "newman failed (exit code 0 expected); its output is logged above")

	run := readNewmanReport(t, report)
	t.Logf("requests newman sent:%s", run)
	require.Len(t, run.Executions, len(postmanSteps), "executions: %s", run)
	for i, step := range postmanSteps {
		e := run.Executions[i]
		require.Equal(t, step.name, e.Item.Name, "execution %d", i)
		require.Equal(t, step.status, e.Response.Code, "%s: executions: %s", step.name, run)
	}
	require.Zero(t, run.Stats.Assertions.Failed, "failures: %s", run.Failures)
	require.GreaterOrEqual(t, run.Stats.Assertions.Total, len(postmanSteps))

	// The run's answers could all be right and the service still not have deleted anything: check its state.
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?name=" + postmanDatasetName})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.JSONEq(t, `{}`, string(resp.body), "the dataset is still listed")
	var deletes int
	require.NoError(t, b.db.Pool.QueryRow(ctx,
		`SELECT count(*) FROM audit_events WHERE org_id = $1 AND action = 'Delete' AND asset_name = $2`,
		b.org, postmanDatasetName).Scan(&deletes))
	require.Equal(t, 1, deletes, "audit events of the delete")
}

// repoRoot returns the repository's root: tests run in their package's directory, httpapi/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"), "the test must run in httpapi/, one level below the repository root")
	return root
}

// newmanPath finds newman: $NEWMAN, which `make test` sets, else the copy `make test` installs into .tools. A missing
// newman fails the test rather than skipping it, so that a run without it cannot pass.
func newmanPath(t *testing.T, root string) string {
	t.Helper()
	path := os.Getenv("NEWMAN")
	if path == "" {
		path = filepath.Join(root, ".tools", "node", "node_modules", ".bin", "newman")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("newman not found at %s (%v): run `make test`, which installs it and sets NEWMAN", path, err)
	}
	return path
}

// writePostmanCollection reads Adobe's collection from src and writes to dst a collection holding the requests of
// postmanSteps from its Datasets folder, in that order, each with its test script added and its host changed to
// baseURL. Everything else in the requests (method, headers, body, query, pre-request scripts) is kept as Adobe
// wrote it, which is the point of the test; the JSON is handled as untyped maps so that no field is lost.
func writePostmanCollection(t *testing.T, src, dst, baseURL string) {
	t.Helper()
	raw, err := os.ReadFile(src)
	require.NoError(t, err, "Adobe's Postman collection is testdata of the repository (testdata/adobe)")
	var adobe map[string]any
	require.NoError(t, json.Unmarshal(raw, &adobe))

	items := map[string]map[string]any{}
	for _, item := range postmanFolder(t, adobe, "Datasets") {
		items[item["name"].(string)] = item
	}
	var steps []any
	for _, step := range postmanSteps {
		item, ok := items[step.name]
		require.True(t, ok, "Adobe's Datasets folder has no request named %q", step.name)
		req := item["request"].(map[string]any)
		require.Equal(t, step.method, req["method"], step.name)
		rehost(t, req["url"].(map[string]any), baseURL)
		events, _ := item["event"].([]any)
		item["event"] = append(events, map[string]any{
			"listen": "test", "script": map[string]any{"type": "text/javascript", "exec": step.script},
		})
		steps = append(steps, item)
	}

	out, err := json.MarshalIndent(map[string]any{"info": adobe["info"], "item": steps}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, out, 0o600))
}

// postmanFolder returns the items of the collection's top-level folder name.
func postmanFolder(t *testing.T, collection map[string]any, name string) []map[string]any {
	t.Helper()
	folders, _ := collection["item"].([]any)
	for _, f := range folders {
		folder, _ := f.(map[string]any)
		if folder["name"] != name {
			continue
		}
		var items []map[string]any
		for _, it := range folder["item"].([]any) {
			items = append(items, it.(map[string]any))
		}
		return items
	}
	t.Fatalf("Adobe's collection has no folder %q", name)
	return nil
}

// rehost points a Postman URL object at baseURL instead of Adobe's gateway, keeping its path, query and path
// variables. newman builds the request from the object's parts, so they change along with raw.
func rehost(t *testing.T, u map[string]any, baseURL string) {
	t.Helper()
	rawURL, _ := u["raw"].(string)
	require.True(t, strings.HasPrefix(rawURL, adobeHost+"/"), "request URL %q is not on %s", rawURL, adobeHost)
	base, err := url.Parse(baseURL)
	require.NoError(t, err)
	u["raw"] = baseURL + strings.TrimPrefix(rawURL, adobeHost)
	u["protocol"] = base.Scheme
	u["host"] = strings.Split(base.Hostname(), ".")
	u["port"] = base.Port()
}

// newmanRun is the part of newman's JSON report the test reads.
type newmanRun struct {
	Stats struct {
		Assertions struct {
			Total  int `json:"total"`
			Failed int `json:"failed"`
		} `json:"assertions"`
	} `json:"stats"`
	Executions []struct {
		Item struct {
			Name string `json:"name"`
		} `json:"item"`
		Request struct {
			Method string `json:"method"`
			Header []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"header"`
		} `json:"request"`
		Response struct {
			Code int `json:"code"`
		} `json:"response"`
	} `json:"executions"`
	Failures json.RawMessage `json:"failures"`
}

// String lists the executions for failure messages: which request got which status, with the headers newman sent
// (the token left out), since a wrong status is usually explained by a header.
func (r *newmanRun) String() string {
	var sb strings.Builder
	for _, e := range r.Executions {
		fmt.Fprintf(&sb, "\n  %s %q -> %d; headers:", e.Request.Method, e.Item.Name, e.Response.Code)
		for _, h := range e.Request.Header {
			if !strings.EqualFold(h.Key, "Authorization") {
				fmt.Fprintf(&sb, " %s: %s;", h.Key, h.Value)
			}
		}
	}
	return sb.String()
}

// readNewmanReport reads the run from the JSON report newman wrote to path.
func readNewmanReport(t *testing.T, path string) *newmanRun {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "newman's JSON report")
	var report struct {
		Run newmanRun `json:"run"`
	}
	require.NoError(t, json.Unmarshal(raw, &report))
	return &report.Run
}
