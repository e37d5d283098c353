package hostile

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHarnessSeesTheVictim checks the suite's own yardstick: a victim with no attacker beside it is unharmed, its
// reads compared side by side with the same reads of a twin service are within the margin, and a victim that lost a
// row is not unharmed.
func TestHarnessSeesTheVictim(t *testing.T) {
	t.Parallel()
	svc, twin := start(t), start(t)
	v, tv := newVictim(t, svc), newVictim(t, twin)
	v.requireUnharmed(t)
	path := "/dataSets/%s/rows?limit=5"
	a, c, ratio := compareLatency(t, sideBySide{attacked: v.tenant, control: tv.tenant,
		attackedPath: fmt.Sprintf(path, v.Dataset), controlPath: fmt.Sprintf(path, tv.Dataset)}, 15)
	t.Logf("twin services, no attack: medians %s and %s, %.1fx", a, c, ratio)
	require.LessOrEqual(t, ratio, float64(latencyMargin))

	status, body := v.do(t, http.MethodDelete, "/dataSets/"+v.Dataset+"/rows/v0", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.ErrorContains(t, v.checkUnharmed(t), "9 of its 10 rows")
}
