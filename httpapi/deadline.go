package httpapi

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// The I/O bounds of a Server whose Config leaves them zero (tests); retentiond sets them from its configuration.
const (
	defaultReadTimeout  = 30 * time.Second
	defaultWriteTimeout = 30 * time.Second
)

// MaxBodyDuration bounds the reading of one request body, however steadily its bytes arrive: the largest
// ingestion body (100 MiB) takes it at 175 KiB/s, so a client must send at least that fast on average. Without it,
// a client trickling a byte every few seconds would hold its handler for days.
const MaxBodyDuration = 10 * time.Minute

// deadlines gives every request its I/O bounds. A body must keep coming: each read waits at most readTimeout, and
// the whole body must have arrived MaxBodyDuration after the request came, so a client that never sends the body
// it announced cannot hold a handler. An answer must be taken by the client within writeTimeout of its start
// (streams renew it per page, extendWriteDeadline): a client that stops reading is cut off, and the handler's
// goroutine and buffers are freed. The server itself sets no whole-request ReadTimeout or WriteTimeout: those
// would cut an ingestion of 100 MiB at a reasonable rate, or a long export, in the middle.
func (s *Server) deadlines(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		rc := http.NewResponseController(res)
		// The deadline covers a "100 Continue" and anything else written before the answer proper starts.
		_ = ignoreUnsupported(rc.SetWriteDeadline(time.Now().Add(s.writeTimeout)))
		res.Before(func() { _ = ignoreUnsupported(rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))) })
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		body := &deadlineBody{ReadCloser: req.Body, rc: rc, idle: s.readTimeout, end: time.Now().Add(MaxBodyDuration)}
		req.Body = body
		// Until the handler reads, the deadline bounds what net/http itself reads of the body: it reads on to the
		// end of a body the handler left, before it answers.
		_ = ignoreUnsupported(rc.SetReadDeadline(body.next()))
		defer func() {
			if !body.sawEOF {
				// The handler left the body unread: whatever net/http would still read of it must not wait. The
				// connection closes after the answer.
				_ = ignoreUnsupported(rc.SetReadDeadline(time.Now()))
			}
		}()
		return next(c)
	}
}

// extendWriteDeadline gives the next write of a stream writeTimeout to reach the client.
func (s *Server) extendWriteDeadline(w http.ResponseWriter) error {
	return ignoreUnsupported(http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout)))
}

// ignoreUnsupported drops the error of a writer that has no deadlines (a recorder in tests).
func ignoreUnsupported(err error) error {
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

// deadlineBody is a request body read under a deadline renewed at each read, up to end. Once the body has ended,
// the deadline is lifted: net/http then reads the connection in the background while the handler runs, to notice
// a client that leaves, and a deadline passing there would cancel the request.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	idle   time.Duration
	end    time.Time
	sawEOF bool
}

// drain reads and drops what is left of the body, at most most bytes and for at most within: a client still sending
// a short rest of a body the handler stopped reading then reads the answer, where closing the connection while it
// writes could reset the connection before it did. Past either bound the connection closes after the answer.
func (b *deadlineBody) drain(most int64, within time.Duration) {
	if b.sawEOF {
		return
	}
	_ = ignoreUnsupported(b.rc.SetReadDeadline(time.Now().Add(within)))
	if _, err := io.CopyN(io.Discard, b.ReadCloser, most); errors.Is(err, io.EOF) {
		b.sawEOF = true
		_ = ignoreUnsupported(b.rc.SetReadDeadline(time.Time{}))
	}
}

// next is the deadline of the next read.
func (b *deadlineBody) next() time.Time {
	deadline := time.Now().Add(b.idle)
	if deadline.After(b.end) {
		return b.end
	}
	return deadline
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	if err := ignoreUnsupported(b.rc.SetReadDeadline(b.next())); err != nil {
		return 0, err
	}
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.sawEOF = true
		_ = ignoreUnsupported(b.rc.SetReadDeadline(time.Time{}))
	}
	return n, err
}
