package httpapi

import (
	"maps"
	"net/url"
	"slices"
	"strings"

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
				return catalog.Invalid("invalid-parameter", names[i], "the %s in the path, %q, is not valid percent-encoding", names[i], catalog.Clip(v))
			}
			if err := catalog.CheckText(names[i], d); err != nil {
				return err
			}
			decoded[i] = d
		}
		c.SetParamValues(decoded...)
		rawQuery := c.Request().URL.RawQuery
		query, err := url.ParseQuery(rawQuery)
		if err != nil {
			return catalog.Invalid("invalid-parameter", "query", "the query string is not valid: %s", catalog.Clip(err.Error()))
		}
		if len(rawQuery) > MaxQueryBytes {
			return queryTooLong(query, len(rawQuery))
		}
		for _, name := range slices.Sorted(maps.Keys(query)) {
			if err := catalog.CheckText("query", name); err != nil {
				return err
			}
			if err := checkTerms(name, query[name]); err != nil {
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

// MaxQueryBytes bounds a request's query string as sent: a listing's filters, its cursor or queryId. A client past
// it gets a 400 naming its largest parameter, before anything reaches the database; a queryId the service issued
// for a query within the bound fits it.
const MaxQueryBytes = 64 << 10

// MaxParameterTerms bounds the terms of one query parameter: its comma-separated items, over all its repetitions
// (tags=a:b,c:* has two, property=x&property=y two). Each term of a list filter costs the database a condition:
// 21,845 tags terms once exceeded the bind parameters a statement may take (a 500) and 20,000 took 1.4 s.
const MaxParameterTerms = 100

// checkTerms refuses a parameter of more than MaxParameterTerms terms, naming it.
func checkTerms(name string, values []string) error {
	n := len(values)
	for _, v := range values {
		n += strings.Count(v, ",")
	}
	if n > MaxParameterTerms {
		return catalog.Invalid("invalid-parameter", catalog.Clip(name),
			"%s has %d terms (comma-separated items over all its repetitions); a parameter takes at most %d", catalog.Clip(name), n, MaxParameterTerms)
	}
	return nil
}

// queryTooLong is the refusal of a query string of n bytes, past MaxQueryBytes: it names the parameter that takes
// the most of it, without quoting it.
func queryTooLong(query url.Values, n int) error {
	largest, most := "query", 0
	for _, name := range slices.Sorted(maps.Keys(query)) {
		size := len(name)
		for _, v := range query[name] {
			size += len(v)
		}
		if size > most {
			largest, most = name, size
		}
	}
	return catalog.Invalid("invalid-parameter", catalog.Clip(largest),
		"the query string has %d bytes, more than the %d a request may send; %s takes %d of them", n, MaxQueryBytes, catalog.Clip(largest), most)
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
