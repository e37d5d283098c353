package riverjobs

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
)

// The release job is not cut at the JobTimeout of the other jobs: its listings of dropped partitions into the
// deletion manifests are bounded each by SweepConfig.ListTimeout, which is longer.
func TestReleaseJobHasNoJobTimeout(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Duration(-1), (&releaseWorker{}).Timeout(&river.Job[releaseArgs]{}))
}
