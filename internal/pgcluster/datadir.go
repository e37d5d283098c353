package pgcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// prepareDataDir creates the data folder and, when running as root, makes it
// the postgres user's and makes sure that user can reach it. It opens a
// parent folder to that user (search permission only, o+x) just when Start
// created that folder or it lies inside the temporary folder, such as
// t.TempDir()'s 0700 folders; it will not loosen a folder such as /root,
// and says so instead. It returns the folder with symbolic links resolved.
func prepareDataDir(dir string, pg *account, logger *slog.Logger) (string, error) {
	parent := filepath.Dir(dir)
	var created []string
	for _, d := range ancestors(parent) {
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			created = append(created, d)
		}
	}
	// Check the way in before creating anything, so that a refusal
	// leaves no folder behind; then again on the real path, opening
	// what may be opened.
	if pg != nil {
		if err := pg.openWay(parent, created, false, logger); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(parent, 0o755); err != nil { //nolint:gosec // parents must be enterable by the postgres user
		return "", fmt.Errorf("create data folder's parent: %w", err)
	}
	realParent, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return "", fmt.Errorf("resolve data folder's parent: %w", err)
	}
	dir = filepath.Join(realParent, filepath.Base(dir))
	if pg != nil {
		if err := pg.openWay(realParent, created, true, logger); err != nil {
			return "", err
		}
	}

	fresh := false
	switch st, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", fmt.Errorf("create data folder: %w", err)
		}
		fresh = true
	case err != nil:
		return "", fmt.Errorf("inspect data folder: %w", err)
	case !st.IsDir():
		return "", fmt.Errorf("data folder %s is not a folder (%v)", dir, st.Mode())
	default:
		if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
			entries, err := os.ReadDir(dir)
			if err != nil {
				return "", fmt.Errorf("read data folder: %w", err)
			}
			if len(entries) > 0 {
				return "", fmt.Errorf("data folder %s is neither empty nor a PostgreSQL cluster (no PG_VERSION); remove it or pick another", dir)
			}
			fresh = true
		}
	}

	if pg == nil {
		if fresh {
			// postgres insists on 0700 (or 0750) for its data folder.
			if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // a folder, which needs x to be entered
				return "", fmt.Errorf("chmod data folder: %w", err)
			}
		}
		return dir, nil
	}

	if fresh {
		// Lchown: the folder was just checked not to be a symlink, and
		// must not be made into a way to hand another file to postgres.
		if err := os.Lchown(dir, pg.uid, pg.gid); err != nil {
			return "", fmt.Errorf("give data folder to OS user %s: %w", pg.name, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // as above
			return "", fmt.Errorf("chmod data folder: %w", err)
		}
	} else if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != pg.uid {
			return "", fmt.Errorf("data folder %s holds a cluster owned by uid %d, but as root this runs PostgreSQL as OS user %s (uid %d); chown -R it or pick another folder",
				dir, sys.Uid, pg.name, pg.uid)
		}
	}

	return dir, nil
}

// openWay makes sure a can enter every existing folder on the way to (and
// including) path. A closed folder is opened (o+x, search only) when Start
// created it or it lies inside the temporary folder; any other, such as
// /root, is left alone and reported. With fix false it only checks.
func (a *account) openWay(path string, created []string, fix bool, logger *slog.Logger) error {
	tmp := os.TempDir()
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real
	}
	for _, d := range ancestors(path) {
		st, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && !fix {
			continue // created later, with a mode that lets a in
		}
		if err != nil {
			return fmt.Errorf("inspect %s: %w", d, err)
		}
		if a.canEnter(st) {
			continue
		}
		insideTmp := strings.HasPrefix(d, tmp+string(filepath.Separator))
		if !insideTmp && !slices.Contains(created, d) {
			return fmt.Errorf("OS user %s, which runs PostgreSQL when you are root, cannot enter %s (mode %04o); pick a data folder it can reach (make run uses /var/tmp for such checkouts)",
				a.name, d, st.Mode().Perm())
		}
		if !fix {
			continue
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
			return fmt.Errorf("let OS user %s enter %s: %w", a.name, d, err)
		}
		logger.Debug("opened folder to postgres user (o+x)", "dir", d)
	}
	return nil
}

// DevDataDir returns where `make run` keeps its cluster for the checkout at
// dir, and a sentence explaining the choice for printing.
//
// The cluster lives in checkout/.data/postgres when the server's OS user
// can get there: always when not running as root, and as root when the
// postgres user can enter every folder of the checkout's path. A checkout
// under /root (as in CI) is closed to that user, and opening /root up is
// not ours to do, so the cluster then lives in
// /var/tmp/retentiond-<hash>/postgres, named after a hash of the checkout's
// absolute path so each checkout keeps its own data across runs and
// reboots (/var/tmp, unlike /tmp, is not emptied at boot).
func DevDataDir(checkout string) (string, string, error) {
	abs, err := filepath.Abs(checkout)
	if err != nil {
		return "", "", fmt.Errorf("dev data folder for %s: %w", checkout, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	local := filepath.Join(abs, ".data", "postgres")
	if os.Geteuid() != 0 {
		return local, fmt.Sprintf("PostgreSQL data for this checkout is in %s.", local), nil
	}
	pg, err := lookupAccount(osUser)
	if err != nil {
		return "", "", fmt.Errorf("dev data folder for %s: running as root, so PostgreSQL must run as the %q OS user: %w", abs, osUser, err)
	}
	blocked, st := pg.firstBlocked(local)
	if blocked == "" {
		return local, fmt.Sprintf("PostgreSQL data for this checkout is in %s (run by OS user %s, which can reach it).", local, pg.name), nil
	}
	sum := sha256.Sum256([]byte(abs))
	base := filepath.Join("/var/tmp", "retentiond-"+hex.EncodeToString(sum[:])[:12])
	// /var/tmp is writable by everyone: refuse a folder someone else made
	// there, or a symlink, rather than hand its target to postgres.
	if lst, err := os.Lstat(base); err == nil {
		sys, ok := lst.Sys().(*syscall.Stat_t)
		if !lst.IsDir() || (ok && sys.Uid != 0) {
			return "", "", fmt.Errorf("dev data folder for %s: %s exists but is not a folder owned by root; remove it", abs, base)
		}
	}
	dir := filepath.Join(base, "postgres")
	why := fmt.Sprintf("PostgreSQL data for this checkout is in %s: as root, the server runs as OS user %s, which cannot enter %s (mode %04o), so %s would be out of its reach. Delete that folder to start afresh.",
		dir, pg.name, blocked, st.Mode().Perm(), local)
	return dir, why, nil
}
