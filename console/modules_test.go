package console_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// staticImport is an ES module's static import or re-export (`import { a } from './x.js'`, `import './x.js'`,
// `export * from './x.js'`), possibly over several lines; its group is the specifier. The clause allows only what
// an import clause holds, so a declaration such as `export function f()` never reaches a later `from`.
var staticImport = regexp.MustCompile(`(?m)^\s*(?:import|export)\s*(?:[\w$*{},\s]*?\s*from\s*)?['"]([^'"]+)['"]`)

// moduleGraph reads every module in assets/ and what each imports, by file name; it fails the test on an import of
// anything but a sibling module, which the graph (and the server, which serves no folder) would not hold.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("assets", "*.js"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	graph := map[string][]string{}
	for _, name := range names {
		graph[filepath.Base(name)] = nil
	}
	for _, name := range names {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		from := filepath.Base(name)
		for _, spec := range importsOf(string(src)) {
			to, ok := strings.CutPrefix(spec, "./")
			_, known := graph[to]
			require.True(t, ok && known, "%s imports %q, which is not a module of assets/", from, spec)
			graph[from] = append(graph[from], to)
		}
	}
	return graph
}

// importsOf is the specifiers a module's source imports statically, in order.
func importsOf(src string) []string {
	var specs []string
	for _, m := range staticImport.FindAllStringSubmatch(src, -1) {
		specs = append(specs, m[1])
	}
	return specs
}

// importCycle is one cycle of graph as the modules on it, the first repeated at the end, or nil when it has none.
func importCycle(graph map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(m string) []string {
		state[m] = onPath
		path = append(path, m)
		for _, next := range graph[m] {
			switch state[next] {
			case onPath:
				return append(slices.Clone(path[slices.Index(path, next):]), next)
			case unseen:
				if c := visit(next); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[m] = done
		return nil
	}
	starts := make([]string, 0, len(graph))
	for m := range graph {
		starts = append(starts, m)
	}
	slices.Sort(starts)
	for _, m := range starts {
		if state[m] == unseen {
			if c := visit(m); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestModulesImportNoCycle: the console's modules import one another without a cycle. In a cycle, which module's
// body runs first depends on where the browser entered it, and a name used at load time can be read before it is
// set; shared code belongs in a module that imports no view.
func TestModulesImportNoCycle(t *testing.T) {
	t.Parallel()
	graph := moduleGraph(t)
	require.NotEmpty(t, graph["app.js"], "app.js imports the views; the graph was not read")
	cycle := importCycle(graph)
	require.Nil(t, cycle, "the console's modules import in a cycle: %s", strings.Join(cycle, " → "))
}

// TestImportCycleIsFound: the check above finds a cycle when there is one, and names it.
func TestImportCycleIsFound(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"b.js", "c.js", "b.js"},
		importCycle(map[string][]string{"a.js": {"b.js"}, "b.js": {"c.js"}, "c.js": {"b.js", "d.js"}, "d.js": nil}))
	require.Nil(t, importCycle(map[string][]string{"a.js": {"b.js", "c.js"}, "b.js": {"c.js"}, "c.js": nil}))
	require.Equal(t, []string{"./a.js", "./b.js", "./c.js", "./d.js"}, importsOf(`// import { x } from './comment.js'
import { a } from './a.js';
import {
  b1,
  b2 as b,
} from "./b.js";
import './c.js';
export * from './d.js';
export function f() { return g('./e.js'); }
export const imported = 'from';`))
}

// TestIndexPreloadsEveryModule: index.html loads app.js and preloads every other module, so a first visit fetches
// them at once; a module added without its modulepreload would be fetched only after the one importing it.
func TestIndexPreloadsEveryModule(t *testing.T) {
	t.Parallel()
	index, err := os.ReadFile(filepath.Join("assets", "index.html"))
	require.NoError(t, err)
	for name := range moduleGraph(t) {
		tag := `<link rel="modulepreload" href="` + name + `">`
		if name == "app.js" {
			tag = `<script type="module" src="app.js"></script>`
		}
		require.Contains(t, string(index), tag, "index.html does not load %s", name)
	}
}
