package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/internal/pgcluster"
)

// pgServer is the Postgres server the harness works on: a private cluster it started, or a server it was given.
// Every database the harness creates carries its prefix and is dropped by close.
type pgServer struct {
	cluster  *pgcluster.Cluster // nil for a given server
	adminURL string             // a database to connect to for CREATE DATABASE
	prefix   string
	created  []string
	binDir   string // where pgbench of the server's version is, if known
	version  int    // server_version_num
}

// startServer starts a private cluster in dir with the settings, or adopts the server at givenURL.
func startServer(ctx context.Context, givenURL, dir string, settings map[string]string) (*pgServer, error) {
	s := &pgServer{prefix: "rb_" + randomHex(4) + "_"}
	if givenURL != "" {
		s.adminURL = givenURL
	} else {
		c, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: dir, Settings: settings})
		if err != nil {
			return nil, err
		}
		s.cluster, s.binDir, s.adminURL = c, c.BinDir(), c.URL("postgres")
	}
	conn, err := s.connectURL(ctx, s.adminURL)
	if err != nil {
		_ = s.close(ctx)
		return nil, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&s.version); err != nil {
		_ = s.close(ctx)
		return nil, err
	}
	return s, nil
}

// url returns the URL of the harness database name (without its prefix).
func (s *pgServer) url(name string) string {
	u, err := url.Parse(s.adminURL)
	if err != nil {
		return s.adminURL
	}
	u.Path = "/" + s.prefix + name
	return u.String()
}

func (s *pgServer) dbName(name string) string { return s.prefix + name }

// connectURL opens one connection whose session runs in UTC, as the service's do, so that timestamps print alike.
func (s *pgServer) connectURL(ctx context.Context, u string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["timezone"] = "UTC"
	cfg.RuntimeParams["application_name"] = "retentionbench"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(u), err)
	}
	return conn, nil
}

func (s *pgServer) connect(ctx context.Context, name string) (*pgx.Conn, error) {
	return s.connectURL(ctx, s.url(name))
}

// admin runs one statement on the admin database.
func (s *pgServer) admin(ctx context.Context, sql string) error {
	conn, err := s.connectURL(ctx, s.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// createDatabase creates an empty harness database.
func (s *pgServer) createDatabase(ctx context.Context, name string) error {
	if err := s.admin(ctx, `CREATE DATABASE `+pgx.Identifier{s.dbName(name)}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", s.dbName(name), err)
	}
	s.created = append(s.created, s.dbName(name))
	return nil
}

// cloneDatabase copies a harness database file by file. Nobody may be connected to the source.
func (s *pgServer) cloneDatabase(ctx context.Context, from, to string) error {
	sql := fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, pgx.Identifier{s.dbName(to)}.Sanitize(), pgx.Identifier{s.dbName(from)}.Sanitize())
	if s.version >= 150000 {
		// The default WAL_LOG strategy would write the whole copy to the WAL.
		sql += ` STRATEGY FILE_COPY`
	}
	if err := s.admin(ctx, sql); err != nil {
		return fmt.Errorf("clone database %s into %s: %w", from, to, err)
	}
	s.created = append(s.created, s.dbName(to))
	return nil
}

// replaceDatabase drops the harness database name and renames its copy in its place. Nobody may be connected to
// either.
func (s *pgServer) replaceDatabase(ctx context.Context, name, copied string) error {
	if err := s.dropDatabase(ctx, name); err != nil {
		return err
	}
	if err := s.admin(ctx, `ALTER DATABASE `+pgx.Identifier{s.dbName(copied)}.Sanitize()+` RENAME TO `+pgx.Identifier{s.dbName(name)}.Sanitize()); err != nil {
		return fmt.Errorf("rename database %s to %s: %w", s.dbName(copied), s.dbName(name), err)
	}
	for i, n := range s.created {
		if n == s.dbName(copied) {
			s.created[i] = s.dbName(name)
		}
	}
	return nil
}

// dropDatabase drops a harness database, whoever is connected to it.
func (s *pgServer) dropDatabase(ctx context.Context, name string) error {
	err := s.admin(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{s.dbName(name)}.Sanitize()+` WITH (FORCE)`)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", s.dbName(name), err)
	}
	for i, n := range s.created {
		if n == s.dbName(name) {
			s.created = append(s.created[:i], s.created[i+1:]...)
			break
		}
	}
	return nil
}

// checkpoint flushes dirty buffers, so that a measured step does not pay for the writes of the one before.
func (s *pgServer) checkpoint(ctx context.Context) error {
	return s.admin(ctx, `CHECKPOINT`)
}

// close drops the harness databases and stops a private cluster.
func (s *pgServer) close(ctx context.Context) error {
	var errs []error
	if s.cluster == nil {
		for _, name := range s.created {
			if err := s.admin(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
				errs = append(errs, err)
			}
		}
		s.created = nil
		return errors.Join(errs...)
	}
	return s.cluster.Stop(ctx)
}

// settingsFacts reads the settings that decide the figures from the server itself.
func (s *pgServer) settingsFacts(ctx context.Context) ([]string, error) {
	conn, err := s.connectURL(ctx, s.adminURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return nil, err
	}
	names := []string{"shared_buffers", "max_wal_size", "checkpoint_timeout", "fsync", "synchronous_commit", "full_page_writes",
		"wal_level", "max_connections", "work_mem", "maintenance_work_mem", "effective_cache_size", "random_page_cost", "jit"}
	var parts []string
	for _, n := range names {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, n).Scan(&v); err != nil {
			return nil, err
		}
		parts = append(parts, n+"="+v)
	}
	where := "a private cluster started by the harness (internal/pgcluster), TCP on 127.0.0.1"
	if s.cluster == nil {
		where = "a given server (-database-url)"
	}
	if i := strings.Index(version, ","); i > 0 {
		version = version[:i]
	}
	return []string{
		"Postgres: " + version + ", " + where,
		"Postgres settings: " + strings.Join(parts, ", ") + "; everything else at its default",
	}, nil
}

// pgbenchPath finds pgbench of the server's version, or any on PATH.
func (s *pgServer) pgbenchPath() (string, error) {
	if s.binDir != "" {
		p := filepath.Join(s.binDir, "pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("pgbench")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a database URL)"
	}
	return p.Redacted()
}

// quoteList renders ids as a SQL array literal of text; the ids are dataset ids (24 hex digits), checked here.
func quoteList(ids []string) string {
	quoted := make([]string, len(ids))
	for i, id := range ids {
		for _, r := range id {
			if !strings.ContainsRune("0123456789abcdef", r) {
				panic(fmt.Sprintf("not a dataset id: %q", id))
			}
		}
		quoted[i] = "'" + id + "'"
	}
	return "ARRAY[" + strings.Join(quoted, ",") + "]::text[]"
}

// timed runs fn and returns how long it took.
func timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}
