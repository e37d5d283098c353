// Package console is the web console's client: static HTML, CSS and JavaScript modules, embedded in the binary and
// served by package httpapi at /ui/. The client calls the service's own API with the bearer token its user pasted
// or opened the console with, so the console can do exactly what that token may do and no more; the server never
// sees the token outside the API's Authorization header. docs/console.md says why it has no build step.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// SecurityPolicy is the Content-Security-Policy of every asset: scripts, styles and API calls from the service's
// own origin only, no inline script or style, no framing. The client needs nothing else, so a script injected
// through data (a dataset's name, say) could neither run nor send anything elsewhere.
const SecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// contentTypes are the types of the assets, set here rather than guessed from the host's MIME tables, which
// differ between machines (a .js served as text/plain is refused as a module).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// asset is one embedded file with its validator.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the embedded client under prefix (such as "/ui/"): prefix itself is index.html, any other path
// not an asset is 404. Every answer carries the security headers; assets are revalidated on each load (no-cache
// with a content ETag), so a new binary's client is never mixed with an old one's cached modules.
func Handler(prefix string) http.Handler {
	files := load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", SecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if name == "" {
			name = "index.html"
		}
		a, ok := files[name]
		if !ok {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// load reads every embedded asset once. The embedded tree is fixed at build time, so an unreadable file is a
// broken build and panics.
func load() map[string]asset {
	files := map[string]asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		contentType, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[strings.TrimPrefix(p, "assets/")] = asset{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: read embedded assets: " + err.Error())
	}
	return files
}
