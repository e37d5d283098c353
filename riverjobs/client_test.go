package riverjobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/acme/retention/internal/testdb"
)

// TestAuditPurgeIsAPeriodicJob: the audit log's retention runs as a River periodic job (once when the leader
// starts, then every AuditPurgeInterval), where it was a ticker goroutine on every replica.
func TestAuditPurgeIsAPeriodicJob(t *testing.T) {
	t.Parallel()
	db := testdb.NewDB(t)
	purged := make(chan struct{}, 1)
	purge := func(context.Context) error {
		select {
		case purged <- struct{}{}:
		default:
		}
		return nil
	}
	testdb.Jobs(t, db, testdb.JobsOptions{Work: true, AuditPurge: purge})
	select {
	case <-purged:
	case <-time.After(60 * time.Second):
		t.Fatal("the audit purge never ran")
	}
}
