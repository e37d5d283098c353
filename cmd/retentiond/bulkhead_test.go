package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/testwait"
)

// TestRequestsCannotStarveHealthChecks is the pool part of finding 1: requests, jobs and /readyz shared one pool,
// so requests that held every connection made /readyz answer 503 (and stopped retention runs). Requests now have a
// pool of their own: with every one of its connections held, /readyz still answers from the health checks' pool.
func TestRequestsCannotStarveHealthChecks(t *testing.T) {
	t.Parallel()
	// Two connections for requests. pool_max_conns is how a build with one shared pool would be given the same.
	s := startWith(t, map[string]string{"DATABASE_URL": "pool_max_conns=2", "DATABASE_POOL_REQUESTS": "2"})
	status, _, body := s.do(t, http.MethodPost, "/dataSets", `{"name":"locked"}`, "create-locked")
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var refs []string
	require.NoError(t, json.Unmarshal(body, &refs))
	id := strings.TrimPrefix(refs[0], "@/dataSets/")

	// The test holds the dataset's row lock, so each PATCH of it waits, holding a request connection.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM datasets WHERE id = $1 FOR UPDATE`, id)
	require.NoError(t, err)
	patched := make(chan int, 2)
	for range 2 {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPatch, s.base+"/v2/dataSets/"+id, strings.NewReader(`{"description":"x"}`))
			if err != nil {
				patched <- 0
				return
			}
			req.Header.Set("Authorization", "Bearer "+s.token(t))
			req.Header.Set("x-api-key", "test-key")
			req.Header.Set("x-gw-ims-org-id", s.org)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				patched <- 0
				return
			}
			_ = resp.Body.Close()
			patched <- resp.StatusCode
		}()
	}
	testwait.For(t, 10*time.Second, func() (bool, string) {
		var waiting int
		require.NoError(t, s.pollDB(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'retentiond%' AND wait_event_type = 'Lock'`, &waiting))
		return waiting >= 2, fmt.Sprintf("%d of the 2 PATCHes wait on the lock", waiting)
	})

	client := http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/readyz", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "/readyz answers while requests hold their whole pool")

	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, http.StatusOK, <-patched)
	require.Equal(t, http.StatusOK, <-patched)
}

// pollDB reads one number from the server's database on a connection of its own.
func (s *server) pollDB(ctx context.Context, sql string, dst *int) error {
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	return conn.QueryRow(ctx, sql).Scan(dst)
}
