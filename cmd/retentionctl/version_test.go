package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionLine(t *testing.T) {
	t.Parallel()
	stamped := versionLine("v1.2.0-3-gabc1234", "abc1234def", nil)
	require.Equal(t, "retentionctl v1.2.0-3-gabc1234 (revision abc1234def, "+runtime.Version()+")", stamped)
	vcs := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fromvcs"}}}
	require.Contains(t, versionLine("dev", "", vcs), "(revision fromvcs,", "Go's VCS stamp when the build has none")
	require.Contains(t, versionLine("dev", "stamp", vcs), "(revision stamp,", "the build's stamp wins")
	require.Contains(t, versionLine("dev", "", nil), "(revision unknown,")
}

// The binaries of make build, make run and the image are stamped with the version and the revision, so that
// `retentionctl version` names the revision even where Go records none (the image is built without .git).
func TestBuildsAreStamped(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, target := range []string{"build", "run"} {
		cmd := exec.Command("make", "-n", "-C", root, target)
		// Not the make that runs the tests: its flags (jobserver, -s) are not this one's.
		cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Regexp(t, `go build -ldflags "-X main\.version=\S+ -X main\.revision=\S+"`, string(out), "make %s", target)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(dockerfile), `-X main.version=${VERSION} -X main.revision=${REVISION}`), "the image's build is stamped")
}
