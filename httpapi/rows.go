package httpapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
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
	maxEventLine    = 1 << 20   // the longest single event
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
	body := http.MaxBytesReader(c.Response(), req.Body, MaxRowsBody)
	events, readErr := readEvents(body, kind)
	res, err := s.rows.Ingest(req.Context(), caller(c), id, events, catalog.IngestOptions{ChunkCommitted: s.chunkCommitted})
	if err != nil {
		return err
	}
	var tooLarge *http.MaxBytesError
	if errors.As(*readErr, &tooLarge) {
		return catalog.Errorf(catalog.ETOOLARGE,
			"the body is over the %d-byte limit; the %d rows before the limit were stored, nothing after it", MaxRowsBody, res.Accepted)
	}
	out := ingestResponse{Accepted: res.Accepted, Rejected: res.Rejected, ExpiredOnArrival: res.ExpiredOnArrival, Errors: []lineError{}}
	for _, e := range res.Errors {
		out.Errors = append(out.Errors, lineError{Line: e.Line, Reason: e.Reason})
	}
	return c.JSON(http.StatusOK, out)
}

func rowsContentType(c echo.Context) (string, error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != mimeNDJSON && mt != echo.MIMEApplicationJSON) {
		return "", &catalog.Error{Code: catalog.EUNSUPPORTED, Type: "unsupported-content-type", Field: "Content-Type",
			Message: fmt.Sprintf("%s: rows are sent as application/x-ndjson (one event per line) or application/json (an array of events), got %q", errContentType, ct)}
	}
	return mt, nil
}

// readEvents streams the events of a body, never holding it whole. The error it points to is set once the sequence
// ends, when the body itself could not be read to its end (a size limit, a broken connection).
func readEvents(body io.Reader, kind string) (iter.Seq[catalog.RawEvent], *error) {
	var readErr error
	if kind == mimeNDJSON {
		return ndjsonEvents(body, &readErr), &readErr
	}
	return arrayEvents(body, &readErr), &readErr
}

func ndjsonEvents(body io.Reader, readErr *error) iter.Seq[catalog.RawEvent] {
	return func(yield func(catalog.RawEvent) bool) {
		r := bufio.NewReaderSize(body, 64<<10)
		for line := 1; ; line++ {
			data, tooLong, err := readLine(r)
			if len(bytes.TrimSpace(data)) > 0 || tooLong {
				ev := catalog.RawEvent{Line: line, Data: data}
				if tooLong {
					ev = catalog.RawEvent{Line: line, Err: catalog.Errorf(catalog.EINVALID, "the event is longer than %d bytes", maxEventLine)}
				}
				if !yield(ev) {
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					*readErr = err
				}
				return
			}
		}
	}
}

// readLine reads one line, discarding the rest of a line longer than maxEventLine.
func readLine(r *bufio.Reader) ([]byte, bool, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) <= maxEventLine {
			line = append(line, chunk...)
		} else {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return nil, true, err
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, false, err
		}
	}
}

func arrayEvents(body io.Reader, readErr *error) iter.Seq[catalog.RawEvent] {
	return func(yield func(catalog.RawEvent) bool) {
		dec := json.NewDecoder(body)
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			if isReadError(err) {
				*readErr = err
			}
			yield(catalog.RawEvent{Line: 1, Err: catalog.Errorf(catalog.EINVALID, "an application/json body must be a JSON array of events")})
			return
		}
		for i := 1; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if isReadError(err) {
					*readErr = err
				}
				// A syntax error leaves the decoder lost: the rest of the array cannot be read.
				yield(catalog.RawEvent{Line: i, Err: catalog.Errorf(catalog.EINVALID, "element %d and everything after it is not valid JSON: %v", i, err)})
				return
			}
			if !yield(catalog.RawEvent{Line: i, Data: raw}) {
				return
			}
		}
	}
}

func isReadError(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &syntax) && !errors.As(err, &typ)
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
		q.Set("cursor", encodeCursor(catalog.RowCursor{Timestamp: last.Timestamp, ID: last.ID}))
		links["next"] = link{Href: c.Request().URL.Path + "?" + q.Encode()}
	}
	var buf bytes.Buffer
	if err := writeRowsPage(&buf, rows, links); err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, buf.Bytes())
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
	return doc, nil
}

func parseRowFilter(c echo.Context) (catalog.RowFilter, error) {
	f := catalog.RowFilter{Store: catalog.LakeHouse, Limit: defaultRowLimit}
	if v := c.QueryParam("store"); v != "" {
		f.Store = catalog.Store(v)
		if !f.Store.Valid() {
			return f, catalog.Invalid("invalid-parameter", "store", "store must be adobe_lakeHouse or adobe_unifiedProfile, got %q", v)
		}
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRowLimit {
			return f, catalog.Invalid("invalid-parameter", "limit", "limit must be an integer from 1 to %d, got %q", maxRowLimit, v)
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
			return f, catalog.Invalid("invalid-parameter", p.name, "%s must be an RFC 3339 time such as 2026-01-31T00:00:00Z, got %q", p.name, v)
		}
		*p.dst = &t
	}
	if v := c.QueryParam("cursor"); v != "" {
		cur, err := decodeCursor(v)
		if err != nil {
			return f, catalog.Invalid("invalid-parameter", "cursor", "cursor %q is not one this service issued; take it from _links.next.href", v)
		}
		f.After = &cur
	}
	return f, nil
}

func encodeCursor(cur catalog.RowCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cur.Timestamp.UTC().Format(time.RFC3339Nano) + "|" + cur.ID))
}

func decodeCursor(v string) (catalog.RowCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return catalog.RowCursor{}, err
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return catalog.RowCursor{}, errors.New("no separator")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	return catalog.RowCursor{Timestamp: t, ID: id}, err
}

func (s *Server) deleteRow(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	rowID, err := url.PathUnescape(c.Param("rowId"))
	if err != nil {
		return catalog.Invalid("invalid-parameter", "rowId", "the row id in the path is not valid percent-encoding")
	}
	if err := s.rows.DeleteRow(c.Request().Context(), caller(c), id, rowID); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, []string{"@/dataSets/" + id + "/rows/" + url.PathEscape(rowID)})
}
