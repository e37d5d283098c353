package pgcluster

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// osUser is the OS account that runs the server when this process is root,
// because postgres refuses to run as root.
const osUser = "postgres"

// account is an OS user with the groups that decide what it may enter.
type account struct {
	name string
	uid  int
	gid  int
	gids []int
}

func lookupAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up OS user: %w", err)
	}
	a := &account{name: name}
	if a.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("OS user %s: uid %q: %w", name, u.Uid, err)
	}
	if a.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("OS user %s: gid %q: %w", name, u.Gid, err)
	}
	a.gids = []int{a.gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && !slices.Contains(a.gids, g) {
				a.gids = append(a.gids, g)
			}
		}
	}
	return a, nil
}

func (a *account) credential() *syscall.Credential {
	groups := make([]uint32, len(a.gids))
	for i, g := range a.gids {
		groups[i] = uint32(g) //nolint:gosec // gids come from the system's user database and fit in uint32
	}
	return &syscall.Credential{
		Uid:    uint32(a.uid), //nolint:gosec // as above
		Gid:    uint32(a.gid), //nolint:gosec // as above
		Groups: groups,
	}
}

// canEnter reports whether a may pass through the folder described by st,
// from its mode bits (ACLs are not consulted).
func (a *account) canEnter(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := st.Mode().Perm()
	switch {
	case int(sys.Uid) == a.uid:
		return mode&0o100 != 0
	case slices.Contains(a.gids, int(sys.Gid)):
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

// firstBlocked returns the first existing folder on the way to path that a
// cannot enter, or "" when every existing one lets it through.
func (a *account) firstBlocked(path string) (string, fs.FileInfo) {
	for _, dir := range ancestors(path) {
		st, err := os.Stat(dir)
		if err != nil {
			continue // not there yet: whoever creates it sets its mode
		}
		if !a.canEnter(st) {
			return dir, st
		}
	}
	return "", nil
}

// ancestors lists path's folders from the root down, path included.
func ancestors(path string) []string {
	var dirs []string
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		dirs = append(dirs, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	slices.Reverse(dirs)
	return dirs
}
