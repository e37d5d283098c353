package config_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/config"
	"github.com/acme/retention/jobs"
)

const (
	dbPassword = "s3cr3t-db-pa55word"
	testSecret = "test-secret-of-at-least-thirty-two-bytes!"
)

// validEnv is the smallest environment a production process starts with; each test changes one thing in a copy.
func validEnv() map[string]string {
	return map[string]string{
		"DATABASE_URL":      "postgres://retention:" + dbPassword + "@db.internal:5432/retention?sslmode=require",
		"AUTH_HS256_SECRET": testSecret,
	}
}

// getenv reads the map as os.Getenv reads the environment: a missing variable is "".
func getenv(env map[string]string) config.Getenv {
	return func(name string) string { return env[name] }
}

// with returns a copy of env with the given variables set; an empty value unsets one.
func with(env map[string]string, changes map[string]string) map[string]string {
	out := maps.Clone(env)
	for k, v := range changes {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// errorLines splits a joined error into its messages, one per broken rule.
func errorLines(err error) []string {
	return strings.Split(err.Error(), "\n")
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	env := validEnv()
	cfg, err := config.Load(getenv(env), false)
	require.NoError(t, err)
	require.Equal(t, env["DATABASE_URL"], cfg.DatabaseURL)
	require.Equal(t, testSecret, cfg.AuthHS256Secret)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Equal(t, slog.LevelInfo, cfg.LogLevel)
	require.True(t, cfg.API)
	require.True(t, cfg.Scheduler)
	require.Equal(t, 30*time.Second, cfg.ShutdownTimeout)
	require.Equal(t, 2, cfg.SweepWorkers)
	require.Equal(t, 25, cfg.SweepBusyShare)
	require.Empty(t, cfg.AuthJWKSURL)
	require.False(t, cfg.Dev)
	require.Equal(t, config.DefaultLakeSchedule, cfg.LakeSchedule)
	require.Equal(t, config.DefaultProfileSchedule, cfg.ProfileSchedule)
	require.Equal(t, 30*time.Second, cfg.HTTPReadTimeout)
	require.Equal(t, 30*time.Second, cfg.HTTPWriteTimeout)
	require.Equal(t, 4, cfg.LongRequestsPerOrg)
}

// TestDefaultSchedulesParseAsJobsParsesThem holds config's check of a cron expression and the scheduler's parser
// together: a default that config accepts is one that the scheduler runs.
func TestDefaultSchedulesParseAsJobsParsesThem(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{config.DefaultLakeSchedule, config.DefaultProfileSchedule, "@daily"} {
		_, err := jobs.ParseSchedule(spec)
		require.NoError(t, err, spec)
		cfg, err := config.Load(getenv(with(validEnv(), map[string]string{"RETENTION_SCHEDULE": spec})), false)
		require.NoError(t, err, spec)
		require.Equal(t, spec, cfg.LakeSchedule)
	}
	_, err := jobs.ParseSchedule("every sunday")
	require.Error(t, err)
	_, err = config.Load(getenv(with(validEnv(), map[string]string{"RETENTION_SCHEDULE": "every sunday"})), false)
	require.ErrorContains(t, err, "RETENTION_SCHEDULE")
}

func TestLoadReadsEveryVariable(t *testing.T) {
	t.Parallel()
	env := with(validEnv(), map[string]string{
		"HTTP_ADDR":                  "0.0.0.0:9090",
		"AUTH_JWKS_URL":              "https://idp.example.com/.well-known/jwks.json",
		"LOG_LEVEL":                  "debug",
		"RETENTIOND_API":             "false",
		"RETENTIOND_SCHEDULER":       "true",
		"SHUTDOWN_TIMEOUT":           "5s",
		"RETENTION_SWEEP_WORKERS":    "1",
		"RETENTION_SWEEP_BUSY_SHARE": "100",
	})
	cfg, err := config.Load(getenv(env), false)
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9090", cfg.HTTPAddr)
	require.Equal(t, env["AUTH_JWKS_URL"], cfg.AuthJWKSURL)
	require.Equal(t, slog.LevelDebug, cfg.LogLevel)
	require.False(t, cfg.API)
	require.True(t, cfg.Scheduler)
	require.Equal(t, 5*time.Second, cfg.ShutdownTimeout)
	require.Equal(t, 1, cfg.SweepWorkers)
	require.Equal(t, 100, cfg.SweepBusyShare)

	// A JWKS endpoint alone is enough to verify tokens.
	jwksOnly := with(env, map[string]string{"AUTH_HS256_SECRET": ""})
	cfg, err = config.Load(getenv(jwksOnly), false)
	require.NoError(t, err)
	require.Empty(t, cfg.AuthHS256Secret)
}

func TestLoadReadsDemoOrgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"UnsetMeansAll", "", nil},
		{"NoneMeansNone", "none", []string{}},
		{"CommaSeparated", "A@AdobeOrg, B@AdobeOrg", []string{"A@AdobeOrg", "B@AdobeOrg"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(getenv(with(validEnv(), map[string]string{"RETENTION_DEMO_ORGS": tc.value})), true)
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.DemoOrgs)
		})
	}
}

func TestLoadRefusesBadValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		changes map[string]string
		// want are substrings of the one error: the variable's name, the rule and, where there is one, the value.
		want []string
	}{
		{"DatabaseURLMissing", map[string]string{"DATABASE_URL": ""}, []string{"DATABASE_URL", "is required", "--dev"}},
		{"DatabaseURLNotPostgres", map[string]string{"DATABASE_URL": "mysql://u:p@db/retention"}, []string{"DATABASE_URL", "postgres://"}},
		{"HTTPAddrWithoutPort", map[string]string{"HTTP_ADDR": "localhost"}, []string{"HTTP_ADDR", "host:port", `"localhost"`}},
		{"HTTPAddrEmptyPort", map[string]string{"HTTP_ADDR": "127.0.0.1:"}, []string{"HTTP_ADDR", "host:port", `"127.0.0.1:"`}},
		{"PprofAddrWithoutPort", map[string]string{"PPROF_ADDR": "localhost"}, []string{"PPROF_ADDR", "host:port", `"localhost"`}},
		{"SecretTooShort", map[string]string{"AUTH_HS256_SECRET": strings.Repeat("x", 31)}, []string{"AUTH_HS256_SECRET", "at least 32 bytes"}},
		{"NeitherSecretNorJWKS", map[string]string{"AUTH_HS256_SECRET": ""}, []string{"AUTH_HS256_SECRET or AUTH_JWKS_URL", "required"}},
		{"DevSecretOutsideDev", map[string]string{"AUTH_HS256_SECRET": config.DevSecret}, []string{"AUTH_HS256_SECRET", "development secret", "--dev"}},
		{"JWKSNotHTTP", map[string]string{"AUTH_JWKS_URL": "ftp://idp.example.com/jwks"}, []string{"AUTH_JWKS_URL", "http://"}},
		{"LogLevelLoud", map[string]string{"LOG_LEVEL": "loud"}, []string{"LOG_LEVEL", "debug, info, warn or error", `"loud"`}},
		{"APIMaybe", map[string]string{"RETENTIOND_API": "maybe"}, []string{"RETENTIOND_API", "true or false", `"maybe"`}},
		{"SchedulerMaybe", map[string]string{"RETENTIOND_SCHEDULER": "maybe"}, []string{"RETENTIOND_SCHEDULER", "true or false", `"maybe"`}},
		{"BothRolesOff", map[string]string{"RETENTIOND_API": "false", "RETENTIOND_SCHEDULER": "false"}, []string{"RETENTIOND_API and RETENTIOND_SCHEDULER", "both false"}},
		{"ShutdownTimeoutNegative", map[string]string{"SHUTDOWN_TIMEOUT": "-1s"}, []string{"SHUTDOWN_TIMEOUT", "positive", `"-1s"`}},
		{"ShutdownTimeoutZero", map[string]string{"SHUTDOWN_TIMEOUT": "0s"}, []string{"SHUTDOWN_TIMEOUT", "positive", `"0s"`}},
		{"ShutdownTimeoutNoUnit", map[string]string{"SHUTDOWN_TIMEOUT": "30"}, []string{"SHUTDOWN_TIMEOUT", "Go duration", `"30"`}},
		{"SweepWorkersZero", map[string]string{"RETENTION_SWEEP_WORKERS": "0"}, []string{"RETENTION_SWEEP_WORKERS", "whole number from 1 to 16", `"0"`}},
		{"SweepBusyShareOver100", map[string]string{"RETENTION_SWEEP_BUSY_SHARE": "101"}, []string{"RETENTION_SWEEP_BUSY_SHARE", "whole number from 1 to 100", `"101"`}},
		{"SweepBusyShareZero", map[string]string{"RETENTION_SWEEP_BUSY_SHARE": "0"}, []string{"RETENTION_SWEEP_BUSY_SHARE", "whole number from 1 to 100", `"0"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(getenv(with(validEnv(), tc.changes)), false)
			require.Error(t, err)
			require.Nil(t, cfg, "a configuration that failed validation must not be usable")
			// Exactly one message: a single bad value must not drag spurious complaints along.
			require.Len(t, errorLines(err), 1, "error: %v", err)
			for _, want := range tc.want {
				require.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestLoadReportsEveryBadValueTogether(t *testing.T) {
	t.Parallel()
	env := with(validEnv(), map[string]string{
		"DATABASE_URL":     "mysql://db/retention",
		"HTTP_ADDR":        "nonsense",
		"LOG_LEVEL":        "loud",
		"RETENTIOND_API":   "maybe",
		"SHUTDOWN_TIMEOUT": "-1s",
	})
	cfg, err := config.Load(getenv(env), false)
	require.Error(t, err)
	require.Nil(t, cfg)
	lines := errorLines(err)
	// One message per bad variable, so an operator fixes them all in one go.
	require.Len(t, lines, 5, "error: %v", err)
	for _, name := range []string{"DATABASE_URL", "HTTP_ADDR", "LOG_LEVEL", "RETENTIOND_API", "SHUTDOWN_TIMEOUT"} {
		found := 0
		for _, line := range lines {
			if strings.HasPrefix(line, name) {
				found++
			}
		}
		require.Equal(t, 1, found, "%s in %q", name, lines)
	}
}

func TestLoadDev(t *testing.T) {
	t.Parallel()

	t.Run("NoDatabaseNoSecret", func(t *testing.T) {
		t.Parallel()
		cfg, err := config.Load(getenv(map[string]string{}), true)
		require.NoError(t, err)
		require.True(t, cfg.Dev)
		require.Empty(t, cfg.DatabaseURL, "the caller starts a private cluster when DATABASE_URL is empty")
		require.Equal(t, config.DevSecret, cfg.AuthHS256Secret)
	})

	t.Run("KeepsGivenSecret", func(t *testing.T) {
		t.Parallel()
		cfg, err := config.Load(getenv(map[string]string{"AUTH_HS256_SECRET": testSecret}), true)
		require.NoError(t, err)
		require.Equal(t, testSecret, cfg.AuthHS256Secret)
	})

	t.Run("StillChecksOtherValues", func(t *testing.T) {
		t.Parallel()
		// --dev relaxes the database and the secret only; it is no licence for a broken address.
		_, err := config.Load(getenv(map[string]string{"HTTP_ADDR": "nonsense"}), true)
		require.ErrorContains(t, err, "HTTP_ADDR")
		require.Len(t, errorLines(err), 1, "error: %v", err)
	})
}

func TestConfigJSONHidesSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		env    map[string]string
		dev    bool
		secret string
	}{
		{"Production", validEnv(), false, testSecret},
		{"Dev", map[string]string{"DATABASE_URL": validEnv()["DATABASE_URL"]}, true, config.DevSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(getenv(tc.env), tc.dev)
			require.NoError(t, err)
			require.Equal(t, tc.secret, cfg.AuthHS256Secret, "the secret is loaded, so hiding it below means something")

			raw, err := json.Marshal(cfg)
			require.NoError(t, err)
			require.Contains(t, string(raw), `"http_addr":"127.0.0.1:8080"`, "the struct was marshalled at all")
			require.NotContains(t, string(raw), dbPassword)
			require.NotContains(t, string(raw), tc.secret)

			// retentiond logs the config through slog's JSON handler, which must hide the same fields.
			var logged bytes.Buffer
			slog.New(slog.NewJSONHandler(&logged, nil)).Info("starting", slog.Any("config", cfg))
			require.Contains(t, logged.String(), "http_addr")
			require.NotContains(t, logged.String(), dbPassword)
			require.NotContains(t, logged.String(), tc.secret)
			require.Contains(t, logged.String(), `"retention_ingestion_grace":"P30D"`, "periods as written")
			require.Contains(t, logged.String(), `"log_level":"INFO"`)
		})
	}
}

// The logged config's durations are durations, for the logger to write as it writes every one (retentiond:
// milliseconds), not the nanoseconds of its JSON.
func TestConfigLogsDurations(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(getenv(validEnv()), false)
	require.NoError(t, err)
	var kinds = map[string]slog.Kind{}
	for _, a := range cfg.LogValue().Group() {
		kinds[a.Key] = a.Value.Kind()
	}
	for _, name := range []string{"shutdown_timeout", "retention_job_timeout", "retention_rescue_after"} {
		require.Equal(t, slog.KindDuration, kinds[name], name)
	}
	require.NotContains(t, kinds, "auth_jwks_url", "empty omitempty fields are left out, as in the JSON")
}
