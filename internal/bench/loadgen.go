package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/retention/internal/demo"
)

// sample is one request of a load generator.
type sample struct {
	start time.Time
	dur   time.Duration
	rows  int // rows an ingestion request stored
	err   bool
}

// loadRun is a closed-loop load: each of its clients sends the next request as soon as the last one answered.
type loadRun struct {
	stopping atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	samples  []sample
	firstErr error
}

// startLoad starts clients running fn in a loop until stop. fn gets the client's number and its request count and
// returns the rows it stored (0 for a read).
func startLoad(ctx context.Context, clients int, fn func(ctx context.Context, client, i int) (int, error)) *loadRun {
	l := &loadRun{}
	for c := range clients {
		l.wg.Go(func() {
			var local []sample
			for i := 0; !l.stopping.Load() && ctx.Err() == nil; i++ {
				start := time.Now()
				rows, err := fn(ctx, c, i)
				if err != nil && ctx.Err() != nil {
					break // the harness is stopping: not a failure of the service
				}
				if err != nil {
					l.mu.Lock()
					if l.firstErr == nil {
						l.firstErr = err
					}
					l.mu.Unlock()
				}
				local = append(local, sample{start: start, dur: time.Since(start), rows: rows, err: err != nil})
			}
			l.mu.Lock()
			l.samples = append(l.samples, local...)
			l.mu.Unlock()
		})
	}
	return l
}

// stop lets each client finish the request it is sending, so that none is cut off (a cut-off request would show in
// the service's log as a failure), and returns the samples.
func (l *loadRun) stop() ([]sample, error) {
	l.stopping.Store(true)
	l.wg.Wait()
	return l.samples, l.firstErr
}

// latencyStats summarizes the samples that started within a window.
type latencyStats struct {
	n, errors     int
	perSec        float64
	p50, p99, max time.Duration
}

func (s latencyStats) String() string {
	return fmt.Sprintf("%d requests (%s), p50 %s, p99 %s, max %s, %d errors", s.n, fmtRate(s.perSec, "req/s"), fmtDur(s.p50), fmtDur(s.p99), fmtDur(s.max), s.errors)
}

// latencies summarizes the requests that started in [from, to).
func latencies(samples []sample, from, to time.Time) latencyStats {
	var durs []time.Duration
	var st latencyStats
	for _, s := range samples {
		if s.start.Before(from) || !s.start.Before(to) {
			continue
		}
		if s.err {
			st.errors++
			continue
		}
		durs = append(durs, s.dur)
	}
	st.n = len(durs)
	if secs := to.Sub(from).Seconds(); secs > 0 {
		st.perSec = float64(st.n) / secs
	}
	if len(durs) == 0 {
		return st
	}
	slices.Sort(durs)
	st.p50, st.p99, st.max = percentile(durs, 0.50), percentile(durs, 0.99), durs[len(durs)-1]
	return st
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// rowsPerSec is the ingestion rate within [from, to): each request's rows count in proportion to the part of its
// time that falls in the window, so that long requests straddling the window's edges count fairly.
func rowsPerSec(samples []sample, from, to time.Time) float64 {
	var rows float64
	for _, s := range samples {
		if s.err || s.dur <= 0 {
			continue
		}
		end := s.start.Add(s.dur)
		lo, hi := maxTime(s.start, from), minTime(end, to)
		if hi.After(lo) {
			rows += float64(s.rows) * float64(hi.Sub(lo)) / float64(s.dur)
		}
	}
	secs := to.Sub(from).Seconds()
	if secs <= 0 {
		return 0
	}
	return rows / secs
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// eventGen generates NDJSON events deterministically: the same seed and stream give the same events, with event
// times spread uniformly and in order over [from, to), and a click payload like the CLI's synthetic rows.
type eventGen struct {
	rng      *rand.Rand
	from     time.Time
	step     float64 // milliseconds per event
	span     int64
	next     int
	clientID bool
	// people, when positive, gives each event the identityMap of one of that many people (demo.AppendIdentityMap),
	// drawn by whom, a generator of its own, so that the events are otherwise those of the same seed without it.
	people int
	whom   *rand.Rand
	// unread writes that identityMap under "identitymap", a field the service does not read: events byte for byte
	// as long as with it, carrying no identity.
	unread bool
}

// withPeople makes the generator give each event one of people's identityMap, as retentionctl load -people does.
func (g *eventGen) withPeople(people int, seed, stream uint64) {
	g.people, g.whom = people, rand.New(rand.NewPCG(seed, stream^peopleStream))
}

// unreadIdentityMap is the member name of an identityMap the service does not read (eventGen.unread): JSON names
// are case-sensitive, and it is as long as "identityMap".
const unreadIdentityMap = `"identitymap"`

// peopleStream sets the generator of an event's person apart from the event's own.
const peopleStream = 0x9e0_91e

func newEventGen(seed, stream uint64, n int, from, to time.Time, clientID bool) *eventGen {
	span := to.Sub(from).Milliseconds()
	return &eventGen{rng: rand.New(rand.NewPCG(seed, stream)), from: from.UTC().Truncate(time.Millisecond), span: span,
		step: float64(span) / float64(max(n, 1)), clientID: clientID}
}

// body appends n events to buf.
func (g *eventGen) body(buf *bytes.Buffer, n int) {
	var id [16]byte
	var scratch []byte
	for range n {
		ms := min(int64((float64(g.next)+g.rng.Float64())*g.step), g.span-1)
		g.next++
		ts := g.from.Add(time.Duration(ms) * time.Millisecond)
		scratch = scratch[:0]
		scratch = append(scratch, '{')
		if g.people > 0 {
			at := len(scratch)
			scratch = demo.AppendIdentityMap(scratch, g.whom.IntN(g.people))
			if g.unread {
				copy(scratch[at:], unreadIdentityMap)
			}
		}
		// The same random draws whether or not the _id is sent, so both variants carry the same events.
		binary.LittleEndian.PutUint64(id[:8], g.rng.Uint64())
		binary.LittleEndian.PutUint64(id[8:], g.rng.Uint64())
		if g.clientID {
			scratch = append(scratch, `"_id":"`...)
			scratch = appendUUID(scratch, id)
			scratch = append(scratch, `",`...)
		}
		scratch = append(scratch, `"timestamp":"`...)
		scratch = ts.AppendFormat(scratch, "2006-01-02T15:04:05.000Z07:00")
		scratch = append(scratch, `","page":"/p/`...)
		scratch = strconv.AppendInt(scratch, int64(1+g.rng.IntN(999)), 10)
		scratch = append(scratch, `","userId":"u-`...)
		scratch = strconv.AppendInt(scratch, int64(1+g.rng.IntN(100000)), 10)
		scratch = append(scratch, `","durationMs":`...)
		scratch = strconv.AppendInt(scratch, int64(g.rng.IntN(30000)), 10)
		scratch = append(scratch, "}\n"...)
		buf.Write(scratch)
	}
}

func appendUUID(dst []byte, b [16]byte) []byte {
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return append(dst, s[:]...)
}
