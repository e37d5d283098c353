package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
)

// lockChainHead takes the org's chain head for the rest of the transaction: writers of one org append one after
// the other, writers of different orgs never wait for each other.
const lockChainHead = `SELECT seq, head_hash FROM audit_chains WHERE org_id = $1 FOR UPDATE`

// createChainHead starts an org's chain. Two first writers may race: the loser's insert waits for the winner and
// then does nothing, and its second lockChainHead finds the winner's row.
const createChainHead = `
INSERT INTO audit_chains (org_id, seq, head_hash, updated_at) VALUES ($1, 0, $2, $3)
ON CONFLICT (org_id) DO NOTHING`

// appendAuditEvent inserts the sealed event and advances the head in one statement, one round trip.
const appendAuditEvent = `
WITH appended AS (
    INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name,
                              action, status, user_id, client_id, details, seq, prev_hash, hash)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
)
UPDATE audit_chains SET seq = $14, head_hash = $16, updated_at = $4 WHERE org_id = $2`

// auditChain is "off" only in the baseline of retentionbench's audit-chain scenario, which measures what the chain
// costs against a retentiond built with
//
//	go build -ldflags "-X github.com/acme/retention/postgres.auditChain=off" ./cmd/retentiond
//
// (internal/bench, service.go). Such a build writes events unchained, without tamper evidence. It is a value the
// linker sets rather than a setting, so that nothing in a deployed service's configuration can turn the chain off;
// every other build chains every event. Both ways are compiled, vetted and linted in every build.
var auditChain = "on"

// chained reports whether events are linked into their org's hash chain: always, but in the benchmark's baseline.
func chained() bool { return auditChain != "off" }

// insertUnchainedAuditEvent inserts an event outside its org's chain (no prev_hash, no hash) and leaves the chain
// head alone. Only the benchmark's unchained build writes events this way (auditChain).
const insertUnchainedAuditEvent = `
INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name,
                          action, status, user_id, client_id, details, seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

// writeAuditEvent appends ev to its org's chain inside tx: the caller's change and its event commit or fail
// together. It locks the org's chain head until tx ends, so callers write their event last in the transaction (the
// lock is then held only for the commit) and a transaction writing events of several orgs writes them in org order.
// It sets ev's ID (when empty), Seq, PrevHash and Hash. (The benchmark's unchained build writes it unchained.)
func writeAuditEvent(ctx context.Context, tx pgx.Tx, ev *audit.Event) error {
	if err := checkWriteFence(ctx, tx, ev.Org); err != nil {
		return err
	}
	id, details, err := prepareAuditEvent(ev)
	if err != nil {
		return err
	}
	if !chained() {
		return writeUnchainedAuditEvent(ctx, tx, ev, id, details)
	}
	seq, prev, err := lockChain(ctx, tx, ev)
	if err != nil {
		return err
	}
	if err := ev.Seal(seq+1, prev); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, appendAuditEvent, ev.ID, ev.Org, ev.Sandbox, ev.Timestamp, ev.RequestID, ev.AssetType,
		ev.AssetID, ev.AssetName, ev.Action, ev.Status, ev.User, ev.ClientID, json.RawMessage(details),
		ev.Seq, ev.PrevHash, ev.Hash)
	if err != nil {
		return fmt.Errorf("write %s audit event of %s: %w", ev.Action, ev.AssetID, err)
	}
	return nil
}

// prepareAuditEvent gives ev an ID when it has none, in the form Postgres shows (lower-case and hyphenated, as it
// is hashed), and returns its details as JSON.
func prepareAuditEvent(ev *audit.Event) (uuid.UUID, []byte, error) {
	if ev.ID == "" {
		ev.ID = audit.NewID()
	}
	id, err := uuid.Parse(ev.ID)
	if err != nil {
		return id, nil, fmt.Errorf("audit event id %q: %w", ev.ID, err)
	}
	ev.ID = id.String()
	if ev.Details == nil {
		ev.Details = map[string]any{}
	}
	details, err := json.Marshal(ev.Details)
	if err != nil {
		return id, nil, fmt.Errorf("encode details of %s audit event of %s: %w", ev.Action, ev.AssetID, err)
	}
	return id, details, nil
}

// appendManyAuditEvents inserts sealed events of one org and advances its head to the last, in one statement.
const appendManyAuditEvents = `
WITH appended AS (
    INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name,
                              action, status, user_id, client_id, details, seq, prev_hash, hash)
    SELECT e.id, $1, e.sandbox_name, e.occurred_at, e.request_id, e.asset_type, e.asset_id, e.asset_name,
           e.action, e.status, e.user_id, e.client_id, e.details::jsonb, e.seq, e.prev_hash, e.hash
    FROM unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                $10::text[], $11::text[], $12::text[], $13::text[], $14::bigint[], $15::text[], $16::text[])
        AS e (id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name, action, status, user_id,
              client_id, details, seq, prev_hash, hash)
)
UPDATE audit_chains SET seq = $17, head_hash = $18, updated_at = $19 WHERE org_id = $1`

// appendAuditEvents appends events of one org to its chain inside tx, as writeAuditEvent does one, with one lock of
// the chain head and one statement for all of them.
func appendAuditEvents(ctx context.Context, tx pgx.Tx, evs []*audit.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if !chained() || len(evs) == 1 {
		for _, ev := range evs {
			if err := writeAuditEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		return nil
	}
	if err := checkWriteFence(ctx, tx, evs[0].Org); err != nil {
		return err
	}
	seq, prev, err := lockChain(ctx, tx, evs[0])
	if err != nil {
		return err
	}
	var cols auditColumns
	for _, ev := range evs {
		if ev.Org != evs[0].Org {
			return fmt.Errorf("append audit events: %s and %s in one append", evs[0].Org, ev.Org)
		}
		_, details, err := prepareAuditEvent(ev)
		if err != nil {
			return err
		}
		seq++
		if err := ev.Seal(seq, prev); err != nil {
			return err
		}
		prev = ev.Hash
		cols.add(ev, details)
	}
	last := evs[len(evs)-1]
	_, err = tx.Exec(ctx, appendManyAuditEvents, last.Org, cols.id, cols.sandbox, cols.occurred, cols.request, cols.assetType,
		cols.assetID, cols.assetName, cols.action, cols.status, cols.user, cols.client, cols.details, cols.seq,
		cols.prev, cols.hash, last.Seq, last.Hash, last.Timestamp)
	if err != nil {
		return fmt.Errorf("write %d %s audit events of %s: %w", len(evs), evs[0].Action, last.Org, err)
	}
	return nil
}

// auditColumns holds events column by column, for unnest.
type auditColumns struct {
	id, sandbox, request, assetType, assetID, assetName, action, status, user, client, details, prev, hash []string
	occurred                                                                                               []time.Time
	seq                                                                                                    []int64
}

func (c *auditColumns) add(ev *audit.Event, details []byte) {
	c.id, c.sandbox, c.occurred, c.request = append(c.id, ev.ID), append(c.sandbox, ev.Sandbox), append(c.occurred, ev.Timestamp), append(c.request, ev.RequestID)
	c.assetType, c.assetID, c.assetName = append(c.assetType, ev.AssetType), append(c.assetID, ev.AssetID), append(c.assetName, ev.AssetName)
	c.action, c.status = append(c.action, ev.Action), append(c.status, ev.Status)
	c.user, c.client, c.details = append(c.user, ev.User), append(c.client, ev.ClientID), append(c.details, string(details))
	c.seq, c.prev, c.hash = append(c.seq, ev.Seq), append(c.prev, ev.PrevHash), append(c.hash, ev.Hash)
}

// writeUnchainedAuditEvent writes ev without linking it into the chain, as the benchmark's unchained build does:
// no chain head is locked or advanced, nothing is hashed. seq is NOT NULL and unique per org, and numbering the
// events 1, 2, 3… would need the very lock the chain takes; ev gets a negative seq made of 62 random bits of its id
// instead, below every chained seq, so the chain walk (seq > anchor_seq) never reads it.
func writeUnchainedAuditEvent(ctx context.Context, tx pgx.Tx, ev *audit.Event, id uuid.UUID, details []byte) error {
	ev.Timestamp = ev.Timestamp.UTC().Truncate(time.Microsecond)
	ev.Seq = -1 - int64(binary.BigEndian.Uint64(id[8:])&(1<<62-1))
	ev.PrevHash, ev.Hash = "", ""
	_, err := tx.Exec(ctx, insertUnchainedAuditEvent, ev.ID, ev.Org, ev.Sandbox, ev.Timestamp, ev.RequestID, ev.AssetType,
		ev.AssetID, ev.AssetName, ev.Action, ev.Status, ev.User, ev.ClientID, json.RawMessage(details), ev.Seq)
	if err != nil {
		return fmt.Errorf("write %s audit event of %s: %w", ev.Action, ev.AssetID, err)
	}
	return nil
}

// lockChain locks the org's chain head, creating it on the org's first event, and returns the newest seq and hash.
func lockChain(ctx context.Context, tx pgx.Tx, ev *audit.Event) (int64, string, error) {
	var seq int64
	var head string
	err := tx.QueryRow(ctx, lockChainHead, ev.Org).Scan(&seq, &head)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := tx.Exec(ctx, createChainHead, ev.Org, audit.GenesisHash, ev.Timestamp); err != nil {
			return 0, "", fmt.Errorf("start audit chain of %s: %w", ev.Org, err)
		}
		err = tx.QueryRow(ctx, lockChainHead, ev.Org).Scan(&seq, &head)
	}
	if err != nil {
		return 0, "", fmt.Errorf("lock audit chain of %s: %w", ev.Org, err)
	}
	return seq, head, nil
}

// AuditService implements audit.Service and audit.Purger.
type AuditService struct {
	db *DB
	// PurgeBatch bounds the events one purge transaction removes; default 50,000.
	PurgeBatch int64
	// CountBudget is how long counting a query's events may take before the planner's estimate stands in for
	// totalElements; default 25ms.
	CountBudget time.Duration
}

// NewAuditService returns an AuditService on db.
func NewAuditService(db *DB) *AuditService { return &AuditService{db: db, PurgeBatch: 50_000} }

var _ audit.Service = (*AuditService)(nil)

// Record appends an event that no other change carries, in a transaction of its own; the audit retention records
// its purges with it, and tests their fixtures.
func (s *AuditService) Record(ctx context.Context, ev *audit.Event) error {
	if ev.Timestamp.IsZero() {
		ev.Timestamp = s.db.now()
	}
	return s.db.inTx(ctx, func(tx pgx.Tx) error { return writeAuditEvent(ctx, tx, ev) })
}
