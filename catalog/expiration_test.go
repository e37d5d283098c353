package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

func TestParseExpiry(t *testing.T) {
	t.Parallel()
	accepted := []struct {
		name, raw string
		want      time.Time
	}{
		{"DateIsMidnightUTC", "2030-12-31", time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"DateTimeWithoutOffsetIsUTC", "2030-12-31T18:00:00", time.Date(2030, 12, 31, 18, 0, 0, 0, time.UTC)},
		{"DateTimeWithZ", "2030-12-31T18:00:00Z", time.Date(2030, 12, 31, 18, 0, 0, 0, time.UTC)},
		{"Milliseconds", "2030-12-31T18:00:00.123Z", time.Date(2030, 12, 31, 18, 0, 0, 123e6, time.UTC)},
		{"FinerThanMillisecondsIsTruncated", "2030-12-31T18:00:00.123999999", time.Date(2030, 12, 31, 18, 0, 0, 123e6, time.UTC)},
		{"LeapDay", "2032-02-29", time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"LastDayOfYear9999", "9999-12-31T23:59:59.999", time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := catalog.ParseExpiry(tc.raw)
			require.NoError(t, err)
			require.True(t, tc.want.Equal(got), "got %s", got)
			require.Equal(t, time.UTC, got.Location())
		})
	}

	refused := []struct {
		name string
		raw  any
		typ  string
	}{
		{"PositiveOffset", "2030-12-31T18:00:00+02:00", "invalid-expiry"},
		{"NegativeOffset", "2030-12-31T18:00:00-05:00", "invalid-expiry"},
		{"ZeroOffsetSpelledOut", "2030-12-31T18:00:00+00:00", "invalid-expiry"},
		{"DateWithOffset", "2030-12-31+02:00", "invalid-expiry"},
		{"NoSeconds", "2030-12-31T18:00", "invalid-expiry"},
		{"SpaceForT", "2030-12-31 18:00:00", "invalid-expiry"},
		{"NotADay", "2031-02-29", "invalid-expiry"},
		{"Month13", "2030-13-01", "invalid-expiry"},
		{"FiveDigitYear", "10000-01-01", "invalid-expiry"},
		{"EpochMilliseconds", "1924992000000", "invalid-expiry"},
		{"ISODuration", "P30D", "invalid-expiry"},
		{"Empty", "", "invalid-expiry"},
		{"TrailingText", "2030-12-31T18:00:00Zjunk", "invalid-expiry"},
		{"NULByte", "2030-12-31\x00", "invalid-expiry"},
		{"InvalidUTF8", "2030-12-31\xff", "invalid-expiry"},
		{"Number", json.Number("1924992000000"), "invalid-type"},
		{"Float", 1.924992e12, "invalid-type"},
		{"Bool", true, "invalid-type"},
		{"Null", nil, "invalid-type"},
		{"Object", map[string]any{"date": "2030-12-31"}, "invalid-type"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := catalog.ParseExpiry(tc.raw)
			requireInvalid(t, err, tc.typ, "expiry")
		})
	}

	t.Run("HugeInputIsClippedInTheMessage", func(t *testing.T) {
		t.Parallel()
		_, err := catalog.ParseExpiry(strings.Repeat("9", 1<<20))
		e := requireInvalid(t, err, "invalid-expiry", "expiry")
		require.Less(t, len(e.Message), 400, "the message quotes a clipped value")
	})
}

// TestCheckExpiry holds the 24-hour rule at its edge: an expiry exactly a day after now is accepted, a millisecond
// less is refused.
func TestCheckExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		expiry time.Time
		ok     bool
	}{
		{"ExactlyADayAhead", now.Add(24 * time.Hour), true},
		{"AYearAhead", now.AddDate(1, 0, 0), true},
		{"AMillisecondShort", now.Add(24*time.Hour - time.Millisecond), false},
		{"AnHourAhead", now.Add(time.Hour), false},
		{"Now", now, false},
		{"InThePast", now.AddDate(-1, 0, 0), false},
		{"TomorrowsDateAtMidnight", time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC), false},
		{"TheDayAftersDate", time.Date(2026, 3, 12, 0, 0, 0, 0, time.UTC), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := catalog.CheckExpiry(tc.expiry, now)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			e := requireInvalid(t, err, "expiry-too-soon", "expiry")
			require.Contains(t, e.Message, "2026-03-11T12:00:00Z", "the message names the earliest expiry")
		})
	}
}

const dsID = "0123456789abcdef01234567"

func TestParseExpirationCreate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body  string
		typ, field  string
		description *string
	}{
		{name: "Minimal", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"x"}`},
		{name: "WithDescription", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"x","description":""}`, description: new("")},
		{name: "NullDescriptionIsNone", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"x","description":null}`},
		{name: "UnknownField", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"x","status":"completed"}`, typ: "unknown-field", field: "status"},
		{name: "MissingDatasetID", body: `{"expiry":"2030-01-01","displayName":"x"}`, typ: "missing-field", field: "datasetId"},
		{name: "UppercaseDatasetID", body: `{"datasetId":"0123456789ABCDEF01234567","expiry":"2030-01-01","displayName":"x"}`, typ: "invalid-dataset-id", field: "datasetId"},
		{name: "ExpirationIDForDatasetID", body: `{"datasetId":"SD-5b5712a5-bc53-4dfd-8ee6-4548373ba1e1","expiry":"2030-01-01","displayName":"x"}`, typ: "invalid-dataset-id", field: "datasetId"},
		{name: "NumericDatasetID", body: `{"datasetId":12,"expiry":"2030-01-01","displayName":"x"}`, typ: "invalid-dataset-id", field: "datasetId"},
		{name: "MissingExpiry", body: `{"datasetId":"` + dsID + `","displayName":"x"}`, typ: "missing-field", field: "expiry"},
		{name: "ExpiryWithOffset", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01T00:00:00+01:00","displayName":"x"}`, typ: "invalid-expiry", field: "expiry"},
		{name: "MissingDisplayName", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01"}`, typ: "missing-field", field: "displayName"},
		{name: "BlankDisplayName", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"  "}`, typ: "invalid-field", field: "displayName"},
		{name: "OverlongDisplayName", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"` + strings.Repeat("n", catalog.MaxNameLength+1) + `"}`, typ: "invalid-field", field: "displayName"},
		{name: "NULInDisplayName", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"a\u0000b"}`, typ: "nul-character", field: "displayName"},
		{name: "OverlongDescription", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"x","description":"` + strings.Repeat("d", catalog.MaxDescriptionLength+1) + `"}`, typ: "invalid-field", field: "description"},
		{name: "NumericDescription", body: `{"datasetId":"` + dsID + `","expiry":"2030-01-01","displayName":"x","description":1}`, typ: "invalid-type", field: "description"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			create, err := catalog.ParseExpirationCreate(decode(t, tc.body))
			if tc.typ != "" {
				requireInvalid(t, err, tc.typ, tc.field)
				return
			}
			require.NoError(t, err)
			require.Equal(t, dsID, create.DatasetID)
			require.Equal(t, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), create.Expiry)
			require.Equal(t, tc.description, create.Description)
		})
	}
}

func TestParseExpirationUpdate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		typ, field string
	}{
		{name: "ExpiryAlone", body: `{"expiry":"2031-06-15T12:30:00"}`},
		{name: "NullDescriptionRemovesIt", body: `{"description":null}`},
		{name: "Empty", body: `{}`, typ: "empty-update", field: ""},
		{name: "DatasetIDCannotChange", body: `{"datasetId":"` + dsID + `"}`, typ: "unknown-field", field: "datasetId"},
		{name: "StatusCannotBeSet", body: `{"status":"cancelled"}`, typ: "unknown-field", field: "status"},
		{name: "NullExpiry", body: `{"expiry":null}`, typ: "invalid-type", field: "expiry"},
		{name: "NullDisplayName", body: `{"displayName":null}`, typ: "invalid-type", field: "displayName"},
		{name: "ExpiryWithOffset", body: `{"expiry":"2031-06-15T12:30:00-07:00"}`, typ: "invalid-expiry", field: "expiry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := catalog.ParseExpirationUpdate(decode(t, tc.body))
			if tc.typ != "" {
				requireInvalid(t, err, tc.typ, tc.field)
				return
			}
			require.NoError(t, err)
		})
	}
}

// expirationIn returns an expiration in status s, created at created with its expiry two days later.
func expirationIn(s catalog.ExpirationStatus, created time.Time) *catalog.Expiration {
	return &catalog.Expiration{ID: "SD-5b5712a5-bc53-4dfd-8ee6-4548373ba1e1", DatasetID: dsID, Status: s,
		Expiry: created.Add(48 * time.Hour), Created: created, Updated: created}
}

// TestExpirationTransitions holds the lifecycle: which status may be updated, cancelled, reopened or acted on by the
// scheduler, and what each transition leaves.
func TestExpirationTransitions(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	c := &catalog.Caller{User: "alice"}
	later := created.Add(72 * time.Hour)
	newExpiry := created.Add(10 * 24 * time.Hour)
	name := "renamed"

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			from     catalog.ExpirationStatus
			update   catalog.ExpirationUpdate
			want     catalog.ExpirationStatus
			reopened bool
			field    string // of the refusal, "" when accepted
		}{
			{catalog.ExpirationPending, catalog.ExpirationUpdate{DisplayName: &name}, catalog.ExpirationPending, false, ""},
			{catalog.ExpirationPending, catalog.ExpirationUpdate{Expiry: &newExpiry}, catalog.ExpirationPending, false, ""},
			{catalog.ExpirationCancelled, catalog.ExpirationUpdate{Expiry: &newExpiry}, catalog.ExpirationPending, true, ""},
			{catalog.ExpirationCancelled, catalog.ExpirationUpdate{DisplayName: &name}, "", false, "expiry"},
			{catalog.ExpirationExecuting, catalog.ExpirationUpdate{Expiry: &newExpiry}, "", false, "status"},
			{catalog.ExpirationCompleted, catalog.ExpirationUpdate{DisplayName: &name}, "", false, "status"},
		}
		for _, tc := range cases {
			e := expirationIn(tc.from, created)
			next, reopened, err := e.Apply(tc.update, c, created.Add(time.Hour))
			if tc.field != "" {
				got := requireInvalid(t, err, "expiration-not-pending", tc.field)
				require.Contains(t, got.Message, string(tc.from), "the refusal names the status")
				continue
			}
			require.NoError(t, err, "from %s", tc.from)
			require.Equal(t, tc.want, next.Status)
			require.Equal(t, tc.reopened, reopened)
			require.Equal(t, "alice", next.UpdatedBy)
			require.Equal(t, tc.from, e.Status, "the receiver is unchanged")
			if reopened {
				require.Nil(t, next.CancelledAt)
				require.Equal(t, "reopened", next.Change.Status)
			}
		}
	})

	t.Run("UpdateHoldsThe24HourRule", func(t *testing.T) {
		t.Parallel()
		soon := created.Add(2 * time.Hour)
		_, _, err := expirationIn(catalog.ExpirationPending, created).Apply(catalog.ExpirationUpdate{Expiry: &soon}, c, created.Add(time.Hour))
		requireInvalid(t, err, "expiry-too-soon", "expiry")
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		for _, from := range catalog.ExpirationStatuses {
			next, err := expirationIn(from, created).Cancel(c, later)
			if from != catalog.ExpirationPending {
				got := requireInvalid(t, err, "expiration-not-pending", "status")
				require.Contains(t, got.Message, string(from))
				continue
			}
			require.NoError(t, err)
			require.Equal(t, catalog.ExpirationCancelled, next.Status)
			require.Equal(t, later, *next.CancelledAt)
			require.Empty(t, next.Reason, "a user's cancel has no reason")
		}
	})

	t.Run("Due", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			status catalog.ExpirationStatus
			at     time.Duration // after created; the expiry is at 48h
			due    bool
		}{
			{catalog.ExpirationPending, 47 * time.Hour, false},
			{catalog.ExpirationPending, 48 * time.Hour, true},
			{catalog.ExpirationPending, 100 * time.Hour, true},
			{catalog.ExpirationExecuting, time.Hour, true},
			{catalog.ExpirationCancelled, 100 * time.Hour, false},
			{catalog.ExpirationCompleted, 100 * time.Hour, false},
		}
		for _, tc := range cases {
			require.Equal(t, tc.due, expirationIn(tc.status, created).Due(created.Add(tc.at)), "%s at +%s", tc.status, tc.at)
		}
	})

	t.Run("ExecutingThenCompleted", func(t *testing.T) {
		t.Parallel()
		e := expirationIn(catalog.ExpirationPending, created)
		e.Reason = "held"
		executing := e.Executing("retention-service", later)
		require.Equal(t, catalog.ExpirationExecuting, executing.Status)
		require.Empty(t, executing.Reason, "a reason to wait no longer stands")
		require.Equal(t, later, *executing.ExecutingAt)
		done := executing.Completed("retention-service", later.Add(time.Second))
		require.Equal(t, catalog.ExpirationCompleted, done.Status)
		require.Equal(t, later, *done.ExecutingAt)
		require.Equal(t, later.Add(time.Second), *done.CompletedAt)
		require.Equal(t, []string{"executing", "completed"}, []string{executing.Change.Status, done.Change.Status})
		require.Nil(t, e.Change, "each step returns a copy")
	})

	t.Run("CancelledBecauseKeepsTheReason", func(t *testing.T) {
		t.Parallel()
		next := expirationIn(catalog.ExpirationPending, created).CancelledBecause("deleted by other means", "retention-service", later)
		require.Equal(t, catalog.ExpirationCancelled, next.Status)
		require.Equal(t, "deleted by other means", next.Reason)
		require.Equal(t, "deleted by other means", next.AuditDetails(nil)["reason"])
	})
}

func TestNewExpirationAndCanSchedule(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	c := &catalog.Caller{User: "alice"}
	ds := &catalog.Dataset{ID: dsID, Name: "pilot", Org: "O@AdobeOrg", Sandbox: "prod",
		Classification: catalog.Classification{ManagedBy: catalog.Customer}}

	e, err := catalog.NewExpiration(catalog.ExpirationCreate{DatasetID: dsID, Expiry: now.Add(24 * time.Hour), DisplayName: "x"}, ds, c, "SD-1", now)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationPending, e.Status)
	require.Equal(t, "created", e.Change.Status)
	_, err = catalog.NewExpiration(catalog.ExpirationCreate{DatasetID: dsID, Expiry: now.Add(23 * time.Hour), DisplayName: "x"}, ds, c, "SD-1", now)
	requireInvalid(t, err, "expiry-too-soon", "expiry")

	require.NoError(t, catalog.CanSchedule(ds))
	system := *ds
	system.Classification.ManagedBy = catalog.System
	err = catalog.CanSchedule(&system)
	require.Equal(t, catalog.EFORBIDDEN, catalog.ErrorCode(err))
}

// TestExpirationReasonIsTheCurrentState: a read's reason names the hold only for a due pending expiration; one not
// yet due, or with no active hold, has none, and a cancelled one keeps the service's own; Held puts an executing
// one back to pending with its reason and a "pending" history entry.
func TestExpirationReasonIsTheCurrentState(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	due, early := created.Add(72*time.Hour), created.Add(time.Hour)
	hold := &catalog.Hold{ID: "0123456789abcdef01234567", PlacedBy: "legal@example.com"}
	for _, tc := range []struct {
		name   string
		status catalog.ExpirationStatus
		hold   *catalog.Hold
		now    time.Time
		held   bool
	}{
		{"DueAndHeld", catalog.ExpirationPending, hold, due, true},
		{"NotYetDue", catalog.ExpirationPending, hold, early, false},
		{"Released", catalog.ExpirationPending, nil, due, false},
		{"Executing", catalog.ExpirationExecuting, hold, due, false},
	} {
		e := expirationIn(tc.status, created)
		e.Reason = "stale"
		e.WaitsFor(tc.hold, tc.now)
		if tc.held {
			require.Contains(t, e.Reason, hold.ID, tc.name)
		} else {
			require.Empty(t, e.Reason, tc.name)
		}
	}
	cancelled := expirationIn(catalog.ExpirationCancelled, created)
	cancelled.Reason = "deleted by other means"
	cancelled.WaitsFor(hold, due)
	require.Equal(t, "deleted by other means", cancelled.Reason)

	back := expirationIn(catalog.ExpirationPending, created).Executing("retention-service", due).Held("held by "+hold.ID, "retention-service", due)
	require.Equal(t, catalog.ExpirationPending, back.Status)
	require.Nil(t, back.ExecutingAt)
	require.Equal(t, catalog.ExpirationEvent{Status: "pending", Expiry: back.Expiry, UpdatedAt: due, UpdatedBy: "retention-service",
		Reason: "held by " + hold.ID}, *back.Change)
}
