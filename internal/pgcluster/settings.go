package pgcluster

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

func checkSettings(settings map[string]string) error {
	for name := range settings {
		if !settingName.MatchString(name) {
			return fmt.Errorf("start postgres: bad setting name %q", name)
		}
		switch strings.ToLower(name) {
		case "port", "listen_addresses", "unix_socket_directories":
			return fmt.Errorf("start postgres: setting %q is managed by pgcluster (use Config.Port)", name)
		}
	}
	return nil
}

// serverOptions builds pg_ctl's -o string. pg_ctl hands it to /bin/sh, so
// every value is single-quoted. No Unix socket is made: the default folder
// (/var/run/postgresql on Debian) may not exist or may be the system
// cluster's, and TCP on loopback is all the project needs.
func (c *Cluster) serverOptions(port int, settings map[string]string) string {
	opts := []string{
		"-c listen_addresses=127.0.0.1",
		"-c port=" + strconv.Itoa(port),
		"-c unix_socket_directories=''",
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		opts = append(opts, "-c "+shellQuote(name+"="+settings[name]))
	}
	return strings.Join(opts, " ")
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
