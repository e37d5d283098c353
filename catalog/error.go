package catalog

import (
	"errors"
	"fmt"
)

// Error codes. Each one says what kind of failure happened; the HTTP layer maps them to statuses in one table, so
// domain code never thinks in status codes. A code is also the problem type of an error that names no more specific
// one, so codes are written as types are: lower case, words joined by hyphens (httpapi's TestProblemCodes holds the
// list and the style).
const (
	EINVALID      = "invalid"                // the request breaks a rule: a bad field, value or parameter
	ENOTFOUND     = "not-found"              // no such resource in the caller's org and sandbox
	ECONFLICT     = "conflict"               // the change collides with existing state (a duplicate name, a running run)
	EFORBIDDEN    = "forbidden"              // the caller may not do this (missing scope, a SYSTEM dataset)
	EPRECONDITION = "precondition-failed"    // If-Match named a version that is no longer current
	ETOOLARGE     = "too-large"              // the request body is over its limit
	EUNSUPPORTED  = "unsupported-media-type" // the body is of a content type the route does not take
	EBUSY         = "busy"                   // the caller has as many requests of a kind in flight as it may; retry later
	EUNAVAILABLE  = "unavailable"            // the database cannot be reached now; nothing was done, retry later
	EINTERNAL     = "internal"               // a bug; never shown to the caller in detail
)

// Error is a failure whose Message is safe to show to the caller. Type is a stable, specific identifier of the rule
// that failed (for example "ttl-out-of-range"), so clients can branch on it; Field names the offending field or
// parameter when there is one.
type Error struct {
	Code    string
	Type    string
	Field   string
	Message string
	// Err is the cause, for the logs; it is never shown to the caller.
	Err error
}

// Error implements the error interface; the cause, if any, follows the message.
func (e *Error) Error() string {
	msg := e.Message
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, msg)
	}
	return fmt.Sprintf("%s: %s", e.Code, msg)
}

// Unwrap returns the cause, so that errors.Is and errors.As see through the domain error to what caused it.
func (e *Error) Unwrap() error { return e.Err }

// Unavailable returns an EUNAVAILABLE error caused by err: the database could not be reached, so nothing was done
// and the request may be sent again.
func Unavailable(err error) *Error {
	return &Error{Code: EUNAVAILABLE, Type: "database-unavailable", Err: err,
		Message: "the database is unavailable right now; send the request again later"}
}

// Errorf returns an *Error with the given code and a formatted message; Type defaults to the code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Type: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error of the given type about field, with a formatted message that should name the
// value and the rule.
func Invalid(typ, field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Type: typ, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the *Error inside err, EINTERNAL for any other error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-safe message of err: the *Error's message, or "Internal error." for anything else,
// so that nothing internal leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}
