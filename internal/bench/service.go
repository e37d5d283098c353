package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// binaries are the service's programs, built for this run. retentiondNoChain is retentiond built with the audit chain
// turned off (noChainFlag), which writes audit events without the hash chain: the audit-chain scenario's baseline
// only.
type binaries struct {
	retentiond, retentionctl, retentiondNoChain string
}

// moduleRoot finds the repository's root (the folder of go.mod), so the harness builds the same code wherever it
// runs from, a test's package folder included.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// noChainFlag is the linker flag that builds retentiond without the audit chain (postgres.auditChain): the same code,
// with events written unchained.
const noChainFlag = "-X github.com/acme/retention/postgres.auditChain=off"

// build compiles retentiond and retentionctl into dir, and retentiond once more without the audit chain as
// retentiond-nochain.
func build(ctx context.Context, root, dir string, flags []string) (binaries, error) {
	bins := binaries{retentiond: filepath.Join(dir, "retentiond"), retentionctl: filepath.Join(dir, "retentionctl"),
		retentiondNoChain: filepath.Join(dir, "retentiond-nochain")}
	if err := goBuild(ctx, root, dir+string(filepath.Separator), flags, "./cmd/retentiond", "./cmd/retentionctl"); err != nil {
		return binaries{}, err
	}
	if err := goBuild(ctx, root, bins.retentiondNoChain, withLinkerFlag(flags, noChainFlag), "./cmd/retentiond"); err != nil {
		return binaries{}, err
	}
	return bins, nil
}

// goBuild runs go build -o dst with the flags on the packages, in root.
func goBuild(ctx context.Context, root, dst string, flags []string, pkgs ...string) error {
	args := append([]string{"build", "-o", dst}, flags...)
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// withLinkerFlag returns the go build flags with flag added to their last -ldflags (go build keeps only the last
// one), or with -ldflags flag appended when they have none.
func withLinkerFlag(flags []string, flag string) []string {
	out := slices.Clone(flags)
	for i := len(out) - 1; i >= 0; i-- {
		f := strings.TrimPrefix(out[i], "-")
		switch {
		case (f == "-ldflags" || f == "ldflags") && i+1 < len(out):
			out[i+1] += " " + flag
			return out
		case strings.HasPrefix(f, "-ldflags=") || strings.HasPrefix(f, "ldflags="):
			out[i] += " " + flag
			return out
		}
	}
	return append(out, "-ldflags", flag)
}

// service is a running retentiond.
type service struct {
	cmd     *exec.Cmd
	base    string // http://host:port
	logPath string
	pprof   string // PPROF_ADDR, if the service serves profiles
	done    chan struct{}
	waitErr error
}

// serviceEnv is the environment every retentiond of the harness runs with: no ingestion grace, so that a run
// deletes what the baseline deletes, and schedules that never fall due during a run of the harness, so that only
// the manual runs it starts happen.
func serviceEnv(dbURL, addr, secret string, extra map[string]string) []string {
	vars := map[string]string{
		"DATABASE_URL":               dbURL,
		"HTTP_ADDR":                  addr,
		"AUTH_HS256_SECRET":          secret,
		"RETENTION_INGESTION_GRACE":  "P0D",
		"RETENTIOND_API":             "true",
		"RETENTIOND_SCHEDULER":       "true",
		"RETENTION_SCHEDULE":         "0 0 1 1 *",
		"RETENTION_PROFILE_SCHEDULE": "0 0 1 1 *",
		"SHUTDOWN_TIMEOUT":           "10s",
	}
	for k, v := range extra {
		vars[k] = v
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, ours := vars[name]; !ours {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// startService starts retentiond on the database and waits until it answers /readyz.
func startService(ctx context.Context, bin, dbURL, secret, logPath string, extra map[string]string) (*service, error) {
	addr, err := freeAddr(ctx)
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // the harness's own log
	if err != nil {
		return nil, err
	}
	// A context that is never canceled: the harness stops the server itself, gently, in stop.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), bin) //nolint:gosec // the binary the harness built
	cmd.Env = serviceEnv(dbURL, addr, secret, extra)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start retentiond: %w", err)
	}
	s := &service{cmd: cmd, base: "http://" + addr, logPath: logPath, done: make(chan struct{}), pprof: extra["PPROF_ADDR"]}
	go func() {
		s.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(s.done)
	}()
	if err := s.waitReady(ctx, 2*time.Minute); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

func (s *service) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			exit := s.waitErr
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("retentiond exited before it was ready: %w; its log:\n%s", exit, tail(s.logPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("retentiond not ready after %v; its log:\n%s", limit, tail(s.logPath, 20))
		}
	}
}

// cpuProfile writes the service's CPU profile of the next d into path.
func (s *service) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	if s.pprof == "" {
		return errors.New("retentiond serves no profiles: it was started without PPROF_ADDR")
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.pprof, max(1, int(d.Seconds())))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CPU profile: status %d", resp.StatusCode)
	}
	f, err := os.Create(path) //nolint:gosec // the folder the caller named
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// peakRSS returns the process's peak resident set size (VmHWM) so far.
func (s *service) peakRSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// stop ends the server with SIGTERM, as an orchestrator would, and kills it if it has not stopped in 30 s.
func (s *service) stop() error {
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("retentiond did not stop within 30 s of SIGTERM; killed")
	}
	return nil
}

// runCtl runs retentionctl with DATABASE_URL set and returns its standard output.
func runCtl(ctx context.Context, bin, dbURL string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // the binary the harness built
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("retentionctl %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func freeAddr(ctx context.Context) (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path) //nolint:gosec // the harness's own log
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
