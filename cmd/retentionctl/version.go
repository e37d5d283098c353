package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and revision are stamped at build time by the Makefile and the Dockerfile, with
// -ldflags "-X main.version=… -X main.revision=…"; a build without them shows "dev" and the VCS stamp Go recorded,
// if any.
var (
	version  = "dev"
	revision = ""
)

func runVersion(out io.Writer) error {
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(out, versionLine(version, revision, info))
	return nil
}

// versionLine is what `retentionctl version` prints: the stamped revision, else the one Go recorded from the VCS,
// else "unknown".
func versionLine(version, revision string, info *debug.BuildInfo) string {
	if revision == "" && info != nil {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	if revision == "" {
		revision = "unknown"
	}
	return fmt.Sprintf("retentionctl %s (revision %s, %s)", version, revision, runtime.Version())
}
