package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// Limits of row ingestion and reads.
const (
	MaxRowsBody     = 100 << 20 // the largest ingestion body
	defaultRowLimit = 100
	maxRowLimit     = 1000
)

const mimeNDJSON = "application/x-ndjson"

// ingestResponse is the answer to an ingestion.
type ingestResponse struct {
	Accepted         int         `json:"accepted"`
	Rejected         int         `json:"rejected"`
	ExpiredOnArrival int         `json:"expiredOnArrival"`
	Errors           []lineError `json:"errors"`
}

type lineError struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func (s *Server) ingestRows(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	kind, err := rowsContentType(c)
	if err != nil {
		return err
	}
	req := c.Request()
	if req.ContentLength > MaxRowsBody {
		return catalog.Errorf(catalog.ETOOLARGE, "the body is %d bytes; ingestion takes at most %d bytes per request", req.ContentLength, MaxRowsBody)
	}
	w, err := s.rows.BeginIngest(req.Context(), caller(c), id, catalog.IngestOptions{ChunkCommitted: s.chunkCommitted})
	if err != nil {
		return err
	}
	events := catalog.NewEventReader(http.MaxBytesReader(c.Response(), req.Body, MaxRowsBody), kind, w.Rules())
	res := &catalog.IngestResult{}
	err = w.Write(req.Context(), events.Rows(res), res)
	if err == nil {
		err = bodyError(events.Err())
	}
	if err != nil {
		return s.ingestFailed(c, res, err)
	}
	return c.JSON(http.StatusOK, newIngestResponse(res))
}

func newIngestResponse(res *catalog.IngestResult) ingestResponse {
	out := ingestResponse{Accepted: res.Accepted, Rejected: res.Rejected, ExpiredOnArrival: res.ExpiredOnArrival, Errors: []lineError{}}
	for _, e := range res.Errors {
		out.Errors = append(out.Errors, lineError{Line: e.Line, Reason: e.Reason})
	}
	return out
}

// bodyError is the error an ingestion answers for a body that could not be read to its end: over the size limit,
// or not a whole JSON array. A broken connection is nobody's to answer.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	var domain *catalog.Error
	switch {
	case errors.As(err, &tooLarge):
		return catalog.Errorf(catalog.ETOOLARGE, "the body is over the %d-byte limit of an ingestion", MaxRowsBody)
	case errors.As(err, &domain):
		return err
	}
	return nil
}

// ingestProblem is the answer to an ingestion that failed after it had stored rows: the problem, and what was
// committed before it, in the fields of a successful answer, so that a client knows what to send again.
type ingestProblem struct {
	Problem
	ingestResponse
	// CommittedThroughLine is the last line (or array position) whose fate is committed: the lines up to it are
	// stored or rejected, and none after it is stored, so a client sends again only the lines after it.
	CommittedThroughLine int `json:"committedThroughLine"`
}

// The most of a body's rest an ingestion stopped by its dataset's state reads and drops before it answers.
const (
	leftoverBytes = 1 << 20
	leftoverTime  = time.Second
)

// ingestFailed answers an ingestion that stopped on err. Chunks commit as the body streams in, so a failure may
// come after rows were stored: the answer then says how many, whatever its status, and never a bare error.
func (s *Server) ingestFailed(c echo.Context, res *catalog.IngestResult, err error) error {
	if res == nil || res.Accepted+res.Rejected == 0 {
		return err
	}
	if code := catalog.ErrorCode(err); code == catalog.ECONFLICT || code == catalog.EUNAVAILABLE {
		// The ingestion stopped on the dataset's state (deleted, or its org fenced), not on the body: a client still
		// sending the rest gets this answer, not a reset.
		if body, ok := c.Request().Body.(*deadlineBody); ok {
			body.drain(leftoverBytes, leftoverTime)
		}
	}
	p := s.problemFor(err, c)
	if p.Status >= http.StatusInternalServerError {
		s.logger.ErrorContext(c.Request().Context(), "ingestion failed after committing rows",
			slog.String("request_id", p.RequestID), slog.Int("rows_committed", res.Accepted), slog.Any("error", err))
	}
	p.Detail += fmt.Sprintf(" Before this, the lines up to %d were committed: %d rows of the body were stored and stay stored, and %d lines were rejected; no line after %d was stored, so send again only those.",
		res.CommittedThrough, res.Accepted, res.Rejected, res.CommittedThrough)
	if after, ok := retryAfter[catalog.ErrorCode(err)]; ok {
		c.Response().Header().Set("Retry-After", after) // as errorHandler does for a bare problem
	}
	c.Response().Header().Set(echo.HeaderContentType, problemContentType)
	return c.JSON(p.Status, ingestProblem{Problem: p, ingestResponse: newIngestResponse(res), CommittedThroughLine: res.CommittedThrough})
}

// rowsContentType returns the format of an ingestion body, as its Content-Type declares it.
func rowsContentType(c echo.Context) (catalog.EventFormat, error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != mimeNDJSON && mt != echo.MIMEApplicationJSON) {
		return 0, &catalog.Error{Code: catalog.EUNSUPPORTED, Type: "unsupported-content-type", Field: "Content-Type",
			Message: fmt.Sprintf("%s: rows are sent as application/x-ndjson (one event per line) or application/json (an array of events), got %q", errContentType, catalog.Clip(ct))}
	}
	if mt == mimeNDJSON {
		return catalog.NDJSON, nil
	}
	return catalog.JSONArray, nil
}

// link is a HAL link.
type link struct {
	Href string `json:"href"`
}

// maxRowsAnswer bounds the rows' JSON in one page of GET …/rows: a page stops before the row that would take it
// past this, and links the next page, so a read of large rows costs a few MiB of memory instead of the limit times
// the rows' size. A page always holds at least one row, which is at most 1 MiB as ingested.
const maxRowsAnswer = 4 << 20

func (s *Server) listRows(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	f, err := parseRowFilter(c)
	if err != nil {
		return err
	}
	f.MaxBytes = maxRowsAnswer
	found, err := s.rows.FindRows(c.Request().Context(), caller(c), id, f)
	if err != nil {
		return err
	}
	rows := found.Rows
	links := map[string]link{"self": {Href: c.Request().URL.RequestURI()}}
	if len(rows) > 0 && (len(rows) == f.Limit || found.Cut) {
		last := rows[len(rows)-1]
		q := c.Request().URL.Query()
		q.Set("cursor", encodeCursor(catalog.RowCursor{Timestamp: last.Timestamp, ID: last.ID, ReplacedAt: last.ReplacedAt}))
		links["next"] = link{Href: c.Request().URL.Path + "?" + q.Encode()}
	}
	var buf bytes.Buffer
	if err := writeRowsPage(&buf, rows, links); err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	return writeJSON(c, http.StatusOK, buf.Bytes())
}

// rowDocument is a row as the API shows it: the event's own fields with the service's beside them.
func rowDocument(r catalog.Row) (map[string]any, error) {
	doc := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(r.Payload))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode stored row %s: %w", r.ID, err)
	}
	doc["_id"] = r.ID
	doc["timestamp"] = r.Timestamp.UTC().Format(time.RFC3339Nano)
	doc["_ingestedAt"] = r.IngestedAt.UTC().Format(time.RFC3339Nano)
	if r.Expiry != nil {
		doc["_expiresAt"] = r.Expiry.UTC().Format(time.RFC3339Nano)
	}
	// A service field always wins; an absent one must not be taken from the event either (a row stored before
	// ingestion refused them).
	for _, k := range catalog.ServiceRowFields {
		delete(doc, k)
	}
	if r.Expired {
		doc["_expired"] = true
	}
	if r.ReplacedAt != nil {
		doc["_replacedAt"] = r.ReplacedAt.UTC().Format(time.RFC3339Nano)
	}
	return doc, nil
}

func parseRowFilter(c echo.Context) (catalog.RowFilter, error) {
	f := catalog.RowFilter{Store: catalog.LakeHouse, Limit: defaultRowLimit}
	if v := c.QueryParam("store"); v != "" {
		f.Store = catalog.Store(v)
		if !f.Store.Valid() {
			return f, catalog.Invalid("invalid-parameter", "store", "store must be adobe_lakeHouse or adobe_unifiedProfile, got %q", catalog.Clip(v))
		}
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRowLimit {
			return f, catalog.Invalid("invalid-parameter", "limit", "limit must be an integer from 1 to %d, got %q", maxRowLimit, catalog.Clip(v))
		}
		f.Limit = n
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"start", &f.Start}, {"end", &f.End}} {
		v := c.QueryParam(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, catalog.Invalid("invalid-parameter", p.name, "%s must be an RFC 3339 time such as 2026-01-31T00:00:00Z, got %q", p.name, catalog.Clip(v))
		}
		*p.dst = &t
	}
	if v := c.QueryParam("includeExpired"); v != "" {
		include := v == "true"
		if !include && v != "false" {
			return f, catalog.Invalid("invalid-parameter", "includeExpired", "includeExpired must be true or false, got %q", catalog.Clip(v))
		}
		if include && !caller(c).HasScope(catalog.ScopeRetentionHold) {
			return f, &catalog.Error{Code: catalog.EFORBIDDEN, Type: "missing-scope", Field: "includeExpired",
				Message: "includeExpired=true reads the expired rows a legal hold keeps, and needs the retention.hold scope, which the token does not grant"}
		}
		f.IncludeExpired = include
	}
	if v := c.QueryParam("cursor"); v != "" {
		cur, err := decodeCursor(v)
		if err != nil {
			return f, catalog.Invalid("invalid-parameter", "cursor", "cursor %q is not one this service issued; take it from _links.next.href", catalog.Clip(v))
		}
		f.After = &cur
	}
	return f, nil
}

// encodeCursor writes a cursor as "timestamp|_id", or "timestamp~replacedAt|_id" after a version a hold kept: the
// _id may hold any character, so it comes last, and cursors issued before kept versions existed still read.
func encodeCursor(cur catalog.RowCursor) string {
	pos := cur.Timestamp.UTC().Format(time.RFC3339Nano)
	if cur.ReplacedAt != nil {
		pos += "~" + cur.ReplacedAt.UTC().Format(time.RFC3339Nano)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(pos + "|" + cur.ID))
}

func decodeCursor(v string) (catalog.RowCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return catalog.RowCursor{}, err
	}
	pos, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return catalog.RowCursor{}, errors.New("no separator")
	}
	if err := catalog.CheckText("cursor", id); err != nil {
		return catalog.RowCursor{}, err
	}
	cur := catalog.RowCursor{ID: id}
	if ts, replaced, kept := strings.Cut(pos, "~"); kept {
		r, err := time.Parse(time.RFC3339Nano, replaced)
		if err != nil {
			return cur, err
		}
		cur.ReplacedAt, pos = &r, ts
	}
	cur.Timestamp, err = time.Parse(time.RFC3339Nano, pos)
	return cur, err
}

func (s *Server) deleteRow(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	rowID := c.Param("rowId") // decoded once, by checkParams
	if err := s.rows.DeleteRow(c.Request().Context(), caller(c), id, rowID); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, []string{"@/dataSets/" + id + "/rows/" + url.PathEscape(rowID)})
}
