package httpapi

import (
	"maps"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// routeOnEscapedPath makes the router match the path as it was sent, percent-encoding and all, so that checkParams
// decodes every path parameter exactly once. Go keeps a decoded URL.Path and sets RawPath only when Path would not
// re-encode to what was sent, and Echo routes on RawPath when it is set and on Path otherwise: a row id sent as
// x%2Fy reached the handler still encoded, one sent as x%252Fy already decoded to x%2Fy, and decoding both again
// deleted the row x/y for either.
func routeOnEscapedPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		u.RawPath = u.EscapedPath()
		return next(c)
	}
}

// checkParams decodes the route's path parameters, once, and refuses a request whose path or query parameters hold
// text that no column can hold or compare (U+0000, bytes that are not UTF-8) or that is not valid percent-encoding,
// with a 400 naming the parameter, before any handler can pass it to SQL.
func (s *Server) checkParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		names, raw := c.ParamNames(), c.ParamValues()
		decoded := make([]string, len(raw))
		for i, v := range raw {
			d, err := url.PathUnescape(v)
			if err != nil {
				return catalog.Invalid("invalid-parameter", names[i], "the %s in the path, %q, is not valid percent-encoding", names[i], v)
			}
			if err := catalog.CheckText(names[i], d); err != nil {
				return err
			}
			decoded[i] = d
		}
		c.SetParamValues(decoded...)
		query, err := url.ParseQuery(c.Request().URL.RawQuery)
		if err != nil {
			return catalog.Invalid("invalid-parameter", "query", "the query string is not valid: %v", err)
		}
		for _, name := range slices.Sorted(maps.Keys(query)) {
			if err := catalog.CheckText("query", name); err != nil {
				return err
			}
			for _, v := range query[name] {
				if err := catalog.CheckText(name, v); err != nil {
					return err
				}
			}
		}
		return next(c)
	}
}

// maxRequestIDLength bounds a client's X-Request-ID, which every audit event of its request records.
const maxRequestIDLength = 128

// dropUnsoundRequestID removes a client's X-Request-ID unless it is 1 to maxRequestIDLength printable ASCII
// characters, so that the request id middleware makes a fresh one, which the answer shows. The id is written into
// every audit event of the request: one that was not UTF-8 failed the audited change with a 500, and a long one was
// copied into every event.
func dropUnsoundRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" && !soundRequestID(id) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

func soundRequestID(id string) bool {
	if len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
