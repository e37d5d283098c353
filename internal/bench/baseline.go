package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A row is judged only on a baseline that passed its checks: a second sample of it, and the plausibility of its own
// figures. A baseline that fails one makes the row say why (baselineInvalid) instead of yes or no: a goal judged
// against a baseline the machine slowed down says nothing (issue #29: pgbench -S measured at 2,322 TPS, 13 times
// below what it does alone, made two API-reads rows say yes).

// Bounds of the baseline checks. They are wide: they catch a baseline that something else slowed, not the ±20% a
// single sample moves on 2 cores.
const (
	// maxSampleSpread is the most the slower of two samples of one baseline may take over the faster.
	maxSampleSpread = 1.5
	// maxLittleError is how far pgbench's measured average latency may be from clients / TPS (Little's law for a
	// closed loop without think time).
	maxLittleError = 0.25
	// minSecondShare is the least a second of a pgbench sample may serve, as a share of its median second: a stall
	// (a checkpoint's fsync, a cold cache, another process) shows as seconds far below the others.
	minSecondShare = 0.5
	// maxOtherCPU is the most of the machine's CPU that processes outside the harness may take while a baseline is
	// measured.
	maxOtherCPU = 0.10
)

// judge is a row's verdict: why the baseline is invalid when it is, else whether the goal holds.
func judge(goalHolds bool, invalid string) Verdict {
	if invalid != "" {
		return Verdict("baseline invalid: " + invalid)
	}
	return verdict(goalHolds)
}

// Invalid reports whether the verdict says the row's baseline failed its checks.
func (v Verdict) Invalid() bool { return strings.HasPrefix(string(v), "baseline invalid") }

// pgbenchSample is one run of pgbench -S as the harness read it.
type pgbenchSample struct {
	TPS        float64
	Clients    int
	LatencyAvg time.Duration // measured per transaction (pgbench -P), not derived from the rate
	PerSecond  []float64     // the rate of each progress interval (-P 1)
	OtherCPU   float64       // the share of the machine's CPU other processes took meanwhile
}

func (s pgbenchSample) String() string {
	return fmt.Sprintf("%s TPS, latency average %s", fmtInt(int64(s.TPS+0.5)), fmtDur(s.LatencyAvg))
}

// checkPgbench returns why the pgbench samples are not a baseline to judge by, or "" when they are: each sample's
// latency must agree with its rate and clients (Little's law), no second may fall far below the sample's median
// second, other processes must have left the machine alone, and the samples must agree with each other.
func checkPgbench(samples []pgbenchSample) string {
	if len(samples) < 2 {
		return fmt.Sprintf("%d sample(s), 2 needed", len(samples))
	}
	var why []string
	for i, s := range samples {
		if s.TPS <= 0 || s.Clients <= 0 || s.LatencyAvg <= 0 {
			why = append(why, fmt.Sprintf("sample %d printed no rate or latency", i+1))
			continue
		}
		little := time.Duration(float64(s.Clients) / s.TPS * float64(time.Second))
		if e := float64(s.LatencyAvg)/float64(little) - 1; e > maxLittleError || e < -maxLittleError {
			why = append(why, fmt.Sprintf("sample %d's latency %s is not %d clients / %s TPS = %s", i+1, fmtDur(s.LatencyAvg), s.Clients,
				fmtInt(int64(s.TPS+0.5)), fmtDur(little)))
		}
		if slowest, median, ok := secondsSpread(s.PerSecond); ok && slowest < minSecondShare*median {
			why = append(why, fmt.Sprintf("sample %d stalled: its slowest second served %s TPS, its median second %s", i+1,
				fmtInt(int64(slowest+0.5)), fmtInt(int64(median+0.5))))
		}
		if s.OtherCPU > maxOtherCPU {
			why = append(why, fmt.Sprintf("other processes took %s of the CPU during sample %d", fmtPct(min(s.OtherCPU, 1)), i+1))
		}
	}
	tps := make([]float64, len(samples))
	for i, s := range samples {
		tps[i] = s.TPS
	}
	if lo, hi := slices.Min(tps), slices.Max(tps); lo > 0 && hi/lo > maxSampleSpread {
		why = append(why, fmt.Sprintf("samples disagree: %s and %s TPS (%s apart, at most %s)", fmtInt(int64(lo+0.5)), fmtInt(int64(hi+0.5)),
			fmtRatio(hi/lo), fmtRatio(maxSampleSpread)))
	}
	return strings.Join(why, "; ")
}

// secondsSpread returns the slowest and the median of the per-second rates but the first, which includes the
// clients' connections (pgbench's rate excludes them; its first progress line does not: 0 to 600 TPS where the
// others show thousands, in the experiment of docs/benchmarks.md). ok is false with fewer than three seconds left.
func secondsSpread(perSecond []float64) (slowest, median float64, ok bool) {
	if len(perSecond) < 4 {
		return 0, 0, false
	}
	sorted := slices.Clone(perSecond[1:])
	slices.Sort(sorted)
	return sorted[0], sorted[len(sorted)/2], true
}

// workSample is one timed sample of a baseline that does a known amount of work: a DELETE of the rows a run deleted,
// a COPY of the rows the service stored.
type workSample struct {
	Done, Want int64 // rows the baseline's statement did, and rows it had to (the run's, the service's)
	Took       time.Duration
	OtherCPU   float64
}

// checkWork returns why the samples of a baseline are not one to judge by, or "" when they are: each must have done
// exactly the rows it had to (else it did other work: verb says what, such as "removed", and whose the rows it
// had to, such as "the run's"), with the machine to itself, and the samples' rates must agree.
func checkWork(samples []workSample, verb, whose string) string {
	if len(samples) < 2 {
		return fmt.Sprintf("%d sample(s), 2 needed", len(samples))
	}
	var why []string
	rates := make([]float64, 0, len(samples))
	for i, s := range samples {
		if s.Done != s.Want {
			why = append(why, fmt.Sprintf("sample %d %s %s rows, not %s %s", i+1, verb, fmtInt(s.Done), whose, fmtInt(s.Want)))
		}
		if s.Took <= 0 {
			why = append(why, fmt.Sprintf("sample %d took no time", i+1))
			continue
		}
		if s.OtherCPU > maxOtherCPU {
			why = append(why, fmt.Sprintf("other processes took %s of the CPU during sample %d", fmtPct(min(s.OtherCPU, 1)), i+1))
		}
		// A statement of no rows still scans; with one row counted, its rate compares its time.
		rates = append(rates, float64(max(s.Done, 1))/s.Took.Seconds())
	}
	if len(rates) >= 2 {
		if lo, hi := slices.Min(rates), slices.Max(rates); hi/lo > maxSampleSpread {
			why = append(why, fmt.Sprintf("samples disagree: %s to %s rows/s (%s apart, at most %s)", fmtInt(int64(lo+0.5)), fmtInt(int64(hi+0.5)),
				fmtRatio(hi/lo), fmtRatio(maxSampleSpread)))
		}
	}
	return strings.Join(why, "; ")
}
