package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// OrgRouter switches the cell an org's requests are routed to. Place must be idempotent (internal/cells.Router is one): a move resumed after
// a kill calls it again.
type OrgRouter interface {
	Place(ctx context.Context, org, cell string) error
}

// RouteDrainer is an OrgRouter that can tell when the requests it forwarded before a switch have ended
// (internal/cells.Router is one). A move waits for them after the switch and before it removes the org from the
// source: a read routed to the source just before the switch, and served just after the removal, would find the org
// gone and answer 503 org-moved where it should have answered the org's data.
type RouteDrainer interface {
	// Drain waits until every request that was being forwarded to a cell other than keep when it was called has
	// ended, and returns how many there were; it returns ctx's error if they have not ended by then.
	Drain(ctx context.Context, keep string) (int, error)
}

// The steps of a move, as org_moves.step records them: each is committed before the next begins, so a move killed
// anywhere resumes at the step after the last committed one.
const (
	stepDraining  = "draining"  // fence raised as draining: no new run lists the org; runs in flight end
	stepPrecopied = "precopied" // writes still pass; the target holds a copy of one snapshot, checked chunk by chunk
	stepFenced    = "fenced"    // writes refused; the catch-up may begin
	stepCopied    = "copied"    // the target holds the source as fenced (the catch-up's one transaction)
	stepVerified  = "verified"  // counts and the audit chain checked on the target; its fence lifted
	stepSwitched  = "switched"  // the route points at the target
	stepDone      = "done"      // the source holds nothing of the org (source) / the move is over (target)
)

// OrgMove moves every row of one org from the Source cell's database to the Target's: copy while the org's writes
// still pass, fence, catch up what changed since the copy, verify, switch the route, remove from the source
// (docs/scaling.md, "Moving an org"). Run it again after any failure or kill: it resumes from the last committed
// step.
type OrgMove struct {
	Org        string
	Source     *DB
	Target     *DB
	TargetCell string
	Router     OrgRouter
	// User names who moves, in the audit events; default "retentionctl".
	User string
	// RunPoll is how often the move looks again at the runs in flight over the org; default 1 s. RunWait bounds the
	// wait; default 30 min.
	RunPoll, RunWait time.Duration
	// DrainWait bounds the wait, after the switch, for the requests the Router had forwarded to the source (when it
	// is a RouteDrainer); default 30 s, the service's HTTP_WRITE_TIMEOUT, the longest an answer may take to be
	// accepted. Past it the move goes on: a read of the org still in flight there answers 503 org-moved.
	DrainWait time.Duration
	// AfterStep, when set, is called after each committed step; an error stops the move there, as a kill would.
	AfterStep func(step string) error
	// Logf, when set, is told of each step.
	Logf func(format string, args ...any)
}

// MoveReport is what one call of Run did.
type MoveReport struct {
	ID string
	// Copied counts the rows copied per table before the fence; Removed those removed from the source, per table.
	Copied, Removed map[string]int64
	// CaughtUp counts the rows the catch-up wrote again on the target while fenced, per table (the small tables
	// whole, the stores' rows of the chunks that changed, the audit events appended since the copy).
	CaughtUp map[string]int64
	// Datasets is how many datasets' rows were checked by checksum; Chunks how many chunks of rows (partition,
	// dataset, bucket of _id) the copy compared, and ChunksChanged how many of them the catch-up found changed and
	// copied and compared again.
	Datasets, Chunks, ChunksChanged int
	// Fenced is how long the org's writes were refused, from the fence to the route switch, when this call saw both.
	Fenced time.Duration
	Steps  []string
}

// ErrMoveRunning is returned when another mover holds the org's move.
var ErrMoveRunning = errors.New("another move of this org is running")

type moveState struct {
	id, step string
	since    time.Time
}

// Run performs or resumes the move.
func (m *OrgMove) Run(ctx context.Context) (*MoveReport, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	release, err := m.lockMove(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	rep := &MoveReport{Copied: map[string]int64{}, Removed: map[string]int64{}, CaughtUp: map[string]int64{}}
	st, err := m.load(ctx, rep)
	if err != nil || st == nil {
		return rep, err
	}
	rep.ID = st.id
	return rep, m.walk(ctx, st, rep)
}

func (m *OrgMove) check() error {
	switch {
	case m.Org == "" || strings.ContainsRune(m.Org, 0):
		return &catalog.Error{Code: catalog.EINVALID, Field: "org", Message: "name the org to move"}
	case m.Source == nil || m.Target == nil:
		return &catalog.Error{Code: catalog.EINVALID, Field: "to", Message: "a move needs the source's and the target's databases"}
	case m.TargetCell == "":
		return &catalog.Error{Code: catalog.EINVALID, Field: "to-cell", Message: "name the target cell, for the route"}
	case m.Router == nil:
		return &catalog.Error{Code: catalog.EINVALID, Field: "router", Message: "a move needs a router to switch the org's route"}
	}
	return nil
}

// walk takes the move from its step to the end, one committed step at a time.
func (m *OrgMove) walk(ctx context.Context, st *moveState, rep *MoveReport) error {
	for st.step != stepDone {
		began := time.Now()
		next, err := m.advance(ctx, st, rep)
		if err != nil {
			return fmt.Errorf("move %s (%s) at step %s: %w", m.Org, st.id, st.step, err)
		}
		m.logf("move %s: %s in %s", st.id, next, time.Since(began).Round(time.Millisecond))
		st.step = next
		rep.Steps = append(rep.Steps, next)
		if m.AfterStep != nil {
			if err := m.AfterStep(next); err != nil {
				return err
			}
		}
	}
	return m.finishTarget(ctx, st.id, rep)
}

func (m *OrgMove) advance(ctx context.Context, st *moveState, rep *MoveReport) (string, error) {
	switch st.step {
	case stepDraining:
		if err := m.waitRuns(ctx); err != nil {
			return "", err
		}
		return stepPrecopied, m.precopy(ctx, st, rep)
	case stepPrecopied:
		return stepFenced, m.raiseFence(ctx, st)
	case stepFenced:
		return stepCopied, m.copyOrg(ctx, st, rep)
	case stepCopied:
		return stepVerified, m.verify(ctx, st)
	case stepVerified:
		if err := m.Router.Place(ctx, m.Org, m.TargetCell); err != nil {
			return "", fmt.Errorf("switch the route to %s: %w", m.TargetCell, err)
		}
		if !st.since.IsZero() {
			rep.Fenced = m.Source.now().Sub(st.since)
		}
		return stepSwitched, m.recordSwitch(ctx, st, rep.Fenced)
	case stepSwitched:
		m.drain(ctx, st.id)
		return stepDone, m.removeSource(ctx, st, rep)
	}
	return "", fmt.Errorf("unknown step %q", st.step)
}

// drain waits, when the Router can tell, until the requests it was forwarding to other cells at the switch have
// ended, so that none of them reads the source after the org has left it. Its failure is only logged: no data is at
// stake, and such a read answers 503 org-moved with Retry-After, which a client retries at the target.
func (m *OrgMove) drain(ctx context.Context, id string) {
	d, ok := m.Router.(RouteDrainer)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(m.DrainWait, 30*time.Second))
	defer cancel()
	start := time.Now()
	n, err := d.Drain(ctx, m.TargetCell)
	if err != nil {
		m.logf("move %s: %d requests in flight to other cells at the switch, not all ended (%v): removing the org from the source all the same", id, n, err)
		return
	}
	m.logf("move %s: %d requests in flight to other cells at the switch, ended in %s", id, n, time.Since(start).Round(time.Millisecond))
}

func (m *OrgMove) logf(format string, args ...any) {
	if m.Logf != nil {
		m.Logf(format, args...)
	}
}

// load finds the org's open move on the source, or finishes one the source has ended, or starts one.
func (m *OrgMove) load(ctx context.Context, rep *MoveReport) (*moveState, error) {
	st := &moveState{}
	err := m.Source.Pool.QueryRow(ctx, `SELECT m.id::text, m.step, coalesce(f.since, 'epoch') FROM org_moves m
		LEFT JOIN org_write_fences f ON f.org_id = m.org_id AND f.state = 'fenced'
		WHERE m.org_id = $1 AND m.role = 'source' AND m.step <> 'done'`, m.Org).Scan(&st.id, &st.step, &st.since)
	if err == nil {
		if st.since.Equal(time.Unix(0, 0)) {
			st.since = time.Time{}
		}
		return st, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read the move of %s: %w", m.Org, err)
	}
	var open string
	err = m.Target.Pool.QueryRow(ctx, `SELECT id::text FROM org_moves WHERE org_id = $1 AND role = 'target' AND step <> 'done'`, m.Org).Scan(&open)
	if err == nil {
		var step string
		if err := m.Source.Pool.QueryRow(ctx, `SELECT step FROM org_moves WHERE id = $1 AND role = 'source'`, open).Scan(&step); err != nil {
			return nil, fmt.Errorf("the target has move %s of %s open, which the source does not know: %w", open, m.Org, err)
		}
		rep.ID = open
		return nil, m.finishTarget(ctx, open, rep)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read the target's moves of %s: %w", m.Org, err)
	}
	return m.start(ctx)
}

// start raises the fence as draining and records the move and its first audit event, in one transaction.
func (m *OrgMove) start(ctx context.Context) (*moveState, error) {
	var state *string
	if err := m.Source.Pool.QueryRow(ctx, `SELECT state FROM org_write_fences WHERE org_id = $1`, m.Org).Scan(&state); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if state != nil && *state == fenceMoved {
		return nil, &catalog.Error{Code: catalog.ECONFLICT, Field: "org", Message: fmt.Sprintf("org %s has already moved away from the source cell", m.Org)}
	}
	held, err := orgFootprint(ctx, m.Target, m.Org)
	if err != nil {
		return nil, err
	}
	if held != "" {
		return nil, &catalog.Error{Code: catalog.ECONFLICT, Field: "to",
			Message: fmt.Sprintf("the target cell already holds rows of org %s (%s): a move goes only to a cell that holds nothing of the org", m.Org, held)}
	}
	st := &moveState{id: uuid.NewString(), step: stepDraining}
	now := m.Source.now()
	err = m.Source.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO org_moves (id, org_id, role, target_cell, step, started_at, updated_at)
			VALUES ($1, $2, 'source', $3, 'draining', $4, $4)`, st.id, m.Org, m.TargetCell, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO org_write_fences (org_id, move_id, state, since) VALUES ($1, $2, 'draining', $3)`, m.Org, st.id, now); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, m.event(st.id, now, map[string]any{"step": "started", "toCell": m.TargetCell}))
	})
	if err != nil {
		return nil, fmt.Errorf("start the move of %s: %w", m.Org, TranslateError(err))
	}
	m.logf("move %s: started, moving org %s to cell %s", st.id, m.Org, m.TargetCell)
	return st, nil
}

// event is an audit event of the move, in the org's own chain.
func (m *OrgMove) event(id string, now time.Time, details map[string]any) *audit.Event {
	user := m.User
	if user == "" {
		user = "retentionctl"
	}
	details["moveId"] = id
	return &audit.Event{Org: m.Org, Sandbox: catalog.DefaultSandbox, Timestamp: now, RequestID: "move:" + id,
		AssetType: audit.AssetOrg, AssetID: m.Org, AssetName: m.Org, Action: audit.ActionMove, Status: audit.StatusSuccess,
		User: user, ClientID: "retentionctl", Details: details}
}

// waitRuns waits until no run in flight covers the org: a run still pending may list it, and a running one that
// listed it has parts of it left. Runs listed after the fence went up leave the org out (unfencedSQL).
func (m *OrgMove) waitRuns(ctx context.Context) error {
	poll, limit := m.RunPoll, m.RunWait
	if poll <= 0 {
		poll = time.Second
	}
	if limit <= 0 {
		limit = 30 * time.Minute
	}
	deadline := time.Now().Add(limit)
	for {
		var runs []string
		err := m.Source.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(r.id::text ORDER BY r.id), '{}') FROM retention_runs r
			WHERE (r.status = 'pending' AND (r.org_id IS NULL OR r.org_id = $1))
			   OR (r.status = 'running' AND EXISTS (SELECT 1 FROM retention_run_datasets rd
			       WHERE rd.run_id = r.id AND rd.org_id = $1 AND rd.status IN ('pending', 'running')))`, m.Org).Scan(&runs)
		if err != nil {
			return fmt.Errorf("look for runs over %s: %w", m.Org, err)
		}
		if len(runs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("runs %s still cover org %s after %s; run the move again once they end", strings.Join(runs, ", "), m.Org, limit)
		}
		m.logf("move: waiting for runs %s to end", strings.Join(runs, ", "))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// raiseFence refuses the org's writes from now on. It takes the org's fence lock exclusive, so it waits for every
// writing transaction that passed the fence (org_write_fence) to commit: those are in the catch-up, made after.
func (m *OrgMove) raiseFence(ctx context.Context, st *moveState) error {
	now := m.Source.now()
	err := m.Source.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(18, hashtext($1))`, m.Org); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE org_write_fences SET state = 'fenced', since = $2 WHERE org_id = $1`, m.Org, now); err != nil {
			return err
		}
		return setStepIn(ctx, tx, st.id, "source", stepFenced, now)
	})
	st.since = now
	return err
}

// recordSwitch commits the switch on the source with how long the org's writes were refused, which the completed
// event names.
func (m *OrgMove) recordSwitch(ctx context.Context, st *moveState, fenced time.Duration) error {
	return m.Source.inTx(ctx, func(tx pgx.Tx) error {
		if !st.since.IsZero() {
			if _, err := tx.Exec(ctx, `UPDATE org_moves SET counts = counts || jsonb_build_object('writesRefusedMs', $2::bigint)
				WHERE id = $1 AND role = 'source'`, st.id, fenced.Milliseconds()); err != nil {
				return err
			}
		}
		return setStepIn(ctx, tx, st.id, "source", stepSwitched, m.Source.now())
	})
}

func (m *OrgMove) setStep(ctx context.Context, db *DB, id, role, step string) error {
	return db.inTx(ctx, func(tx pgx.Tx) error { return setStepIn(ctx, tx, id, role, step, db.now()) })
}

func setStepIn(ctx context.Context, tx pgx.Tx, id, role, step string, now time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE org_moves SET step = $3, updated_at = $4 WHERE id = $1 AND role = $2`, id, role, step, now)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("move %s has no %s row", id, role)
	}
	return err
}

// targetStep is the step the target's row of the move records, "" when it has none (no copy committed).
func (m *OrgMove) targetStep(ctx context.Context, id string) (string, error) {
	var step string
	err := m.Target.Pool.QueryRow(ctx, `SELECT step FROM org_moves WHERE id = $1 AND role = 'target'`, id).Scan(&step)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return step, err
}

// finishTarget closes the move on the target with its last audit event, naming what left the source.
func (m *OrgMove) finishTarget(ctx context.Context, id string, rep *MoveReport) error {
	step, err := m.targetStep(ctx, id)
	if err != nil || step == stepDone {
		return err
	}
	var removed map[string]int64
	var refusedMs *int64
	if err := m.Source.Pool.QueryRow(ctx, `SELECT coalesce(counts->'removed', '{}'), (counts->>'writesRefusedMs')::bigint
		FROM org_moves WHERE id = $1 AND role = 'source'`, id).Scan(&removed, &refusedMs); err != nil {
		return fmt.Errorf("read what the move removed: %w", err)
	}
	details := map[string]any{"step": "completed", "removedFromSource": removed}
	if refusedMs != nil {
		details["writesRefusedMs"] = *refusedMs // from the fence to the switch
	}
	now := m.Target.now()
	err = m.Target.inTx(ctx, func(tx pgx.Tx) error {
		if err := setStepIn(ctx, tx, id, "target", stepDone, now); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, m.event(id, now, details))
	})
	if err == nil {
		rep.Steps = append(rep.Steps, "completed")
		m.logf("move %s: completed", id)
	}
	return err
}

// orgFootprint names the tables of db holding rows of org, "" when none does.
func orgFootprint(ctx context.Context, db *DB, org string) (string, error) {
	var held []string
	for _, ot := range orgTables {
		var n int64
		if err := db.Pool.QueryRow(ctx, countSQL(ot, org)).Scan(&n); err != nil {
			return "", fmt.Errorf("count %s of %s: %w", ot.name, org, err)
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%s: %d", ot.name, n))
		}
	}
	return strings.Join(held, ", "), nil
}

func countSQL(ot orgTable, org string) string {
	return `SELECT count(*) FROM ` + pgx.Identifier{ot.name}.Sanitize() + ` t WHERE ` + ot.where(org)
}

// marshalCounts is the JSON of a count map, for org_moves.counts and audit details.
func marshalCounts(c map[string]int64) []byte {
	b, _ := json.Marshal(c)
	return b
}
