package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// listingMetric names the dataset-listing row of the API-reads scenario, which the by-datasets cost curve reads.
const listingMetric = "GET /dataSets, first page"

// datasetListing times the first page of GET /dataSets as the console asks for it (50 datasets by name, one more
// to know whether a next page exists), over every dataset of the main org: the figure the by-datasets cost curve
// follows from 200 to 5,000 datasets.
func (h *harness) datasetListing(ctx context.Context) error {
	api, err := h.client(orgMain)
	if err != nil {
		return err
	}
	q := url.Values{}
	q.Set("limit", "51")
	q.Set("orderBy", "name")
	path := "/dataSets?" + q.Encode()
	const calls = 10
	durs, body, err := timedCalls(ctx, api, path, calls)
	if err != nil {
		return fmt.Errorf("%s: %w", listingMetric, err)
	}
	var page map[string]json.RawMessage
	_ = json.Unmarshal(body, &page)
	worst := durs[len(durs)-1]
	h.report.add(Row{Scenario: ScenarioAPIReads, Metric: fmt.Sprintf("%s of %s datasets", listingMetric, fmtInt(int64(len(h.mainIDs)))),
		Ours: fmtDur(worst), Goal: "< 1 s", Holds: verdict(worst < time.Second),
		Note: fmt.Sprintf("the slowest of %d calls after one warm-up (median %s) of GET %s, the console's first page: %d datasets answered, with their metrics, holds and pending expirations",
			len(durs), fmtDur(durs[len(durs)/2]), path, len(page))})
	return nil
}
