package postgres_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// TestSilentServerIsAnOutage: a database address that accepts TCP and never answers (what a dead port becomes once
// another listener takes it) makes the connection time out; that is an outage the API answers 503, not a 500.
func TestSilentServerIsAnOutage(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() }) // held open, never answered
		}
	}()
	db, err := postgres.Open(context.Background(), "postgres://postgres@"+ln.Addr().String()+"/gone?connect_timeout=1", nil)
	require.NoError(t, err, "the pool connects lazily")
	t.Cleanup(db.Close)
	caller := &catalog.Caller{User: "t", Org: "ORG@AdobeOrg", Sandbox: "prod"}
	_, err = postgres.NewDatasetService(db).FindDatasets(context.Background(), caller, catalog.DatasetFilter{Limit: 1})
	require.Equal(t, catalog.EUNAVAILABLE, catalog.ErrorCode(err), "%v", err)
}
