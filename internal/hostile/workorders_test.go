package hostile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
)

// workOrderTenant is a caller of org with every scope and workorders.manage, which creates record-delete orders.
func workOrderTenant(t *testing.T, s *service, org string) *tenant {
	t.Helper()
	tn := s.tenant(t, org)
	token, err := httpapi.MintToken(secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "user@" + org, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, ClientID: "hostile-suite", Scope: strings.Join(append(slices.Clone(allScopes), catalog.ScopeWorkOrdersManage), " "),
	})
	require.NoError(t, err)
	tn.token = token
	return tn
}

// maxOrderBody is a work order against ALL naming catalog.MaxWorkOrderIdentities e-mails, the i-th batch of them.
func maxOrderBody(i int) string {
	ids := make([]string, catalog.MaxWorkOrderIdentities)
	for j := range ids {
		ids[j] = fmt.Sprintf("%q", fmt.Sprintf("person-%d-%d@example.com", i, j))
	}
	return `{"action":"delete_identity","datasetId":"ALL","displayName":"flood","namespacesIdentities":[{"namespace":{"code":"email"},"IDs":[` +
		strings.Join(ids, ",") + `]}]}`
}

// victimIngestion is the median over n ingestions of one identified row into the victim's dataset on each side,
// alternating, and their ratio (attacked over control).
func victimIngestion(t *testing.T, attacked, control *victim, n int) (time.Duration, time.Duration, float64) {
	t.Helper()
	timed := func(v *victim, i int) time.Duration {
		line := fmt.Sprintf(`{"timestamp":%q,"identityMap":{"email":[{"id":"v%d@example.com"}]}}`, time.Now().UTC().Format(time.RFC3339), i)
		begin := time.Now()
		status, body := v.do(t, http.MethodPost, "/dataSets/"+v.Dataset+"/rows", line, "Content-Type", "application/x-ndjson")
		took := time.Since(begin)
		require.Equal(t, http.StatusOK, status, "victim ingestion: %s", body)
		return took
	}
	a, c := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		a[i], c[i] = timed(attacked, i), timed(control, i)
	}
	slices.Sort(a)
	slices.Sort(c)
	return a[n/2], c[n/2], float64(a[n/2]) / float64(max(c[n/2], time.Microsecond))
}

// TestWorkOrderFloodLeavesOtherOrgsAlone is issue #31's point 6: an org whose rows carry identities in 20 datasets
// sends orders of 100,000 identities against ALL, two at a time, as fast as it is answered, while the orders it got
// accepted run; another org's reads and ingestion on that service are judged against the same requests on a
// service of their own with no attack, side by side. The attacker is bounded by its orders in flight and its quota,
// and its orders complete.
func TestWorkOrderFloodLeavesOtherOrgsAlone(t *testing.T) {
	t.Parallel()
	svc := start(t, "RETENTION_WORKORDER_INTERVAL=1s")
	quiet := start(t, "RETENTION_WORKORDER_INTERVAL=1s")
	v, control := newVictim(t, svc), newVictim(t, quiet)
	a := workOrderTenant(t, svc, "ATTACKER0000000000000031@AdobeOrg")
	now := time.Now().UTC().Format(time.RFC3339)
	for d := range 20 {
		id := a.createDataset(t, fmt.Sprintf("people-%d", d))
		lines := make([]string, 500)
		for i := range lines {
			lines[i] = fmt.Sprintf(`{"timestamp":%q,"identityMap":{"email":[{"id":"person-0-%d@example.com"}]}}`, now, d*500+i)
		}
		require.Equal(t, 500, a.ingest(t, id, lines...).Accepted)
	}
	bodies := []string{maxOrderBody(0), maxOrderBody(1)}

	stop := make(chan struct{})
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for loop := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				status, _ := a.do(t, http.MethodPost, "/data/core/hygiene/workorder", bodies[(loop+i)%2])
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		})
	}
	readA, readC, readRatio := compareLatency(t, sideBySide{attacked: v.tenant, control: control.tenant,
		attackedPath: "/dataSets/" + v.Dataset + "/rows?limit=5", controlPath: "/dataSets/" + control.Dataset + "/rows?limit=5"}, 31)
	ingestA, ingestC, ingestRatio := victimIngestion(t, v, control, 31)
	close(stop)
	wg.Wait()
	t.Logf("victim's read median %s beside the flood, %s on a quiet service (ratio %.2f); ingestion %s and %s (ratio %.2f); attacker's answers %v",
		readA, readC, readRatio, ingestA, ingestC, ingestRatio, statuses)
	require.Positive(t, statuses[http.StatusOK], "the attacker got orders accepted: %v", statuses)
	for status := range statuses {
		require.Contains(t, []int{http.StatusOK, http.StatusBadRequest, http.StatusTooManyRequests}, status, "the attacker's answers: %v", statuses)
	}
	require.LessOrEqual(t, readRatio, float64(latencyMargin), "the victim's reads beside the flood against a quiet service")
	require.LessOrEqual(t, ingestRatio, float64(latencyMargin), "the victim's ingestion beside the flood against a quiet service")
	require.True(t, svc.ready(), "/readyz answers 200 after the flood")

	var completed int
	status, body := a.do(t, http.MethodGet, "/data/core/hygiene/workorder?limit=100", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var page struct {
		Results []struct {
			Status string `json:"status"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(body, &page))
	require.LessOrEqual(t, len(page.Results), catalog.DefaultDailyIdentityQuota/catalog.MaxWorkOrderIdentities, "the quota bounds the accepted orders")
	for _, r := range page.Results {
		if r.Status == string(catalog.WorkOrderCompleted) {
			completed++
		}
	}
	t.Logf("attacker's orders: %d accepted, %d completed by the end of the measure", len(page.Results), completed)
}
