package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// problemStyle is how every problem type and error code is written: lower case, words joined by hyphens.
var problemStyle = regexp.MustCompile(`^[a-z]+(-[a-z0-9]+)*$`)

// TestProblemCodes lists every domain error code with the status the one table (codes) gives it. Clients branch on
// these codes, so a code added to catalog/error.go without a line here, or a line the table lacks, fails.
func TestProblemCodes(t *testing.T) {
	t.Parallel()
	want := map[string]int{
		"invalid":                http.StatusBadRequest,
		"not-found":              http.StatusNotFound,
		"conflict":               http.StatusConflict,
		"forbidden":              http.StatusForbidden,
		"precondition-failed":    http.StatusPreconditionFailed,
		"too-large":              http.StatusRequestEntityTooLarge,
		"unsupported-media-type": http.StatusUnsupportedMediaType,
		"busy":                   http.StatusTooManyRequests,
		"unavailable":            http.StatusServiceUnavailable,
		"internal":               http.StatusInternalServerError,
	}
	require.Equal(t, want, codes, "the table of httpapi/error.go")

	declared := declaredCodes(t, filepath.Join("..", "catalog", "error.go"))
	require.ElementsMatch(t, slices.Collect(maps.Keys(want)), declared, "the E* constants of catalog/error.go")
	for code := range want {
		require.Regexp(t, problemStyle, code)
	}
	require.Equal(t, "not-found", catalog.ENOTFOUND, "the constants are the values listed")
}

// TestProblemTypesStyle holds every problem type the service's code names (catalog.Invalid's first argument, and
// the Type of a catalog.Error or a Problem) to the style of the codes.
func TestProblemTypesStyle(t *testing.T) {
	t.Parallel()
	types := map[string]string{} // type -> where it was first seen
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for typ, pos := range problemTypesIn(t, path) {
			if _, ok := types[typ]; !ok {
				types[typ] = pos
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, types, "ttl-out-of-range", "the scan finds catalog.Invalid's types")
	require.Contains(t, types, "version-mismatch", "the scan finds catalog.Error's types")
	require.Contains(t, types, "route-not-found", "the scan finds Problem types")
	for typ, pos := range types {
		require.Regexp(t, problemStyle, typ, "problem type at %s", pos)
	}
}

// declaredCodes returns the values of the constants named E* in the Go file at path.
func declaredCodes(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	var out []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "E") && i < len(vs.Values) {
					out = append(out, stringLit(t, vs.Values[i]))
				}
			}
		}
	}
	return out
}

// problemTypesIn returns the problem types written as string literals in the Go file at path, with their positions.
func problemTypesIn(t *testing.T, path string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	require.NoError(t, err)
	out := map[string]string{}
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			out[stringLit(t, lit)] = fset.Position(lit.Pos()).String()
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if isNamed(n.Fun, "Invalid") && len(n.Args) > 0 {
				add(n.Args[0])
			}
		case *ast.CompositeLit:
			if isNamed(n.Type, "Error") || isNamed(n.Type, "Problem") {
				for _, elt := range n.Elts {
					if kv, ok := elt.(*ast.KeyValueExpr); ok && isNamed(kv.Key, "Type") {
						add(kv.Value)
					}
				}
			}
		case *ast.AssignStmt: // p.Type, p.Detail = "route-not-found", …
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Type" && i < len(n.Rhs) {
					add(n.Rhs[i])
				}
			}
		}
		return true
	})
	return out
}

// isNamed reports whether e is the identifier name, or a selector ending in it (catalog.Invalid).
func isNamed(e ast.Expr, name string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == name
	case *ast.SelectorExpr:
		return e.Sel.Name == name
	}
	return false
}

func stringLit(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	require.True(t, ok, "a string literal")
	s, err := strconv.Unquote(lit.Value)
	require.NoError(t, err)
	return s
}
