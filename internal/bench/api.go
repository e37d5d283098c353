package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
)

// apiClient calls the service's REST API as one org, the way a client behind Adobe's gateway does.
type apiClient struct {
	base  string
	org   string
	token string
	http  *http.Client
}

// sharedTransport keeps enough idle connections for every concurrent client of the harness, so that each load
// client holds one keep-alive connection, as wrk does.
var sharedTransport = &http.Transport{
	MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute, DisableCompression: true,
}

func newAPIClient(base, secret, org string) (*apiClient, error) {
	token, err := httpapi.MintToken(secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "retentionbench@acme.example", IssuedAt: jwt.NewNumericDate(time.Now()),
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(48 * time.Hour))},
		Org: org, ClientID: "retentionbench",
		Scope: strings.Join([]string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeAuditRead, catalog.ScopeRetentionRun,
			catalog.ScopeRetentionHold, catalog.ScopeWorkOrdersManage}, " "),
	})
	if err != nil {
		return nil, err
	}
	return &apiClient{base: base, org: org, token: token, http: &http.Client{Transport: sharedTransport, Timeout: 10 * time.Minute}}, nil
}

// loadRequestTimeout bounds each request of the load generators: a request that takes longer counts as an error,
// and a service that stops answering costs the harness this long, not the scenario's whole budget.
const loadRequestTimeout = 30 * time.Second

// forLoad returns the client with the load generators' request timeout.
func (a *apiClient) forLoad() *apiClient {
	c := *a
	c.http = &http.Client{Transport: sharedTransport, Timeout: loadRequestTimeout}
	return &c
}

// apiError is a response with an unexpected status.
type apiError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *apiError) Error() string {
	body := e.Body
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return fmt.Sprintf("%s %s: status %d: %s", e.Method, e.Path, e.Status, body)
}

// routeMissing reports whether err is the service's answer for a route it does not have.
func routeMissing(err error) bool {
	var ae *apiError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Status == http.StatusMethodNotAllowed ||
		(ae.Status == http.StatusNotFound && strings.Contains(ae.Body, "route-not-found"))
}

// do sends a request and returns the body of a response with one of the wanted statuses (200 when none is named).
func (a *apiClient) do(ctx context.Context, method, path, contentType string, body io.Reader, want ...int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("x-api-key", "retentionbench")
	req.Header.Set("x-gw-ims-org-id", a.org)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if len(want) == 0 {
		want = []int{http.StatusOK}
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return data, nil
		}
	}
	return nil, &apiError{Method: method, Path: path, Status: resp.StatusCode, Body: string(data)}
}

func (a *apiClient) doJSON(ctx context.Context, method, path string, in, out any, want ...int) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	data, err := a.do(ctx, method, path, "application/json", body, want...)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// get discards the body: the load generators only need the status.
func (a *apiClient) get(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("x-api-key", "retentionbench")
	req.Header.Set("x-gw-ims-org-id", a.org)
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		// The start of the answer names the problem (its type), which the status alone does not.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return &apiError{Method: http.MethodGet, Path: path, Status: resp.StatusCode, Body: string(body)}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// createDataset creates a time-series CUSTOMER dataset and returns its id.
func (a *apiClient) createDataset(ctx context.Context, name string) (string, error) {
	var refs []string
	err := a.doJSON(ctx, http.MethodPost, "/dataSets", map[string]any{
		"name": name, "classification": map[string]any{"dataBehavior": "time-series", "managedBy": "CUSTOMER"},
	}, &refs, http.StatusCreated)
	if err != nil {
		return "", err
	}
	if len(refs) != 1 || !strings.HasPrefix(refs[0], "@/dataSets/") {
		return "", fmt.Errorf("create dataset %s: unexpected answer %v", name, refs)
	}
	return strings.TrimPrefix(refs[0], "@/dataSets/"), nil
}

// setTTL sets the data-lake TTL of a dataset.
func (a *apiClient) setTTL(ctx context.Context, id, ttl string) error {
	return a.doJSON(ctx, http.MethodPatch, "/v2/dataSets/"+id, map[string]any{
		"extensions": map[string]any{string(catalog.LakeHouse): map[string]any{"rowExpiration": map[string]any{"ttlValue": ttl}}},
	}, nil)
}

// placeHold places a legal hold on a dataset.
func (a *apiClient) placeHold(ctx context.Context, id string) error {
	return a.doJSON(ctx, http.MethodPost, "/dataSets/"+id+"/holds",
		map[string]any{"reason": "retentionbench: one held dataset", "reference": "bench"}, nil, http.StatusCreated)
}

// runDoc is a run as the API shows it, with what the harness measured of it.
type runDoc struct {
	httpapi.RunDoc

	// Set by timedRun: when the harness sent the POST, and how long until a poll saw the run ended.
	postedAt time.Time
	observed time.Duration
}

func (r *runDoc) evaluatedAt() (time.Time, error) {
	return time.Parse(time.RFC3339Nano, r.EvaluatedAt)
}

// runPollInterval is how often waitRun asks the API whether a run has ended. Frequent polls would slow the run they
// measure (each GET /retention/runs/{id} reads every dataset part of the run, on the service's small connection
// pool); timedRun watches the run's row in the database instead.
const runPollInterval = 200 * time.Millisecond

// startRun asks for a manual run and returns it.
func (a *apiClient) startRun(ctx context.Context, body map[string]any) (*runDoc, error) {
	var run runDoc
	if err := a.doJSON(ctx, http.MethodPost, "/retention/runs", body, &run, http.StatusAccepted); err != nil {
		return nil, err
	}
	return &run, nil
}

// waitRun polls the run until it is no longer pending or running.
func (a *apiClient) waitRun(ctx context.Context, id string, limit time.Duration) (*runDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		var run runDoc
		if err := a.doJSON(ctx, http.MethodGet, "/retention/runs/"+id, nil, &run); err != nil {
			return nil, err
		}
		if run.Status != "pending" && run.Status != "running" {
			return &run, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s still %s after %v (%d of %d datasets done)", id, run.Status, limit, run.Progress.DatasetsDone, run.Progress.DatasetsTotal)
		case <-time.After(runPollInterval):
		}
	}
}

// timedRun starts a run, waits for its end and returns it with its duration: from its creation by the service's
// clock to the moment the harness, reading the run's row every runWatchInterval on a connection of its own to
// dbURL, saw its end committed. The run's finishedAt is when its last transaction began, before that transaction
// wrote the datasets' parts and their audit events; the commit is when anyone can see the run ended. (The harness
// and the service read one clock.)
func (a *apiClient) timedRun(ctx context.Context, dbURL string, body map[string]any) (*runDoc, time.Duration, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	start := time.Now()
	run, err := a.startRun(ctx, body)
	if err != nil {
		return nil, 0, err
	}
	ended, err := waitRunCommitted(ctx, conn, run.ID, 30*time.Minute)
	observed := time.Since(start)
	if err != nil {
		return nil, observed, err
	}
	done, err := a.waitRun(ctx, run.ID, time.Minute)
	if err != nil {
		return nil, observed, err
	}
	done.postedAt, done.observed = start, observed
	created, err := time.Parse(time.RFC3339Nano, done.CreatedAt)
	if err != nil {
		return done, observed, fmt.Errorf("run %s has no createdAt: %w", done.ID, err)
	}
	d := ended.Sub(created)
	if done.Status != "succeeded" {
		return done, d, fmt.Errorf("run %s ended %s: %s", done.ID, done.Status, runErrors(done))
	}
	return done, d, nil
}

// runWatchInterval is how often timedRun reads the run's row: a primary-key read on the harness's own connection.
const runWatchInterval = 5 * time.Millisecond

// waitRunCommitted returns when the harness first saw the run's end committed.
func waitRunCommitted(ctx context.Context, conn *pgx.Conn, id string, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		var status string
		if err := conn.QueryRow(ctx, `SELECT status FROM retention_runs WHERE id = $1`, id).Scan(&status); err != nil {
			return time.Time{}, fmt.Errorf("watch run %s: %w", id, err)
		}
		if status != "pending" && status != "running" {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("run %s still %s after %v", id, status, limit)
		case <-time.After(runWatchInterval):
		}
	}
}

func runErrors(r *runDoc) string {
	msgs := []string{}
	if r.Error != "" {
		msgs = append(msgs, r.Error)
	}
	for _, d := range r.Datasets {
		if d.Error != "" && len(msgs) < 5 {
			msgs = append(msgs, d.DatasetID+": "+d.Error)
		}
	}
	return strings.Join(msgs, "; ")
}
