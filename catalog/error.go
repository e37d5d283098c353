package catalog

import (
	"errors"
	"fmt"
)

// Error codes. Each one says what kind of failure happened; the HTTP layer maps them to statuses in one table, so
// domain code never thinks in status codes.
const (
	EINVALID      = "invalid"                // the request breaks a rule: a bad field, value or parameter
	ENOTFOUND     = "not_found"              // no such resource in the caller's org and sandbox
	ECONFLICT     = "conflict"               // the change collides with existing state (a duplicate name, a running run)
	EFORBIDDEN    = "forbidden"              // the caller may not do this (missing scope, a SYSTEM dataset)
	EPRECONDITION = "precondition_failed"    // If-Match named a version that is no longer current
	ETOOLARGE     = "too_large"              // the request body is over its limit
	EUNSUPPORTED  = "unsupported_media_type" // the body is of a content type the route does not take
	EINTERNAL     = "internal"               // a bug or an outage; never shown to the caller in detail
)

// Error is a failure whose Message is safe to show to the caller. Type is a stable, specific identifier of the rule
// that failed (for example "ttl-out-of-range"), so clients can branch on it; Field names the offending field or
// parameter when there is one.
type Error struct {
	Code    string
	Type    string
	Field   string
	Message string
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
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
