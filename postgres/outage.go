package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acme/retention/catalog"
)

// outageStates are the SQLSTATEs of a server that cannot serve now, whatever was asked: it is shutting down or
// starting, or has no connection slot left.
var outageStates = map[string]bool{
	"57P01": true, // admin_shutdown
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now
	"53300": true, // too_many_connections
}

// unavailable turns the error of a database that cannot be reached (no connection could be made, the connection
// broke, the server is shutting down or out of connections) into catalog.EUNAVAILABLE, which callers answer with
// "retry later" rather than as a bug. A caller's own cancellation and every other error pass unchanged.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	// A connection that could not be made within its connect_timeout is an outage too (a server that accepts TCP
	// and never answers: seen when a test's dead port was taken by another listener), though the error wraps
	// context.DeadlineExceeded; only a caller's own cancellation passes unchanged.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) && !errors.Is(err, context.Canceled) {
		return catalog.Unavailable(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var de *catalog.Error
	if errors.As(err, &de) {
		return err
	}
	var pgErr *pgconn.PgError
	var netErr net.Error
	switch {
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF):
	case errors.As(err, &pgErr):
		if !outageStates[pgErr.Code] && !strings.HasPrefix(pgErr.Code, "08") { // class 08: connection exception
			return err
		}
	case pgconn.SafeToRetry(err):
		// The statement never reached the server: its connection was closed under it.
	default:
		return err
	}
	return catalog.Unavailable(err)
}

// outage applies unavailable to the error an exported method is about to return; a deferred call of it is the one
// place each method of the API's services translates an outage.
func outage(err *error) { *err = unavailable(*err) }
