package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/config"
	"github.com/acme/retention/internal/pgcluster"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

const testSecret = "test-secret-of-at-least-thirty-two-bytes!"

// ctl runs the CLI as main would, with env as its whole environment, and returns what it printed on stdout.
func ctl(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	out, _, err := ctlBoth(t, env, args...)
	return out, err
}

// ctlBoth is ctl that returns stderr too.
func ctlBoth(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, func(name string) string { return env[name] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustCtl is ctl for calls that have to succeed.
func mustCtl(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, err := ctl(t, env, args...)
	require.NoError(t, err, "retentionctl %s: %s", strings.Join(args, " "), out)
	return out
}

func verify(t *testing.T, secret, token string) (*httpapi.Claims, error) {
	t.Helper()
	auth, err := httpapi.NewAuthenticator(context.Background(), secret, "", time.Now)
	require.NoError(t, err)
	return auth.Verify(token)
}

func TestToken(t *testing.T) {
	t.Parallel()

	t.Run("SignsWithGivenSecretAndClaims", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"AUTH_HS256_SECRET": testSecret}
		before := time.Now().Truncate(time.Second) // JWT times are whole seconds
		out := mustCtl(t, env, "token", "-org", "ORG1@AdobeOrg", "-sub", "ops@example.com",
			"-scope", "datasets.read audit.read", "-client", "ops-client", "-ttl", "1h")
		after := time.Now()
		require.True(t, strings.HasSuffix(out, "\n"), "one token on one line, for $(retentionctl token)")
		token := strings.TrimSuffix(out, "\n")
		require.NotContains(t, token, "\n")

		claims, err := verify(t, testSecret, token)
		require.NoError(t, err)
		require.Equal(t, "ORG1@AdobeOrg", claims.Org)
		require.Equal(t, "ops@example.com", claims.Subject)
		require.Equal(t, "datasets.read audit.read", claims.Scope)
		require.Equal(t, "ops-client", claims.ClientID)
		require.NotNil(t, claims.ExpiresAt)
		expires := claims.ExpiresAt.Time
		require.False(t, expires.Before(before.Add(time.Hour)) || expires.After(after.Add(time.Hour)),
			"-ttl 1h: expires at %s, not an hour after the command ran [%s, %s]", expires, before, after)

		// Only the configured secret verifies it: the dev secret must not.
		_, err = verify(t, config.DevSecret, token)
		require.Error(t, err)
	})

	t.Run("DefaultsToDevSecret", func(t *testing.T) {
		t.Parallel()
		out := mustCtl(t, map[string]string{}, "token", "-org", "ORG2@AdobeOrg")
		token := strings.TrimSpace(out)
		claims, err := verify(t, config.DevSecret, token)
		require.NoError(t, err)
		require.Equal(t, "ORG2@AdobeOrg", claims.Org)
		// The default scope lets a developer call every route.
		for _, scope := range []string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeAuditRead, catalog.ScopeRetentionRun} {
			require.Contains(t, strings.Fields(claims.Scope), scope)
		}
		_, err = verify(t, testSecret, token)
		require.Error(t, err)
	})

	t.Run("BadFlagIsUsage", func(t *testing.T) {
		t.Parallel()
		_, err := ctl(t, map[string]string{}, "token", "-ttl", "forever")
		require.ErrorIs(t, err, errUsage)
	})
}

// migrationLines checks the output of `migrate status` line by line against the embedded migrations and returns
// each version's state.
func migrationLines(t *testing.T, out string) map[int]string {
	t.Helper()
	all, err := postgres.Migrations()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(all), "one line per migration: %q", out)
	states := map[int]string{}
	for i, m := range all {
		fields := strings.Fields(lines[i])
		require.Len(t, fields, 2, "line %q", lines[i])
		require.Equal(t, fmt.Sprintf("%04d_%s", m.Version, m.Name), fields[0])
		states[m.Version] = fields[1]
	}
	return states
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("StatusUpDownUp", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": testdb.Empty(t)}
		all, err := postgres.Migrations()
		require.NoError(t, err)
		newest := all[len(all)-1].Version

		for version, state := range migrationLines(t, mustCtl(t, env, "migrate", "status")) {
			require.Equal(t, "pending", state, "migration %04d", version)
		}

		require.Equal(t, fmt.Sprintf("applied %d migration(s)\n", len(all)), mustCtl(t, env, "migrate", "up"))
		for version, state := range migrationLines(t, mustCtl(t, env, "migrate", "status")) {
			require.Equal(t, "applied", state, "migration %04d", version)
		}

		require.Equal(t, "reverted 1 migration(s)\n", mustCtl(t, env, "migrate", "down", "-steps", "1"))
		for version, state := range migrationLines(t, mustCtl(t, env, "migrate", "status")) {
			want := "applied"
			if version == newest {
				want = "pending"
			}
			require.Equal(t, want, state, "migration %04d", version)
		}

		require.Equal(t, "applied 1 migration(s)\n", mustCtl(t, env, "migrate", "up"))
		require.Equal(t, "applied 0 migration(s)\n", mustCtl(t, env, "migrate", "up"))
	})

	t.Run("NeedsDatabaseURL", func(t *testing.T) {
		t.Parallel()
		// A checkout where no `make run` runs: without DATABASE_URL there is no database to use.
		env := map[string]string{"RETENTION_CHECKOUT": t.TempDir()}
		for _, sub := range []string{"up", "down", "status"} {
			_, err := ctl(t, env, "migrate", sub)
			require.ErrorContains(t, err, "DATABASE_URL", sub)
			require.ErrorContains(t, err, "make run", sub)
			require.ErrorIs(t, err, pgcluster.ErrNoDevCluster, sub)
			require.NotErrorIs(t, err, errUsage, sub)
		}
	})

	t.Run("UsageErrors", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": testdb.New(t)}
		for _, args := range [][]string{{"migrate"}, {"migrate", "sideways"}, {"migrate", "down", "-steps", "many"}} {
			_, err := ctl(t, env, args...)
			require.ErrorIs(t, err, errUsage, "%v", args)
		}
	})
}

// policyRows parses the table `policy show` prints into min, max and default per key.
func policyRows(t *testing.T, out string) map[catalog.PolicyKey][3]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, []string{"STORE", "MANAGED", "BY", "BEHAVIOR", "MIN", "MAX", "DEFAULT"}, strings.Fields(lines[0]))
	rows := map[catalog.PolicyKey][3]string{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		require.Len(t, f, 6, "line %q", line)
		key := catalog.PolicyKey{Store: catalog.Store(f[0]), ManagedBy: catalog.ManagedBy(f[1]), Records: f[2] == "record"}
		rows[key] = [3]string{f[3], f[4], f[5]}
	}
	return rows
}

func limitsRow(l catalog.Limits) [3]string {
	maxValue := "null"
	if l.Max != nil {
		maxValue = l.Max.String()
	}
	defaultValue := "null"
	if d := l.DefaultTTL(); d != nil {
		defaultValue = d.String()
	}
	return [3]string{l.Min.String(), maxValue, defaultValue}
}

func builtinRows() map[catalog.PolicyKey][3]string {
	rows := map[catalog.PolicyKey][3]string{}
	for k, l := range catalog.BuiltinLimits {
		rows[k] = limitsRow(l)
	}
	return rows
}

// policyBundle is a migrated database, the CLI's environment for it and a service reading it directly.
type policyBundle struct {
	env      map[string]string
	policies *postgres.PolicyService
}

func setup(t *testing.T) *policyBundle {
	t.Helper()
	dbURL := testdb.New(t)
	db, err := postgres.Open(context.Background(), dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return &policyBundle{env: map[string]string{"DATABASE_URL": dbURL}, policies: postgres.NewPolicyService(db)}
}

func (b *policyBundle) requireBuiltin(t *testing.T, org string) {
	t.Helper()
	limits, err := b.policies.FindLimits(context.Background(), org)
	require.NoError(t, err)
	require.Equal(t, catalog.BuiltinLimits, limits)
}

func TestPolicy(t *testing.T) {
	t.Parallel()

	t.Run("SetThenShow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}
		want := builtinRows()
		want[key] = [3]string{"P60D", "null", "P6M"}

		out := mustCtl(t, b.env, "policy", "set", "-org", "O", "-store", "adobe_lakeHouse", "-managed-by", "CUSTOMER",
			"-min", "P60D", "-max", "null", "-default", "P6M")
		require.Equal(t, want, policyRows(t, out), "set prints the limits now in force")
		require.Equal(t, want, policyRows(t, mustCtl(t, b.env, "policy", "show", "-org", "O")))

		// The override is what the service enforces, not just what the CLI prints.
		limits, err := b.policies.FindLimits(context.Background(), "O")
		require.NoError(t, err)
		require.Equal(t, catalog.Limits{Min: mustPeriod(t, "P60D"), Max: nil, Default: mustPeriod(t, "P6M")}, limits[key])
		for k, l := range catalog.BuiltinLimits {
			if k != key {
				require.Equal(t, l, limits[k], "%v", k)
			}
		}

		// Overrides belong to one org.
		require.Equal(t, builtinRows(), policyRows(t, mustCtl(t, b.env, "policy", "show", "-org", "OTHER")))
		b.requireBuiltin(t, "OTHER")
	})

	t.Run("SetAgainReplaces", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		args := []string{"policy", "set", "-org", "O", "-store", "adobe_unifiedProfile", "-managed-by", "SYSTEM"}
		mustCtl(t, b.env, append(args, "-min", "P2D", "-max", "P60D", "-default", "P30D")...)
		out := mustCtl(t, b.env, append(args, "-min", "P7D", "-max", "P2M", "-default", "P1M")...)
		require.Equal(t, [3]string{"P7D", "P2M", "P1M"}, policyRows(t, out)[catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.System}])
	})

	t.Run("RecordPolicyDefaultsToNull", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out := mustCtl(t, b.env, "policy", "set", "-org", "O", "-behavior", "record", "-min", "P7D", "-max", "P5Y", "-default", "null")
		key := catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer, Records: true}
		require.Equal(t, [3]string{"P7D", "P5Y", "null"}, policyRows(t, out)[key])
		require.Equal(t, limitsRow(catalog.BuiltinLimits[catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}]),
			policyRows(t, out)[catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}], "the time-series row is apart")
		limits, err := b.policies.FindLimits(context.Background(), "O")
		require.NoError(t, err)
		require.Nil(t, limits[key].DefaultTTL())
	})

	t.Run("RefusesBadValues", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		base := map[string]string{"-store": "adobe_lakeHouse", "-managed-by": "CUSTOMER", "-behavior": "time-series", "-min": "P60D", "-max": "null", "-default": "P6M"}
		for _, tc := range []struct {
			name    string
			changes map[string]string
			want    []string // substrings of the error: the flag or field, and the rule
		}{
			{"MinFraction", map[string]string{"-min": "P1.5M"}, []string{"-min", `"P1.5M"`, "fractions"}},
			{"MaxFraction", map[string]string{"-max": "P1.5M"}, []string{"-max", "or null"}},
			{"DefaultMissing", map[string]string{"-default": ""}, []string{"-default", "must not be empty"}},
			{"DefaultBelowMin", map[string]string{"-default": "P30D"}, []string{"defaultValue P30D must not be below minValue P60D"}},
			{"DefaultAboveMax", map[string]string{"-max": "P3M"}, []string{"defaultValue P6M must not be above maxValue P3M"}},
			{"UnknownStore", map[string]string{"-store": "adobe_attic"}, []string{"-store", `"adobe_attic"`}},
			{"UnknownOwner", map[string]string{"-managed-by": "ME"}, []string{"-managed-by", `"ME"`}},
			{"UnknownBehavior", map[string]string{"-behavior": "ledger"}, []string{"-behavior", `"ledger"`}},
			{"NullDefaultForTimeSeries", map[string]string{"-default": "null"}, []string{"defaultValue", "only record datasets"}},
		} {
			args := []string{"policy", "set", "-org", "O"}
			for flag, value := range base {
				if v, ok := tc.changes[flag]; ok {
					value = v
				}
				args = append(args, flag, value)
			}
			out, err := ctl(t, b.env, args...)
			require.Error(t, err, tc.name)
			require.Empty(t, out, "%s: nothing is printed for a refused change", tc.name)
			for _, want := range tc.want {
				require.ErrorContains(t, err, want, tc.name)
			}
		}
		// Limits out of order are a field error of the policy itself, named for the API's field.
		_, err := ctl(t, b.env, "policy", "set", "-org", "O", "-min", "P60D", "-max", "null", "-default", "P30D")
		var ce *catalog.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Equal(t, "defaultValue", ce.Field)
		b.requireBuiltin(t, "O")
	})

	t.Run("NeedsOrg", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := ctl(t, b.env, "policy", "show")
		require.ErrorContains(t, err, "-org")
	})

	t.Run("UnknownSubcommandIsUsage", func(t *testing.T) {
		t.Parallel()
		_, err := ctl(t, map[string]string{}, "policy", "delete", "-org", "O")
		require.ErrorIs(t, err, errUsage)
	})
}

func mustPeriod(t *testing.T, s string) retention.Period {
	t.Helper()
	p, err := retention.ParsePeriod(s)
	require.NoError(t, err)
	return p
}

func TestCommands(t *testing.T) {
	t.Parallel()

	t.Run("UnknownIsUsage", func(t *testing.T) {
		t.Parallel()
		out, err := ctl(t, map[string]string{}, "frobnicate")
		require.ErrorIs(t, err, errUsage)
		require.Empty(t, out, "usage goes to stderr, leaving stdout for results")
	})

	t.Run("NoneIsUsage", func(t *testing.T) {
		t.Parallel()
		_, err := ctl(t, map[string]string{})
		require.ErrorIs(t, err, errUsage)
	})

	t.Run("Help", func(t *testing.T) {
		t.Parallel()
		out := mustCtl(t, map[string]string{}, "help")
		for _, cmd := range []string{"token", "migrate", "policy", "version"} {
			require.Contains(t, out, cmd)
		}
	})

	t.Run("Version", func(t *testing.T) {
		t.Parallel()
		out := mustCtl(t, map[string]string{}, "version")
		require.True(t, strings.HasPrefix(out, "retentionctl "+version+" "), "%q", out)
		require.Contains(t, out, "go1.")
	})
}
