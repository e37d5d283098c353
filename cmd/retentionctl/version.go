package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise the VCS stamp of the build is shown.
var version = "dev"

func runVersion(out io.Writer) error {
	rev := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	fmt.Fprintf(out, "retentionctl %s (revision %s, %s)\n", version, rev, runtime.Version())
	return nil
}
