package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/demo"
)

// The first run copies the shipped map, one demo org a cell; after a demo org moved, the cell it left loads no demo
// data (RETENTION_DEMO_ORGS=none), so the org is not created afresh there.
func TestPlaceDemoOrgsFollowsTheMap(t *testing.T) {
	t.Parallel()
	checkout, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	base := filepath.Join(t.TempDir(), "cells")
	cs := []*cell{{name: "a"}, {name: "b"}}
	mapFile, err := placeDemoOrgs(checkout, base, cs)
	require.NoError(t, err)
	require.Equal(t, []string{demo.Orgs[0]}, cs[0].demoOrgs)
	require.Equal(t, []string{demo.Orgs[1]}, cs[1].demoOrgs)

	require.NoError(t, os.WriteFile(mapFile, []byte(demo.Orgs[0]+" b\n"+demo.Orgs[1]+" b\n"), 0o644))
	cs = []*cell{{name: "a"}, {name: "b"}}
	_, err = placeDemoOrgs(checkout, base, cs)
	require.NoError(t, err)
	require.Empty(t, cs[0].demoOrgs)
	require.Equal(t, demo.Orgs, cs[1].demoOrgs)

	// An org the map does not name is the default cell's, the first.
	require.NoError(t, os.WriteFile(mapFile, []byte(demo.Orgs[1]+" b\n"), 0o644))
	cs = []*cell{{name: "a"}, {name: "b"}}
	_, err = placeDemoOrgs(checkout, base, cs)
	require.NoError(t, err)
	require.Equal(t, []string{demo.Orgs[0]}, cs[0].demoOrgs)
}
