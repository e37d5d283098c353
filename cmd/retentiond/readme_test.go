package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testlog"
	"github.com/acme/retention/internal/testwait"
)

// The README's commands are part of the product: TestReadmeRunsAsPrinted runs every ```sh block of README.md against
// a real `retentiond --dev` and compares what each command prints with what the README says it prints. The format,
// also described in the README's Development section:
//
//   - A ```sh block runs, unless the line before its fence is readmeSkip (for `make` targets, Docker, benchmarks)
//     or readmeRunCells (run by TestMakeRunCells against `make run-cells` instead).
//   - Each `## ` section runs in a bash of its own, in order, so its variables are its own; every section starts
//     with the tour's TOKEN, ORG and H lines (readmePreamble), run as printed.
//   - A command is a line, with the lines it continues onto (ending in \, | or &&). It must exit 0.
//   - `#=> text` lines right after a command are its standard output, line by line and whole: as many lines as
//     there are `#=>` lines, each equal to its text, where … stands for any text. Standard error is not compared.
//     Other comments (`#   …`) are prose for the reader and are not checked.
//   - http://127.0.0.1:8080 and ./bin/ are the test's server and binaries; ./deploy/ is the checkout's.
//   - README_SHOW=1 logs every command's output, to write a #=> line from.

// readmeSkip, on the line before a block's fence, keeps the test from running the block.
const readmeSkip = "<!-- readme-test: skip -->"

// readmeRunCells, on the line before a block's fence, has TestMakeRunCells run the block against `make run-cells`
// (runcells_test.go), and TestReadmeRunsAsPrinted skip it, as it skips any block with a readme-test mark.
const readmeRunCells = "<!-- readme-test: make run-cells -->"

// readmePreamble picks, from the tour's first block, the lines every section starts with.
var readmePreamble = regexp.MustCompile(`^(export TOKEN=|export ORG=|H=\()`)

// readmeCommand is one command of a README block and what the README says it prints.
type readmeCommand struct {
	line   int // in README.md, 1-based
	text   string
	expect []string
}

// readmeSection is one `## ` section's commands, in order.
type readmeSection struct {
	title    string
	commands []*readmeCommand
}

// continues reports whether a command's line goes on onto the next one.
func continues(line string) bool {
	l := strings.TrimRight(line, " \t")
	return strings.HasSuffix(l, `\`) || strings.HasSuffix(l, "|") || strings.HasSuffix(l, "&&")
}

// parseReadme reads the README's runnable blocks, section by section: those with no readme-test mark.
func parseReadme(t *testing.T, text string) []*readmeSection {
	t.Helper()
	return parseReadmeMarked(t, text, "")
}

// parseReadmeMarked is parseReadme for the blocks with the given mark on the line before their fence, or, when mark
// is "", for the blocks with none.
func parseReadmeMarked(t *testing.T, text, mark string) []*readmeSection {
	t.Helper()
	skipped := func(prev string) bool {
		prev = strings.TrimSpace(prev)
		if mark == "" {
			return strings.HasPrefix(prev, "<!-- readme-test:")
		}
		return prev != mark
	}
	var sections []*readmeSection
	var section *readmeSection
	var inBlock, skip, pending bool
	var cmd *readmeCommand
	prev := ""
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			section = &readmeSection{title: strings.TrimPrefix(line, "## ")}
			sections = append(sections, section)
		case !inBlock && line == "```sh":
			inBlock, skip, pending, cmd = true, skipped(prev), false, nil
		case inBlock && line == "```":
			require.False(t, pending, "README.md:%d: the block ends inside a command", n)
			inBlock = false
		case !inBlock || skip:
		case pending:
			cmd.text += "\n" + line
			pending = continues(line)
		case strings.HasPrefix(strings.TrimSpace(line), "#=>"):
			require.NotNil(t, cmd, "README.md:%d: #=> before any command", n)
			cmd.expect = append(cmd.expect, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), "#=>"), " "))
		case strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
			cmd = nil // an expectation belongs to the command right above it
		default:
			require.NotNil(t, section, "README.md:%d: a block before any section", n)
			cmd = &readmeCommand{line: n, text: line}
			section.commands = append(section.commands, cmd)
			pending = continues(line)
		}
		prev = line
	}
	return sections
}

// expectPattern is a #=> line as a regular expression: … is any text, everything else literal.
func expectPattern(want string) *regexp.Regexp {
	parts := strings.Split(want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// matchOutput says how out differs from the command's #=> lines, or "" when it matches them.
func matchOutput(expect []string, out string) string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		lines = nil
	}
	if len(lines) != len(expect) {
		return fmt.Sprintf("%d lines printed, %d expected", len(lines), len(expect))
	}
	for i, want := range expect {
		if !expectPattern(want).MatchString(lines[i]) {
			return fmt.Sprintf("line %d is\n\t%s\nnot\n\t%s", i+1, lines[i], want)
		}
	}
	return ""
}

// readmeServer starts `retentiond --dev` on a database of its own and returns its URL and the folder holding it
// and retentionctl.
func readmeServer(t *testing.T) (url, bin, databaseURL string) {
	t.Helper()
	bin = filepath.Dir(buildRetentiond(t))
	build := exec.Command("go", "build", "-o", bin, "../retentionctl")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	databaseURL = testdb.New(t)
	cmd := exec.Command(filepath.Join(bin, "retentiond"), "--dev", "-addr", addr)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "LOG_LEVEL=warn")
	log := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("retentiond:\n%s", log.String())
		}
	})
	url = "http://" + addr
	testwait.For(t, time.Minute, func() (bool, string) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "/readyz " + resp.Status
	})
	return url, bin, databaseURL
}

// runSection runs a section's commands in one bash in dir and returns each command's standard output, standard
// error and exit status.
func runSection(t *testing.T, dir string, env []string, preamble string, s *readmeSection) (outs, errs []string, codes []int) {
	t.Helper()
	out := t.TempDir()
	var script strings.Builder
	fmt.Fprintf(&script, "%s\n", preamble)
	for i, c := range s.commands {
		fmt.Fprintf(&script, "{\n%s\n} >%q 2>%q\necho $? >%q\n", c.text,
			filepath.Join(out, fmt.Sprint(i, ".out")), filepath.Join(out, fmt.Sprint(i, ".err")), filepath.Join(out, fmt.Sprint(i, ".rc")))
	}
	bash := exec.Command("bash", "-c", script.String())
	bash.Dir, bash.Env = dir, env
	got, err := bash.CombinedOutput()
	require.NoError(t, err, "section %q: %s", s.title, got)
	read := func(i int, ext string) string {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprint(i, ext)))
		require.NoError(t, err, "section %q, command %d did not run", s.title, i)
		return string(b)
	}
	for i := range s.commands {
		outs, errs = append(outs, read(i, ".out")), append(errs, read(i, ".err"))
		code, err := strconv.Atoi(strings.TrimSpace(read(i, ".rc")))
		require.NoError(t, err)
		codes = append(codes, code)
	}
	return outs, errs, codes
}

// TestReadmeRunsAsPrinted runs the README's command blocks, section by section, against a fresh `retentiond --dev`
// (demo data loaded) and holds each command to the output its #=> lines print (the format is above).
func TestReadmeRunsAsPrinted(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	sections := parseReadme(t, string(text))
	url, bin, databaseURL := readmeServer(t)

	dir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(dir, "bin")))
	// deploy/ for the cells' proxy configuration, which a block checks with haproxy (Debian's, in /usr/sbin, which
	// is not on every user's PATH).
	deploy, err := filepath.Abs("../../deploy")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(deploy, filepath.Join(dir, "deploy")))
	env := append(os.Environ(), "DATABASE_URL="+databaseURL, "RETENTION_URL="+url, "PATH="+os.Getenv("PATH")+":/usr/sbin")
	var preamble []string
	for _, s := range sections {
		for _, c := range s.commands {
			c.text = strings.ReplaceAll(c.text, "http://127.0.0.1:8080", url)
			if len(preamble) < 3 && readmePreamble.MatchString(c.text) {
				preamble = append(preamble, c.text)
			}
		}
	}
	require.Len(t, preamble, 3, "the tour sets TOKEN, ORG and H")
	checked := 0
	for _, s := range sections {
		if len(s.commands) == 0 {
			continue
		}
		outs, errs, codes := runSection(t, dir, env, strings.Join(preamble, "\n"), s)
		for i, c := range s.commands {
			where := fmt.Sprintf("README.md:%d (%s)", c.line, s.title)
			if codes[i] != 0 {
				t.Errorf("%s: exit status %d\n%s\nstdout: %s\nstderr: %s", where, codes[i], c.text, outs[i], errs[i])
				continue
			}
			if os.Getenv("README_SHOW") != "" {
				t.Logf("%s:\n%s\n%s", where, c.text, outs[i])
			}
			if c.expect == nil {
				continue
			}
			checked++
			if why := matchOutput(c.expect, outs[i]); why != "" {
				t.Errorf("%s: the output is not what the README prints: %s\n%s\nstdout:\n%s\nstderr:\n%s", where, why, c.text, outs[i], errs[i])
			}
		}
	}
	require.Positive(t, checked, "no #=> line in the README")
	t.Logf("%d sections run, %d outputs compared", len(sections), checked)
}

// TestReadmeFormat holds the test's reading of the README format on a small sample.
func TestReadmeFormat(t *testing.T) {
	t.Parallel()
	sample := strings.Join([]string{
		"## One", "```sh", "A=$(echo a \\", "  b)", "echo $A", "#=> a b", "#   prose", "", "echo x |", "  tr x y", "#=> …y", "```",
		readmeSkip, "```sh", "make run", "```", "## Two", "```sh", "# a comment", "echo z", "```",
		readmeRunCells, "```sh", "echo cells", "```",
	}, "\n")
	sections := parseReadme(t, sample)
	require.Len(t, sections, 2)
	require.Len(t, sections[0].commands, 3)
	require.Equal(t, "A=$(echo a \\\n  b)", sections[0].commands[0].text)
	require.Equal(t, []string{"a b"}, sections[0].commands[1].expect)
	require.Equal(t, "echo x |\n  tr x y", sections[0].commands[2].text)
	require.Equal(t, []string{"…y"}, sections[0].commands[2].expect)
	require.Len(t, sections[1].commands, 1)
	require.Nil(t, sections[1].commands[0].expect)
	marked := parseReadmeMarked(t, sample, readmeRunCells)
	require.Len(t, marked, 2)
	require.Empty(t, marked[0].commands)
	require.Len(t, marked[1].commands, 1)
	require.Equal(t, "echo cells", marked[1].commands[0].text)

	require.Empty(t, matchOutput([]string{`{"a":…,"b":2}`}, `{"a":[1],"b":2}`))
	require.Contains(t, matchOutput([]string{`{"a":…,"b":2}`}, `{"a":[1],"b":3}`), "line 1 is")
	require.Contains(t, matchOutput([]string{"x"}, "x\ny\n"), "2 lines printed, 1 expected")
	require.Empty(t, matchOutput(nil, ""))
}
