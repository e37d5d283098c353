package hostile

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHarnessSeesTheVictim checks the suite's own yardstick: a victim with no attacker beside it is unharmed, and a
// victim that lost a row is not.
func TestHarnessSeesTheVictim(t *testing.T) {
	t.Parallel()
	svc := start(t)
	v := newVictim(t, svc)
	v.requireUnharmed(t)

	status, body := v.do(t, http.MethodDelete, "/dataSets/"+v.Dataset+"/rows/v0", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.ErrorContains(t, v.checkUnharmed(t), "9 of its 10 rows")
}
