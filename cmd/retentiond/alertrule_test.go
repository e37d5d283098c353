package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeRulesMarker, on the line before a yaml block of the README, marks the alerting rules promtool checks.
const readmeRulesMarker = "<!-- promtool: rules -->"

// readmeAlertRules returns the README's alerting rules block.
func readmeAlertRules(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, after, found := strings.Cut(string(text), readmeRulesMarker+"\n```yaml\n")
	require.True(t, found, "the README has a yaml block after %s", readmeRulesMarker)
	block, _, found := strings.Cut(after, "\n```\n")
	require.True(t, found, "the rules block ends")
	return block + "\n"
}

// alertRuleTests are promtool's unit tests of the README's rule: it fires for deletable rows older than a store's
// schedule allows, on any replica, and not for younger ones, nor for rows in the grace or under a hold. Samples come
// every minute: Prometheus takes a series as gone 5 minutes after its last sample, which would reset the rule's `for`.
const alertRuleTests = `rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'retention_oldest_expired_age_seconds{state="deletable",store="adobe_lakeHouse",instance="a"}'
        values: '0+60x60'
      - series: 'retention_oldest_expired_age_seconds{state="deletable",store="adobe_lakeHouse",instance="b"}'
        values: '691200+60x60'
      - series: 'retention_oldest_expired_age_seconds{state="deletable",store="adobe_unifiedProfile",instance="a"}'
        values: '86400+60x60'
      - series: 'retention_oldest_expired_age_seconds{state="held",store="adobe_unifiedProfile",instance="a"}'
        values: '9999999+60x60'
      - series: 'retention_oldest_expired_age_seconds{state="grace",store="adobe_lakeHouse",instance="a"}'
        values: '9999999+60x60'
    alert_rule_test:
      - eval_time: 20m
        alertname: RetentionDeletionBehind
        exp_alerts: []
      - eval_time: 50m
        alertname: RetentionDeletionBehind
        exp_alerts:
          - exp_labels: {severity: page, store: adobe_lakeHouse}
            exp_annotations:
              summary: 'Expired rows of adobe_lakeHouse have been deletable for 8d 0h 50m 0s'
              description: 'retention_expired_rows{state="deletable"} counts them; check the runs (GET /retention/runs, retention_runs_total).'
  - interval: 1m
    input_series:
      - series: 'retention_oldest_expired_age_seconds{state="deletable",store="adobe_unifiedProfile",instance="a"}'
        values: '172000+60x60'
    alert_rule_test:
      - eval_time: 40m
        alertname: RetentionDeletionBehind
        exp_alerts: []
      - eval_time: 50m
        alertname: RetentionDeletionBehind
        exp_alerts:
          - exp_labels: {severity: page, store: adobe_unifiedProfile}
            exp_annotations:
              summary: 'Expired rows of adobe_unifiedProfile have been deletable for 2d 0h 36m 40s'
              description: 'retention_expired_rows{state="deletable"} counts them; check the runs (GET /retention/runs, retention_runs_total).'
`

// TestReadmeAlertRulesPassPromtool checks the README's alerting rule with promtool ($PROMTOOL, installed by make
// tools-promtool): it is valid, and it fires as the README says.
func TestReadmeAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool := os.Getenv("PROMTOOL")
	require.NotEmpty(t, promtool, "PROMTOOL is unset: run the tests through make test, whose tools-promtool installs it")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(readmeAlertRules(t)), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules_test.yml"), []byte(alertRuleTests), 0o600))
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}
