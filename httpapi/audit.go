package httpapi

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// auditPrefix is the base path of Adobe's Audit Query API; the audit routes are served under it as well as at the
// root. It is not the catalog's prefix: Adobe serves audit at /data/foundation/audit.
const auditPrefix = "/data/foundation"

// registerAudit adds the Audit Query routes when the server has an audit service.
func (s *Server) registerAudit(e *echo.Echo) {
	if s.audit == nil {
		return
	}
	read := requireScope(catalog.ScopeAuditRead)
	for _, prefix := range []string{"", auditPrefix} {
		g := e.Group(prefix, s.authenticate, s.checkParams)
		g.GET("/audit/events", s.listAuditEvents, read, s.listing)
		g.GET("/audit/export", s.exportAuditEvents, read, s.long)
		g.GET("/audit/verify", s.verifyAudit, read, s.long)
	}
}

// auditEventDoc is an event in the field names of Adobe's Audit Query API, plus this service's details and the
// event's place in its org's hash chain.
type auditEventDoc struct {
	ID          string         `json:"id"`
	RequestID   string         `json:"requestId"`
	AssetType   string         `json:"assetType"`
	AssetID     string         `json:"assetId"`
	AssetName   string         `json:"assetName"`
	Action      string         `json:"action"`
	Status      string         `json:"status"`
	FailureCode string         `json:"failureCode"`
	Timestamp   string         `json:"timestamp"`
	Version     string         `json:"version"`
	ImsOrgID    string         `json:"imsOrgId"`
	SandboxName string         `json:"sandboxName"`
	UserEmail   string         `json:"userEmail"`
	ClientID    string         `json:"clientId"`
	EventType   string         `json:"eventType"`
	Details     map[string]any `json:"details"`
	Chain       auditChainDoc  `json:"chain"`
}

type auditChainDoc struct {
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prevHash"`
	Hash     string `json:"hash"`
}

func newAuditEventDoc(ev *audit.Event) auditEventDoc {
	details := ev.Details
	if details == nil {
		details = map[string]any{}
	}
	return auditEventDoc{
		ID: ev.ID, RequestID: ev.RequestID, AssetType: ev.AssetType, AssetID: ev.AssetID, AssetName: ev.AssetName,
		Action: ev.Action, Status: ev.Status, Timestamp: ev.Timestamp.UTC().Format(audit.TimestampLayout), Version: "1.0",
		ImsOrgID: ev.Org, SandboxName: ev.Sandbox, UserEmail: ev.User, ClientID: ev.ClientID, EventType: "Core",
		Details: details, Chain: auditChainDoc{Seq: ev.Seq, PrevHash: ev.PrevHash, Hash: ev.Hash},
	}
}

// auditPage is a page of events in Adobe's HAL shape.
type auditPage struct {
	Embedded struct {
		Events []auditEventDoc `json:"events"`
	} `json:"_embedded"`
	Links   map[string]halLink `json:"_links"`
	Page    auditPageInfo      `json:"page"`
	QueryID string             `json:"queryId"`
}

type halLink struct {
	Href      string `json:"href"`
	Templated bool   `json:"templated,omitempty"`
}

// auditPageInfo is Adobe's page object. number counts from 1, as Adobe's example shows it (start=0 is page 1).
// Two fields are this service's additions: totalElementsCapped says that counting stopped at audit.TotalCap (there
// are more events than totalElements, and totalPages covers only those counted; follow next to the end), and
// totalElementsEstimated that totalElements is Postgres' estimate, because an exact count would have taken too
// long. The next link, not the total, says whether more events follow.
type auditPageInfo struct {
	Size                   int  `json:"size"`
	TotalElements          int  `json:"totalElements"`
	TotalPages             int  `json:"totalPages"`
	Number                 int  `json:"number"`
	TotalElementsCapped    bool `json:"totalElementsCapped"`
	TotalElementsEstimated bool `json:"totalElementsEstimated"`
}

// auditParams reads the query parameters; an empty one counts as absent, as Adobe's Postman collection sends them
// (property=&start=&queryId=).
func auditParams(c echo.Context) audit.Params {
	qp := c.QueryParams()
	p := audit.Params{OrderBy: qp.Get("orderBy"), Limit: qp.Get("limit"), Start: qp.Get("start"), QueryID: qp.Get("queryId")}
	for _, v := range qp["property"] {
		if v != "" {
			p.Property = append(p.Property, v)
		}
	}
	return p
}

func (s *Server) listAuditEvents(c echo.Context) error {
	q, err := audit.ParseQuery(auditParams(c))
	if err != nil {
		return err
	}
	page, err := s.audit.FindEvents(c.Request().Context(), caller(c), q)
	if err != nil {
		return err
	}
	if err := s.nothingHere(c, len(page.Events)); err != nil {
		return err
	}
	doc := auditPage{QueryID: q.ID()}
	doc.Embedded.Events = make([]auditEventDoc, 0, len(page.Events))
	for _, ev := range page.Events {
		doc.Embedded.Events = append(doc.Embedded.Events, newAuditEventDoc(ev))
	}
	path := c.Request().URL.Path
	limit := strconv.Itoa(q.Limit)
	doc.Links = map[string]halLink{
		"self": {Href: path + "?" + q.Encode(true)},
		"page": {Href: path + "?queryId=" + doc.QueryID + "&limit=" + limit + "{&start}", Templated: true},
	}
	if page.More {
		doc.Links["next"] = halLink{Href: path + "?queryId=" + doc.QueryID + "&start=" + strconv.Itoa(q.Start+q.Limit) + "&limit=" + limit}
	}
	doc.Page = auditPageInfo{
		Size: q.Limit, TotalElements: page.Total, TotalPages: (page.Total + q.Limit - 1) / q.Limit,
		Number: q.Start/q.Limit + 1, TotalElementsCapped: page.TotalCapped, TotalElementsEstimated: page.TotalEstimated,
	}
	return c.JSON(http.StatusOK, doc)
}

// auditCSVHeader names the columns of a CSV export, in order.
var auditCSVHeader = []string{
	"id", "timestamp", "imsOrgId", "sandboxName", "requestId", "assetType", "assetId", "assetName", "action", "status",
	"userEmail", "clientId", "details", "seq", "prevHash", "hash",
}

// exportAuditEvents streams every event the filters match from the last 365 days, as CSV (the default, as Adobe
// exports) or as a JSON array. The events come in pages read with a database connection that is released before
// the page is written, and each page must reach the client within the write timeout: a client that stops reading
// holds no connection, and is cut off once a page has waited that long. Nothing is sent until the first page is
// read, so an error before then is an ordinary problem response; an error after that cuts the connection, so that
// a client never takes a truncated export for a whole one.
func (s *Server) exportAuditEvents(c echo.Context) error {
	format := c.QueryParam("format")
	if format == "" {
		format = "csv"
	}
	if format != "csv" && format != "json" {
		return catalog.Invalid("invalid-format", "format", "format must be csv or json, got %q", catalog.Clip(format))
	}
	p := auditParams(c)
	// An export has no pages: limit and start, which the next links carry, do not apply.
	p.Limit, p.Start = "", ""
	q, err := audit.ParseQuery(p)
	if err != nil {
		return err
	}
	res := c.Response()
	filename := fmt.Sprintf("audit-events-%s.%s", time.Now().UTC().Format("20060102T150405Z"), format)
	res.Header().Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	if format == "csv" {
		res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	} else {
		res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	// The buffer holds the start of the body until the first page is written: until then nothing is committed.
	buf := bufio.NewWriterSize(res, 64<<10)
	w := newExportWriter(format, buf)
	n := 0
	err = s.audit.ExportEvents(c.Request().Context(), caller(c), q, func(page []*audit.Event) error {
		if err := s.extendWriteDeadline(res); err != nil {
			return err
		}
		for _, ev := range page {
			if err := w.write(ev); err != nil {
				return err
			}
			n++
		}
		if err := buf.Flush(); err != nil {
			return err
		}
		if err := http.NewResponseController(res).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	})
	if err == nil {
		// An export without events has sent nothing yet (its header waits in buf): it can still say the org moved.
		err = s.nothingHere(c, n)
	}
	if err == nil {
		err = w.close()
	}
	if err == nil {
		err = s.extendWriteDeadline(res)
	}
	if err == nil {
		err = buf.Flush()
	}
	if err != nil {
		if !res.Committed {
			res.Header().Del("Content-Disposition")
			return err
		}
		s.logger.ErrorContext(c.Request().Context(), "audit export failed mid-stream; cutting the connection",
			slog.String("request_id", res.Header().Get(echo.HeaderXRequestID)), slog.Int("events_sent", n), slog.Any("error", err))
		abortResponse(res)
		return nil
	}
	if !res.Committed {
		res.WriteHeader(http.StatusOK)
	}
	return nil
}

// abortResponse closes the connection under a response already started, without the end of a chunked body, so the
// client sees the transfer fail.
func abortResponse(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// exportWriter writes events in one export format.
type exportWriter struct {
	format string
	csv    *csv.Writer
	out    *bufio.Writer
	n      int
}

func newExportWriter(format string, out *bufio.Writer) *exportWriter {
	w := &exportWriter{format: format, out: out}
	if format == "csv" {
		w.csv = csv.NewWriter(out)
		_ = w.csv.Write(auditCSVHeader)
	} else {
		_, _ = out.WriteString("[")
	}
	return w
}

func (w *exportWriter) write(ev *audit.Event) error {
	doc := newAuditEventDoc(ev)
	defer func() { w.n++ }()
	if w.csv != nil {
		details, err := marshal(doc.Details)
		if err != nil {
			return err
		}
		err = w.csv.Write(csvCells(
			doc.ID, doc.Timestamp, doc.ImsOrgID, doc.SandboxName, doc.RequestID, doc.AssetType, doc.AssetID, doc.AssetName,
			doc.Action, doc.Status, doc.UserEmail, doc.ClientID, string(details), strconv.FormatInt(doc.Chain.Seq, 10),
			doc.Chain.PrevHash, doc.Chain.Hash,
		))
		if err != nil {
			return err
		}
		// csv.Writer keeps its own buffer: hand each record on to out, whose size decides when bytes leave.
		w.csv.Flush()
		return w.csv.Error()
	}
	raw, err := marshal(doc)
	if err != nil {
		return err
	}
	if w.n > 0 {
		_ = w.out.WriteByte(',')
	}
	_, err = w.out.Write(raw)
	return err
}

// csvCells are the cells of one CSV record, each neutralised as OWASP recommends against CSV injection: a cell
// that starts with =, +, -, @, a tab or a carriage return is written after a single quote, so that a spreadsheet
// opening the export shows it as text instead of running it as a formula (=1+2 from a client's X-Request-ID,
// @SUM(1+1)*cmd|' /C calc'!A0 from a dataset's name). The JSON export carries the values unchanged.
func csvCells(cells ...string) []string {
	for i, c := range cells {
		if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
			cells[i] = "'" + c
		}
	}
	return cells
}

func (w *exportWriter) close() error {
	if w.csv != nil {
		w.csv.Flush()
		return w.csv.Error()
	}
	_, err := w.out.WriteString("]\n")
	return err
}

// verificationDoc is the answer of GET /audit/verify.
type verificationDoc struct {
	Valid       bool           `json:"valid"`
	Events      int64          `json:"events"`
	ImsOrgID    string         `json:"imsOrgId"`
	SandboxName string         `json:"sandboxName"`
	Head        chainPointDoc  `json:"head"`
	Anchor      chainPointDoc  `json:"anchor"`
	FirstBroken *chainBreakDoc `json:"firstBroken"`
}

type chainPointDoc struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

type chainBreakDoc struct {
	Seq         int64  `json:"seq"`
	ID          string `json:"id,omitempty"`
	SandboxName string `json:"sandboxName,omitempty"`
	Timestamp   string `json:"timestamp,omitempty"`
	Reason      string `json:"reason"`
	Detail      string `json:"detail"`
}

// verifyAudit walks the caller's org's chain. The chain is per org, so the walk covers every sandbox of the org,
// and a break anywhere makes it invalid; the answer speaks for the sandbox the request names: its events counted,
// its newest event as the head, and of a break at another sandbox's event only the seq and the reason.
func (s *Server) verifyAudit(c echo.Context) error {
	v, err := s.audit.VerifyChain(c.Request().Context(), caller(c))
	if err != nil {
		return err
	}
	// An empty chain verifies: on the cell an org left, that would vouch for a chain it no longer holds.
	if err := s.nothingHere(c, int(min(v.Events, 1))); err != nil {
		return err
	}
	doc := verificationDoc{
		Valid: v.Valid, Events: v.Events, ImsOrgID: v.Org, SandboxName: v.Sandbox,
		Head: chainPointDoc{Seq: v.Head.Seq, Hash: v.Head.Hash}, Anchor: chainPointDoc{Seq: v.Anchor.Seq, Hash: v.Anchor.Hash},
	}
	if b := v.FirstBroken; b != nil {
		doc.FirstBroken = &chainBreakDoc{Seq: b.Seq, ID: b.ID, SandboxName: b.Sandbox, Reason: b.Reason, Detail: b.Detail}
		if b.Timestamp != nil {
			doc.FirstBroken.Timestamp = b.Timestamp.UTC().Format(audit.TimestampLayout)
		}
	}
	return c.JSON(http.StatusOK, doc)
}
