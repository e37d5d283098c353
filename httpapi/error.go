package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// codes is the one table from domain error codes to HTTP statuses.
var codes = map[string]int{
	catalog.EINVALID:      http.StatusBadRequest,
	catalog.ENOTFOUND:     http.StatusNotFound,
	catalog.ECONFLICT:     http.StatusConflict,
	catalog.EFORBIDDEN:    http.StatusForbidden,
	catalog.EPRECONDITION: http.StatusPreconditionFailed,
	catalog.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	catalog.EUNSUPPORTED:  http.StatusUnsupportedMediaType,
	catalog.EBUSY:         http.StatusTooManyRequests,
	catalog.EUNAVAILABLE:  http.StatusServiceUnavailable,
	catalog.EINTERNAL:     http.StatusInternalServerError,
}

// retryAfter is the Retry-After (in seconds) of the errors a client should simply send again: an org's long
// requests free a slot within about a second, and a database outage is given a few seconds to pass.
var retryAfter = map[string]string{
	catalog.EBUSY:        "1",
	catalog.EUNAVAILABLE: "5",
}

// Problem is an RFC 7807 problem document. Type is a stable code of this service that clients can branch on;
// Detail names the field, the value and the rule.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	// ErrorCode and Message are Adobe's work-order error fields (error_code "400001", message), set only on the
	// work-order routes, whose errors Adobe's spec gives in that form: the body answers both forms.
	ErrorCode string `json:"error_code,omitempty"`
	Message   string `json:"message,omitempty"`
}

// problemContentType is the media type of RFC 7807 bodies.
const problemContentType = "application/problem+json"

// errorHandler renders every error a handler returns. Client errors carry their message; anything else is logged
// with the request id and answered with a generic 500, so that nothing internal leaks.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	err = s.movedAway(c, err)
	p := s.problemFor(err, c)
	if p.Status >= http.StatusInternalServerError {
		s.logger.ErrorContext(c.Request().Context(), "request failed",
			slog.String("request_id", p.RequestID), slog.String("method", c.Request().Method),
			slog.String("path", c.Path()), slog.Any("error", err))
	}
	if after, ok := retryAfter[catalog.ErrorCode(err)]; ok {
		c.Response().Header().Set("Retry-After", after)
	}
	if isWorkOrderRoute(c.Path()) {
		p.ErrorCode, p.Message = workOrderErrorCode(p.Status), p.Detail
	}
	writeProblem(c, p)
}

// movedAway turns a not-found answer of an org that has moved to another cell into its org-moved problem: a request
// that reached the old cell (directly, or routed there before the switch) learns where the org went, not that its
// data is gone.
func (s *Server) movedAway(c echo.Context, err error) error {
	if catalog.ErrorCode(err) != catalog.ENOTFOUND {
		return err
	}
	if moved := s.nothingHere(c, 0); moved != nil {
		return moved
	}
	return err
}

// nothingHere returns, for a read that found n things of the caller's org on this cell, the org's org-moved error
// (503, naming the cell) when n is 0 and the org has moved to another cell, so that a client of the old cell never
// takes an empty answer (a listing, an export, a chain, a quota or a preview with nothing in it) for the org's
// state. It returns nil otherwise, and the read's answer stands. Every read of an org's data asks it: not-found answers
// through the error handler (movedAway), the others on their own empty answer. It asks the database only when n is
// 0, so a read that finds something pays nothing, and only of the caller's own org, so no org's answers change with
// another org's move.
func (s *Server) nothingHere(c echo.Context, n int) error {
	cl := caller(c)
	if n > 0 || s.orgMovedAway == nil || cl == nil {
		return nil
	}
	return s.orgMovedAway(c.Request().Context(), cl.Org)
}

func (s *Server) problemFor(err error, c echo.Context) Problem {
	requestID := c.Response().Header().Get(echo.HeaderXRequestID)
	if s.translateError != nil {
		err = s.translateError(err)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return echoProblem(he, requestID)
	}
	var de *catalog.Error
	if !errors.As(err, &de) || de.Code == catalog.EINTERNAL {
		return Problem{Type: "internal", Title: http.StatusText(http.StatusInternalServerError), Status: http.StatusInternalServerError, Detail: "Internal error.", RequestID: requestID}
	}
	status, ok := codes[de.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	typ := de.Type
	if typ == "" {
		typ = de.Code
	}
	return Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: de.Message, Field: de.Field, RequestID: requestID}
}

// echoProblem renders Echo's own errors (unknown route, wrong method, oversized body) in the same form.
func echoProblem(he *echo.HTTPError, requestID string) Problem {
	p := Problem{Status: he.Code, Title: http.StatusText(he.Code), RequestID: requestID}
	switch he.Code {
	case http.StatusNotFound:
		p.Type, p.Detail = "route-not-found", "no such route"
	case http.StatusMethodNotAllowed:
		p.Type, p.Detail = "method-not-allowed", "the route does not take this method"
	case http.StatusRequestEntityTooLarge:
		p.Type, p.Detail = "body-too-large", "the request body is over its size limit"
	default:
		p.Type, p.Detail = "http-error", http.StatusText(he.Code)
		if he.Code >= http.StatusInternalServerError {
			p.Type, p.Detail = "internal", "Internal error."
		}
	}
	return p
}

func writeProblem(c echo.Context, p Problem) {
	c.Response().Header().Set(echo.HeaderContentType, problemContentType)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(p.Status)
		return
	}
	_ = c.JSON(p.Status, p)
}

// gatewayError is the body Adobe's API gateway answers with before a request reaches a service.
type gatewayError struct {
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// Gateway errors, with Adobe's codes and messages.
var (
	errTokenMissing  = gatewayError{"403010", "Oauth token is missing."}
	errTokenInvalid  = gatewayError{"401013", "Oauth token is not valid"}
	errAPIKeyMissing = gatewayError{"403000", "Api Key is required"}
	errOrgMissing    = gatewayError{"400003", "Missing header"}
	errOrgMismatch   = gatewayError{"403025", "Profile is not valid"}
)

func gatewayStatus(e gatewayError) int {
	switch e.ErrorCode[:3] {
	case "400":
		return http.StatusBadRequest
	case "401":
		return http.StatusUnauthorized
	}
	return http.StatusForbidden
}
