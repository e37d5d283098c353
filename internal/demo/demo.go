// Package demo loads the small demo data set of `make run`: a few time-series datasets in two orgs, with event rows
// spread over two years, so that a new user has something to list, inspect, change and expire right away. It also
// generates the synthetic rows of `retentionctl load -generate`.
package demo

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// Orgs are the demo orgs; the first one is the org of the printed dev token.
var Orgs = []string{"ACME00000000000000000001@AdobeOrg", "GLOBEX000000000000000002@AdobeOrg"}

// RowsPerDataset is how many event rows each demo time-series dataset gets, spread over RowSpan before now.
const (
	RowsPerDataset = 20_000
	RowSpan        = 730 * 24 * time.Hour
)

// datasetSpec describes one demo dataset.
type datasetSpec struct {
	org         string
	name        string
	description string
	tags        map[string][]string
	managedBy   catalog.ManagedBy
	behavior    catalog.DataBehavior
	payload     func(r *rand.Rand, dst []byte) []byte // the rows' fields; nil for record datasets, which get none
}

var datasets = []datasetSpec{
	{Orgs[0], "web-clickstream", "Page views and clicks of the Acme web shop.", map[string][]string{"team": {"web"}}, catalog.Customer, catalog.TimeSeries, ClickPayload},
	{Orgs[0], "app-sessions", "Mobile app sessions, profile-enabled.", map[string][]string{"team": {"mobile"}, "unifiedProfile": {"enabled:true"}}, catalog.Customer, catalog.TimeSeries, sessionPayload},
	{Orgs[0], "journey-feedback", "Message feedback events kept by the platform.", map[string][]string{"team": {"platform"}}, catalog.System, catalog.TimeSeries, feedbackPayload},
	{Orgs[0], "loyalty-members", "Loyalty member records (their TTL counts from each record's last write; none until one is set).", map[string][]string{"team": {"crm"}}, catalog.Customer, catalog.Record, nil},
	{Orgs[1], "pos-transactions", "Point-of-sale transactions of Globex stores.", map[string][]string{"team": {"retail"}}, catalog.Customer, catalog.TimeSeries, transactionPayload},
	{Orgs[1], "support-tickets", "Support ticket events.", map[string][]string{"team": {"support"}}, catalog.Customer, catalog.TimeSeries, ticketPayload},
}

// Load creates the demo datasets that do not exist yet and gives each time-series one RowsPerDataset event rows
// spread over the two years before now, unless it holds rows already: a second `make run` leaves the data as it
// is. The rows keep their event time as their ingestion time, as a migrated history would, so that they are not
// held back by the ingestion grace and a retention run removes the expired ones. It returns the first org's demo
// datasets, by name: not the datasets a user created beside them.
func Load(ctx context.Context, svc catalog.DatasetService, db *postgres.DB) ([]*catalog.Dataset, error) {
	return LoadOrgs(ctx, svc, db, Orgs)
}

// LoadOrgs is Load for the demo datasets of orgs only, each one of Orgs, as a cell of `make run-cells` holds its
// own org and not the other's; it returns the demo datasets of orgs[0].
func LoadOrgs(ctx context.Context, svc catalog.DatasetService, db *postgres.DB, orgs []string) ([]*catalog.Dataset, error) {
	if len(orgs) == 0 {
		return nil, errors.New("load demo data: no org")
	}
	for _, org := range orgs {
		if !slices.Contains(Orgs, org) {
			return nil, fmt.Errorf("load demo data: %s is not a demo org (%s)", org, strings.Join(Orgs, ", "))
		}
	}
	rows := postgres.NewRowService(db, 0)
	now := db.Now().UTC().Truncate(time.Millisecond)
	for i, spec := range datasets {
		if !slices.Contains(orgs, spec.org) {
			continue
		}
		c := &catalog.Caller{User: "demo@acme.example", ClientID: "retentiond-demo", Org: spec.org, Sandbox: catalog.DefaultSandbox, RequestID: "demo-load"}
		ds, err := ensureDataset(ctx, svc, c, spec)
		if err != nil {
			return nil, err
		}
		if spec.payload == nil {
			continue
		}
		stored, err := storedRows(ctx, db, ds.ID)
		if err != nil {
			return nil, err
		}
		if stored > 0 {
			continue
		}
		gen := Synthetic{N: RowsPerDataset, From: now.Add(-RowSpan), To: now, Seed: 2026, Stream: uint64(i), IngestedAtEvent: true, Payload: spec.payload}
		if _, err := rows.IngestRows(ctx, c, ds.ID, gen.Rows(), catalog.IngestOptions{AllowIngestedAt: true}); err != nil {
			return nil, fmt.Errorf("load rows of demo dataset %s: %w", spec.name, err)
		}
	}
	c := &catalog.Caller{Org: orgs[0], Sandbox: catalog.DefaultSandbox}
	var names []string
	for _, spec := range datasets {
		if spec.org == orgs[0] {
			names = append(names, spec.name)
		}
	}
	demo, err := svc.FindDatasets(ctx, c, catalog.DatasetFilter{Names: names, IncludeAll: true, OrderBy: []catalog.Order{{Field: "name"}}})
	if err != nil {
		return nil, fmt.Errorf("list demo datasets: %w", err)
	}
	return demo, nil
}

// ensureDataset creates the demo dataset, or finds it when an earlier run created it.
func ensureDataset(ctx context.Context, svc catalog.DatasetService, c *catalog.Caller, spec datasetSpec) (*catalog.Dataset, error) {
	desc := spec.description
	ds, err := svc.CreateDataset(ctx, c, catalog.DatasetCreate{
		Name: spec.name, Description: &desc, Tags: spec.tags,
		Classification: catalog.Classification{DataBehavior: spec.behavior, ManagedBy: spec.managedBy},
	})
	if err == nil {
		return ds, nil
	}
	if catalog.ErrorCode(err) != catalog.ECONFLICT {
		return nil, fmt.Errorf("create demo dataset %s: %w", spec.name, err)
	}
	found, err := svc.FindDatasets(ctx, c, catalog.DatasetFilter{Names: []string{spec.name}, IncludeAll: true})
	if err != nil {
		return nil, fmt.Errorf("find demo dataset %s: %w", spec.name, err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("demo dataset %s exists but could not be found", spec.name)
	}
	return found[0], nil
}

// storedRows is how many rows the dataset holds in its stores, expired or not, from the counters ingestion keeps.
// The postgres package has no call for it yet, so this reads row_stats directly.
func storedRows(ctx context.Context, db *postgres.DB, datasetID string) (int64, error) {
	var n int64
	err := db.Pool.QueryRow(ctx, `SELECT COALESCE(sum(row_count), 0)::bigint FROM row_stats WHERE dataset_id = $1`, datasetID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rows of demo dataset %s: %w", datasetID, err)
	}
	return n, nil
}

// Synthetic describes N synthetic event rows whose timestamps are spread uniformly over [From, To): row i falls at
// a random instant of the i-th of N equal slices of the range, so the rows come in time order, each chunk lands in
// few partitions, and no two runs of one seed differ but in their generated _ids.
type Synthetic struct {
	N        int
	From, To time.Time
	Seed     uint64
	Stream   uint64 // tells apart the row sets of one seed, such as one per dataset
	// IngestedAtEvent sets each row's ingestion time to its event time, as in a migrated history; otherwise
	// IngestedAt, when set, is every row's ingestion time, and nil means the time of storing.
	IngestedAtEvent bool
	IngestedAt      *time.Time
	// Payload appends the row's other fields, a JSON object, to dst; nil means ClickPayload.
	Payload func(r *rand.Rand, dst []byte) []byte
	// People, when positive, gives each row the XDM identityMap of one of People synthetic people (PersonEmail as
	// its primary identity, and an ECID), drawn uniformly by a generator of its own: the rows' times and other
	// fields are those of the same seed without it. The row's identities are those the service extracts from the
	// map.
	People int
}

// PersonEmail is the e-mail address, the primary identity, of synthetic person p (Synthetic.People).
func PersonEmail(p int) string { return "person-" + strconv.Itoa(p) + "@example.com" }

// PersonECID is the ECID of synthetic person p: 38 digits, as Adobe's ECIDs.
func PersonECID(p int) string { return fmt.Sprintf("%038d", uint64(p)*0x9E3779B97F4A7C15>>1) } //nolint:gosec // G115: a person's index, never negative

// AppendIdentityMap appends the "identityMap" member of synthetic person p, with its trailing comma, to an event
// object being written: {"email":[{"id":PersonEmail(p),"primary":true}],"ECID":[{"id":PersonECID(p)}]}.
func AppendIdentityMap(dst []byte, p int) []byte {
	dst = append(dst, `"identityMap":{"email":[{"id":"`...)
	dst = append(dst, PersonEmail(p)...)
	dst = append(dst, `","primary":true}],"ECID":[{"id":"`...)
	dst = append(dst, PersonECID(p)...)
	return append(dst, `"}]},`...)
}

// PersonKeys are the identity keys (catalog.IdentityKey) a row of synthetic person p is found by: its primary
// e-mail alone, since the map marks it primary.
func PersonKeys(p int) []string { return []string{catalog.IdentityKey("email", PersonEmail(p))} }

// peopleStream sets the people's generator apart from the rows' own.
const peopleStream = 0x1d_e471_7135

// slabSize is the size of the buffers payloads are cut from, so that a million rows are not a million allocations.
const slabSize = 64 << 10

// Rows returns the rows, generated as they are consumed: nothing is held but the current payload buffer.
func (s Synthetic) Rows() iter.Seq[catalog.RowInput] {
	return func(yield func(catalog.RowInput) bool) {
		if s.N <= 0 || !s.To.After(s.From) {
			return
		}
		r := rand.New(rand.NewPCG(s.Seed, s.Stream))
		people := rand.New(rand.NewPCG(s.Seed, s.Stream^peopleStream))
		payload := s.Payload
		if payload == nil {
			payload = ClickPayload
		}
		from := s.From.UTC().Truncate(time.Millisecond)
		span := s.To.Sub(from).Milliseconds()
		step := float64(span) / float64(s.N)
		var slab []byte
		for i := range s.N {
			ms := min(int64((float64(i)+r.Float64())*step), span-1)
			ts := from.Add(time.Duration(ms) * time.Millisecond)
			if cap(slab)-len(slab) < 512 {
				slab = make([]byte, 0, slabSize)
			}
			start := len(slab)
			var keys []string
			if s.People > 0 {
				p := people.IntN(s.People)
				slab = AppendIdentityMap(append(slab, '{'), p)
				keys = PersonKeys(p)
				fields := len(slab)
				slab = payload(r, slab)
				// The payload's own object opens with a brace the map's members already opened.
				slab = append(slab[:fields], slab[fields+1:]...)
				if slab[len(slab)-1] == '}' && slab[len(slab)-2] == ',' { // an empty payload: no member after the map
					slab = append(slab[:len(slab)-2], '}')
				}
			} else {
				slab = payload(r, slab)
			}
			body := slab[start:len(slab):len(slab)]
			in := catalog.RowInput{ID: uuid.Must(uuid.NewV7()).String(), Timestamp: ts, Payload: body, PayloadSize: len(body), Identities: keys}
			switch {
			case s.IngestedAtEvent:
				in.IngestedAt = &ts
			case s.IngestedAt != nil:
				in.IngestedAt = s.IngestedAt
			}
			if !yield(in) {
				return
			}
		}
	}
}

// ClickPayload appends a web page view such as {"page":"/p/123","userId":"u-42","durationMs":350}.
func ClickPayload(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, `{"page":"/p/`...)
	dst = strconv.AppendInt(dst, int64(1+r.IntN(999)), 10)
	dst = append(dst, `","userId":"u-`...)
	dst = strconv.AppendInt(dst, int64(1+r.IntN(9999)), 10)
	dst = append(dst, `","durationMs":`...)
	dst = strconv.AppendInt(dst, int64(50+r.IntN(5000)), 10)
	return append(dst, '}')
}

func sessionPayload(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, `{"sessionId":"s-`...)
	dst = strconv.AppendUint(dst, r.Uint64()>>16, 16)
	dst = append(dst, `","platform":"`...)
	dst = append(dst, pick(r, "ios", "android")...)
	dst = append(dst, `","durationSec":`...)
	dst = strconv.AppendInt(dst, int64(5+r.IntN(1800)), 10)
	return append(dst, '}')
}

func feedbackPayload(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, `{"messageId":"m-`...)
	dst = strconv.AppendInt(dst, int64(100000+r.IntN(900000)), 10)
	dst = append(dst, `","channel":"`...)
	dst = append(dst, pick(r, "email", "push", "sms")...)
	dst = append(dst, `","action":"`...)
	dst = append(dst, pick(r, "delivered", "opened", "clicked", "bounced", "unsubscribed")...)
	return append(dst, `"}`...)
}

func transactionPayload(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, `{"storeId":"st-`...)
	dst = strconv.AppendInt(dst, int64(1+r.IntN(60)), 10)
	dst = append(dst, `","amountCents":`...)
	dst = strconv.AppendInt(dst, int64(99+r.IntN(25000)), 10)
	return append(dst, `,"currency":"USD"}`...)
}

func ticketPayload(r *rand.Rand, dst []byte) []byte {
	dst = append(dst, `{"ticketId":"T-`...)
	dst = strconv.AppendInt(dst, int64(1000+r.IntN(90000)), 10)
	dst = append(dst, `","status":"`...)
	dst = append(dst, pick(r, "opened", "updated", "resolved", "closed")...)
	dst = append(dst, `","priority":"`...)
	dst = append(dst, pick(r, "low", "normal", "normal", "high")...)
	return append(dst, `"}`...)
}

func pick(r *rand.Rand, choices ...string) string { return choices[r.IntN(len(choices))] }
