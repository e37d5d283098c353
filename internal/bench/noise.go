package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// noiseMonitor watches how much CPU the machine spends outside the harness: the harness, the processes it starts
// and its private Postgres are "ours"; every other process (another test suite, a build) is noise that slows the
// figures. It samples /proc once a second, so a scenario's figures can say whether they were measured on a quiet
// machine.
type noiseMonitor struct {
	roots []int // our process trees: this process, and the private postmaster
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []noiseSample
	byName  map[string]float64 // CPU seconds of other processes, by command name
}

type noiseSample struct {
	at      time.Time
	total   float64 // CPU-seconds the machine had in the interval (cores × seconds)
	foreign float64 // CPU-seconds other processes used
}

// clockTicks is USER_HZ, the unit of /proc CPU times; 100 on every Linux the harness targets.
const clockTicks = 100.0

func startNoiseMonitor(roots ...int) *noiseMonitor {
	m := &noiseMonitor{roots: roots, stop: make(chan struct{}), done: make(chan struct{}), byName: map[string]float64{}}
	go m.loop()
	return m
}

func (m *noiseMonitor) loop() {
	defer close(m.done)
	prevTotal, okTotal := machineTicks()
	prevProcs := processTicks()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-ticker.C:
		}
		total, ok := machineTicks()
		procs := processTicks()
		if !ok || !okTotal {
			prevTotal, okTotal, prevProcs = total, ok, procs
			continue
		}
		parents := map[int]int{}
		for pid, p := range procs {
			parents[pid] = p.ppid
		}
		s := noiseSample{at: time.Now(), total: (total - prevTotal) / clockTicks}
		m.mu.Lock()
		for pid, p := range procs {
			before, seen := prevProcs[pid]
			if !seen || m.ours(pid, parents) {
				continue
			}
			d := (p.ticks - before.ticks) / clockTicks
			if d > 0 {
				s.foreign += d
				m.byName[p.comm] += d
			}
		}
		m.samples = append(m.samples, s)
		m.mu.Unlock()
		prevTotal, prevProcs = total, procs
	}
}

// ours reports whether pid descends from one of the roots.
func (m *noiseMonitor) ours(pid int, parents map[int]int) bool {
	for range 64 {
		if slices.Contains(m.roots, pid) {
			return true
		}
		p, ok := parents[pid]
		if !ok || p <= 1 {
			return false
		}
		pid = p
	}
	return false
}

func (m *noiseMonitor) close() {
	if m == nil {
		return
	}
	close(m.stop)
	<-m.done
}

// share returns the part of the machine's CPU other processes used in [from, to).
func (m *noiseMonitor) share(from, to time.Time) float64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var total, foreign float64
	for _, s := range m.samples {
		if !s.at.Before(from) && s.at.Before(to.Add(time.Second)) {
			total += s.total
			foreign += s.foreign
		}
	}
	if total == 0 {
		return 0
	}
	return foreign / total
}

// summary describes the noise over the whole run: the average, the worst 10 seconds, and the busiest others.
func (m *noiseMonitor) summary() string {
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return "Other load: not measured"
	}
	var total, foreign, worst float64
	for i, s := range m.samples {
		total += s.total
		foreign += s.foreign
		var wt, wf float64
		for _, w := range m.samples[i:min(i+10, len(m.samples))] {
			wt += w.total
			wf += w.foreign
		}
		if wt > 0 && wf/wt > worst {
			worst = wf / wt
		}
	}
	type named struct {
		name string
		secs float64
	}
	var top []named
	for n, s := range m.byName {
		top = append(top, named{n, s})
	}
	slices.SortFunc(top, func(a, b named) int { return int(b.secs*1000 - a.secs*1000) })
	var names []string
	for _, t := range top[:min(4, len(top))] {
		names = append(names, fmt.Sprintf("%s %.0f s", t.name, t.secs))
	}
	avg := 0.0
	if total > 0 {
		avg = foreign / total
	}
	return fmt.Sprintf("Other load: processes outside the harness, its Postgres and the service used %s of the machine's CPU on average during the run, %s in the worst 10 s (busiest: %s)",
		fmtPct(avg), fmtPct(worst), strings.Join(names, ", "))
}

// machineTicks returns the busy and idle CPU time of the machine so far, in ticks.
func machineTicks() (float64, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var sum float64
	for _, v := range f[1:8] { // user nice system idle iowait irq softirq
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	if len(f) > 8 {
		if n, err := strconv.ParseFloat(f[8], 64); err == nil { // steal
			sum += n
		}
	}
	return sum, true
}

type procTicks struct {
	ppid  int
	ticks float64 // utime + stime
	comm  string
}

// processTicks reads every process's parent and CPU time.
func processTicks() map[int]procTicks {
	out := map[int]procTicks{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		data, err := os.ReadFile(p) //nolint:gosec // /proc
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
		if open < 0 || end < open {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data[:open])))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data[end+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[pid] = procTicks{ppid: ppid, ticks: ut + st, comm: string(data[open+1 : end])}
	}
	return out
}
