package pgcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// pidFile is what postmaster.pid says: line 1 the postmaster's pid, line 4
// its port.
type pidFile struct {
	pid  int
	port int
}

// runningPID reads dir/postmaster.pid and reports whether its postmaster is
// alive. A file left by a killed server is stale: either its pid is gone,
// or (after a reboot) it now belongs to an unrelated program, which is
// checked through /proc so that such a file does not block a start.
func runningPID(dir string) (pidFile, bool) {
	path := filepath.Join(dir, "postmaster.pid")
	f, err := os.Open(path) //nolint:gosec // the cluster's own lock file
	if err != nil {
		return pidFile{}, false
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < 4 {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	var pf pidFile
	if len(lines) > 0 {
		pf.pid, _ = strconv.Atoi(lines[0])
	}
	if len(lines) > 3 {
		pf.port, _ = strconv.Atoi(lines[3])
	}
	if pf.pid <= 0 {
		return pf, false
	}
	if err := syscall.Kill(pf.pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return pf, false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pf.pid)); err == nil {
		// A killed postmaster whose parent does not reap it (PID 1 in
		// some containers) lingers as a zombie that kill(pid, 0) still
		// finds; the state letter follows the ")" closing its name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
			if state := stat[i+2]; state == 'Z' || state == 'X' {
				return pf, false
			}
		}
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pf.pid)); err == nil {
		name := strings.TrimSpace(string(comm))
		if name != "postgres" && name != "postmaster" {
			// postgres would refuse to start over this file ("lock
			// file already exists"), so move it out of the way.
			_ = os.Rename(path, path+".stale")
			return pf, false
		}
	}
	return pf, true
}
