package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// browser is the package's one Chromium; each test opens tabs in it (tab), so the suite starts a browser once.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

// TestMain closes the shared Chromium after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.Exit(code)
}

// chromiumPath is Debian's Chromium, or $CHROMIUM (make test sets it). A missing browser fails the test with the
// command that installs it: a skipped browser test would pass for one that ran.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no Chromium at %s: run `make tools-chromium` (as root: apt-get install -y chromium chromium-driver): %v", path, err)
	}
	return path
}

// startBrowser starts the shared headless Chromium with a fresh profile, no network of its own and a fixed
// window, so that screenshots are the same on every machine.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "console-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(dir),
			chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
			chromedp.Flag("no-first-run", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.WindowSize(viewportWidth, viewportHeight),
			chromedp.Flag("lang", "en-US"), chromedp.Env("TZ=Europe/Paris", "LANG=en_US.UTF-8"))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		if browser.err = chromedp.Do(ctx); browser.err != nil {
			cancelCtx()
			cancelAlloc()
			return
		}
		browser.ctx = ctx
		browser.cancel = func() { cancelCtx(); cancelAlloc(); os.RemoveAll(dir) }
	})
	require.NoError(t, browser.err, "start Chromium")
	return browser.ctx
}

// The fixed viewport of the tests and screenshots, and the narrow window the layout is checked and shown at too.
const (
	viewportWidth  = 1366
	viewportHeight = 860
	narrowWidth    = 800
)

// tab opens a new tab of the shared browser for the test, closed when it ends. The tab's whole life has ten
// minutes: a bound that only turns a hang into a failure (with one minute, the inventory's tab ran out under a load
// of 40 on 2 cores, its pages all correct).
func tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(startBrowser(t))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(cancelTimeout)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(viewportWidth, viewportHeight)))
	return ctx
}

// run runs actions on the tab and fails the test on an error.
func run(ctx context.Context, t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// text returns the text of the first element matching sel, once it is visible.
func text(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	run(ctx, t, chromedp.WaitVisible(sel))
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	require.NoError(t, err)
	return s
}

// waitText waits until the element matching sel contains want.
func waitText(ctx context.Context, t *testing.T, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.textContent.includes(%q); })()`, sel, want)
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(pollTimeout)))
	if err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || '(none)'`, sel)))
		t.Fatalf("%s never contained %q; it holds %q (%v)", sel, want, got, err)
	}
}

// eval evaluates a JavaScript expression, awaiting a promise, and returns its value.
func eval[T any](ctx context.Context, t *testing.T, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "evaluate %.200s", js)
	return v
}

// axeViolation is one rule axe-core found broken, with where.
type axeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

// checkAccessibility runs axe-core (WCAG 2 A and AA rules, best practices) on the page as it is and fails on any
// serious or critical violation. make test installs axe-core and names it in $AXE_CORE.
func checkAccessibility(ctx context.Context, t *testing.T, page string) {
	t.Helper()
	path := os.Getenv("AXE_CORE")
	if path == "" {
		path = filepath.Join("..", ".tools", "node", "node_modules", "axe-core", "axe.min.js")
	}
	src, err := os.ReadFile(path)
	require.NoError(t, err, "axe-core is installed by `make tools-axe`")
	raw := eval[string](ctx, t, string(src)+`;
		axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations
			.filter(v => v.impact === 'serious' || v.impact === 'critical')
			.map(v => ({id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map(n => n.target.join(' '))}))))`)
	var violations []axeViolation
	require.NoError(t, json.Unmarshal([]byte(raw), &violations))
	var lines []string
	for _, v := range violations {
		lines = append(lines, fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(v.Targets, ", ")))
	}
	require.Empty(t, lines, "axe-core on %s: serious or critical violations", page)
}

// screenshot writes the page as docs/console/<name>.png, and as it shows in a narrow window (narrowWidth) as
// <name>-800.png, when CONSOLE_SCREENSHOTS=1 asks for it (the committed screenshots of docs/console.md and the
// README).
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if os.Getenv("CONSOLE_SCREENSHOTS") != "1" {
		return
	}
	dir := filepath.Join("..", "docs", "console")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, width := range []int64{viewportWidth, narrowWidth} {
		file := name + ".png"
		if width != viewportWidth {
			file = fmt.Sprintf("%s-%d.png", name, width)
		}
		run(ctx, t, chromedp.EmulateViewport(width, viewportHeight))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), png, 0o644))
	}
	run(ctx, t, chromedp.EmulateViewport(viewportWidth, viewportHeight))
}

// pollTimeout bounds every wait for the page to reach a state. It is a ceiling against a hung page, never a
// judgment of speed: a run the page follows ends within a second on a quiet machine, and took over 20 s once in a
// browser suite beside a loaded CI.
const pollTimeout = 2 * time.Minute

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}
