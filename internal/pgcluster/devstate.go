package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The dev cluster of a checkout (`make run`) keeps two files in its state folder, the parent of its data folder
// (.data, or /var/tmp/retentiond-<hash>: see DevDataDir):
//
//   - database_url holds the URL of the dev database (mode 0600), so that retentionctl, run from a second shell
//     with DATABASE_URL unset, reaches the same database without being told its port (DevPort's, unless another
//     process held it at the start);
//   - retentiond.lock is locked (flock) by the process that owns the cluster for as long as it runs, and holds its
//     pid. The kernel releases the lock when that process ends, however it ends, so a cluster that runs while
//     nobody holds the lock was left behind by a crash (kill -9): the next StartDev takes it over and stops it
//     when it stops, and StopDev (`make stop`) stops it.
const (
	// URLFileName is the name of the file in the state folder that holds the dev database's URL.
	URLFileName  = "database_url"
	lockFileName = "retentiond.lock"
)

// ErrNoDevCluster is returned by DevURL when no dev cluster runs for the data folder.
var ErrNoDevCluster = errors.New("no dev cluster is running")

// Dev is a checkout's dev cluster as one process uses it: started or taken over by it, which then stops it in Stop,
// or used beside the live process that owns it, which is left to stop it.
type Dev struct {
	cluster  *Cluster
	url      string
	urlPath  string
	lock     *os.File // held while this process owns the cluster; nil when another one does
	ownerPID int      // the other owner's pid, when lock is nil (0 if unknown)
	tookOver bool
	log      *slog.Logger
	// usualPort is the checkout's port (DevPort).
	usualPort int
}

// The range of DevPort: below Linux's ephemeral ports (32768 and up), where the kernel hands out the ports of
// outgoing connections and of freePort, and above the well-known servers' (PostgreSQL's 5432 included).
const (
	devPortBase = 20000
	devPortSpan = 10000
)

// DevPort is the port of the dev cluster whose data folder is dataDir: a hash of the folder's path into
// [devPortBase, devPortBase+devPortSpan), so that each checkout's `make run` listens on the same port at every start
// and an exported DATABASE_URL keeps working, while two checkouts rarely want the same one. StartDev takes a free
// port instead when another process listens there.
func DevPort(dataDir string) int {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(dataDir))
	return devPortBase + int(h.Sum32()%devPortSpan)
}

// UsualPort reports whether the cluster listens on the checkout's port (DevPort): false when another process held
// it as the cluster started, or a cluster left running from before listens elsewhere.
func (d *Dev) UsualPort() bool { return d.cluster.port == d.usualPort }

// Port is the port the cluster listens on, and the checkout's usual one (DevPort).
func (d *Dev) Port() (now, usual int) { return d.cluster.port, d.usualPort }

// StartDev makes sure the dev cluster whose data folder is dataDir runs, creates database in it unless it exists,
// and writes the database's URL to the state folder. A cluster already running there is taken over when the
// process that started it is gone, and only used when that process still runs.
func StartDev(ctx context.Context, dataDir, database string, logger *slog.Logger) (*Dev, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("start dev postgres in %s: %w", dataDir, err)
	}
	state := filepath.Dir(dataDir)
	if err := os.MkdirAll(state, 0o755); err != nil { //nolint:gosec // the data folder's parent, which the postgres user must enter
		return nil, fmt.Errorf("start dev postgres: create %s: %w", state, err)
	}
	d := &Dev{urlPath: filepath.Join(state, URLFileName), log: logger}
	if d.lock, d.ownerPID, err = lockDev(state); err != nil {
		return nil, fmt.Errorf("start dev postgres in %s: %w", dataDir, err)
	}
	d.usualPort = DevPort(dataDir)
	if d.cluster, err = Start(ctx, Config{DataDir: dataDir, Logger: logger, PreferredPort: d.usualPort}); err != nil {
		d.unlock()
		return nil, err
	}
	switch {
	case d.lock != nil && !d.cluster.owned:
		// Running, and nobody holds the lock: its owner died without stopping it.
		d.cluster.owned, d.tookOver = true, true
		logger.Warn("took over postgres left running by a retentiond that is gone; it stops when this one does",
			"dir", d.cluster.dataDir, "port", d.cluster.port)
	case d.lock == nil && !d.cluster.owned:
		logger.Info("using postgres of another running retentiond, which stops it when it ends",
			"dir", d.cluster.dataDir, "port", d.cluster.port, "owner_pid", d.ownerPID)
	}
	if err := d.cluster.CreateDatabase(ctx, database); err != nil {
		return nil, errors.Join(err, d.Stop(context.WithoutCancel(ctx)))
	}
	d.url = d.cluster.URL(database)
	if err := writePrivateFile(d.urlPath, d.url+"\n"); err != nil {
		return nil, errors.Join(fmt.Errorf("record the dev database's URL: %w", err), d.Stop(context.WithoutCancel(ctx)))
	}
	return d, nil
}

// Cluster returns the running cluster.
func (d *Dev) Cluster() *Cluster { return d.cluster }

// URL returns the URL of the dev database.
func (d *Dev) URL() string { return d.url }

// URLFile returns the file that holds the URL, which retentionctl reads when DATABASE_URL is unset.
func (d *Dev) URLFile() string { return d.urlPath }

// Owned reports whether this process stops the cluster in Stop: it started it, or took it over.
func (d *Dev) Owned() bool { return d.cluster.owned }

// TookOver reports whether the cluster was found running with its owner gone, and taken over.
func (d *Dev) TookOver() bool { return d.tookOver }

// Stop stops the cluster and removes the URL file when this process owns it; otherwise it leaves both to the
// process that does. Safe to call more than once.
func (d *Dev) Stop(ctx context.Context) error {
	if !d.cluster.owned {
		d.log.Info("leaving postgres running for the retentiond that started it", "dir", d.cluster.dataDir, "owner_pid", d.ownerPID)
		d.unlock()
		return nil
	}
	err := d.cluster.Stop(ctx)
	if err == nil {
		if rerr := os.Remove(d.urlPath); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("remove %s: %w", d.urlPath, rerr)
		}
	}
	d.unlock()
	return err
}

func (d *Dev) unlock() {
	if d.lock != nil {
		_ = d.lock.Close() // closing the only descriptor of the open file releases the flock
		d.lock = nil
	}
}

// StopDev stops the dev cluster of the data folder when no live process owns it (one left behind by a crash), and
// removes its URL file. It reports whether a server was running. While its owner runs, it refuses: stopping
// PostgreSQL under a running retentiond would break it; Ctrl-C on that retentiond stops both.
func StopDev(ctx context.Context, dataDir string, logger *slog.Logger) (bool, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return false, fmt.Errorf("stop dev postgres in %s: %w", dataDir, err)
	}
	state := filepath.Dir(dataDir)
	if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	lock, owner, err := lockDev(state)
	if err != nil {
		return false, fmt.Errorf("stop dev postgres in %s: %w", dataDir, err)
	}
	if lock == nil {
		return false, fmt.Errorf("retentiond (pid %d) is running with the PostgreSQL in %s: stop it (Ctrl-C, or kill %d), and it stops PostgreSQL as it ends",
			owner, dataDir, owner)
	}
	defer lock.Close()
	urlPath := filepath.Join(state, URLFileName)
	pf, running := runningPID(dataDir)
	if !running {
		_ = os.Remove(urlPath) // a URL file left by a crash names a server that is gone
		return false, nil
	}
	c, _, err := newCluster(ctx, "", dataDir, logger)
	if err != nil {
		return false, fmt.Errorf("stop dev postgres in %s: %w", dataDir, err)
	}
	c.port, c.owned = pf.port, true
	if err := c.Stop(ctx); err != nil {
		return true, err
	}
	if err := os.Remove(urlPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, fmt.Errorf("remove %s: %w", urlPath, err)
	}
	return true, nil
}

// DevURL returns the URL of the dev database of the data folder, and the file it was read from. It returns an error
// wrapping ErrNoDevCluster when there is no URL file or no server running there.
func DevURL(dataDir string) (string, string, error) {
	path := filepath.Join(filepath.Dir(dataDir), URLFileName)
	raw, err := os.ReadFile(path) //nolint:gosec // the dev cluster's own state file
	if errors.Is(err, fs.ErrNotExist) {
		return "", path, fmt.Errorf("%w for this checkout: %s does not exist (`make run` writes it)", ErrNoDevCluster, path)
	}
	if err != nil {
		return "", path, fmt.Errorf("read the dev database's URL: %w", err)
	}
	if _, running := runningPID(dataDir); !running {
		return "", path, fmt.Errorf("%w in %s (%s is left from an earlier run; `make run` starts it again)", ErrNoDevCluster, dataDir, path)
	}
	url := strings.TrimSpace(string(raw))
	if url == "" {
		return "", path, fmt.Errorf("%s is empty", path)
	}
	return url, path, nil
}

// lockDev takes the state folder's owner lock without waiting and writes this process's pid into it. When another
// live process holds it, it returns a nil file and that process's pid, as it wrote it.
func lockDev(state string) (*os.File, int, error) {
	path := filepath.Join(state, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // the dev cluster's own lock file
	if err != nil {
		return nil, 0, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a descriptor fits in int
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			raw, _ := os.ReadFile(path) //nolint:gosec // as above
			pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
			return nil, pid, nil
		}
		return nil, 0, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("truncate %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("write %s: %w", path, err)
	}
	return f, 0, nil
}

// writePrivateFile replaces path with content, readable by its owner only, through a rename so that a reader never
// sees half of it.
func writePrivateFile(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.WriteString(content); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path) //nolint:gosec // G703: path is the dev cluster's own state file
}

// DevCheckout returns the checkout that holds dir: the nearest folder at or above it with a go.mod, so that
// retentiond --dev and retentionctl find the same dev cluster from anywhere in the checkout; dir itself when none
// has one.
func DevCheckout(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for d := abs; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			return d
		}
		if d == filepath.Dir(d) {
			return abs
		}
	}
}
