package httpapi

import (
	"fmt"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// defaultLongRequestsPerOrg is how many long requests an org may have in flight on one replica of a Server whose
// Config leaves it zero (tests); retentiond sets it from its configuration.
const defaultLongRequestsPerOrg = 4

// orgLimiter counts each org's long requests in flight on this replica: the ones that can take seconds or more of
// a database connection, the CPU, memory or a client's socket (exports, verification, ingestion, previews, row
// reads). An org past its limit is refused at once instead of queueing behind its own requests, so that one
// org's burst cannot occupy what every org shares. The count is per process: behind a load balancer, an org may
// have this many on each replica.
type orgLimiter struct {
	max      int
	mu       sync.Mutex
	inFlight map[string]int
}

func newOrgLimiter(maxPerOrg int) *orgLimiter {
	return &orgLimiter{max: maxPerOrg, inFlight: map[string]int{}}
}

// acquire takes one of org's slots; false when it has none left.
func (l *orgLimiter) acquire(org string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[org] >= l.max {
		return false
	}
	l.inFlight[org]++
	return true
}

// release gives back a slot acquire took; an org with none in flight leaves the map, which so holds only the orgs
// that are busy now.
func (l *orgLimiter) release(org string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[org] <= 1 {
		delete(l.inFlight, org)
		return
	}
	l.inFlight[org]--
}

// long marks a route's requests as long: each holds one of its org's slots until its handler returns, and past the
// org's limit the request is refused with 429 and Retry-After.
func (s *Server) long(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		org := caller(c).Org
		if !s.longRequests.acquire(org) {
			return &catalog.Error{Code: catalog.EBUSY, Type: "too-many-long-requests", Message: fmt.Sprintf(
				"org %s already has %d long requests (exports, audit verification, ingestion, previews, row reads) in flight on this server, its limit; send this one again when one of them has ended",
				org, s.longRequests.max)}
		}
		defer s.longRequests.release(org)
		return next(c)
	}
}

// listing caps a listing's requests (the dataset inventory, the audit query, the expirations), which take filters
// of many terms: an org may have as many in flight on this replica as it may have long requests, counted apart
// from them, and past that a listing is refused at once with 429 and Retry-After. A listing's terms and bytes are
// bounded (MaxParameterTerms, MaxQueryBytes), so each costs little; the cap keeps an org looping them from holding
// the connections and CPU every org shares (16 processes of one org took another org's reads from 0.8 to 57 ms).
func (s *Server) listing(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		org := caller(c).Org
		if !s.listings.acquire(org) {
			return &catalog.Error{Code: catalog.EBUSY, Type: "too-many-listings", Message: fmt.Sprintf(
				"org %s already has %d listings in flight on this server, its limit; send this one again when one of them has ended",
				org, s.listings.max)}
		}
		defer s.listings.release(org)
		return next(c)
	}
}
