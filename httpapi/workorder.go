package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acme/retention/catalog"
)

// MaxWorkOrderBody is the largest POST /workorder body: 100,000 identities of up to about 150 bytes each as JSON.
const MaxWorkOrderBody = 16 << 20

// workOrderRoutes registers Adobe's record-delete work orders on g (under /data/core/hygiene, and the root).
func (s *Server) workOrderRoutes(g *echo.Group) {
	read, create := requireScope(catalog.ScopeDatasetsRead), requireScope(catalog.ScopeWorkOrdersManage)
	g.GET("/workorder", s.listWorkOrders, read, s.listing)
	g.POST("/workorder", s.createWorkOrder, create)
	g.POST("/workorder/preview", s.previewWorkOrder, create, s.long)
	g.GET("/workorder/:WORKORDER_ID", s.getWorkOrder, read)
	g.PUT("/workorder/:WORKORDER_ID", s.updateWorkOrder, create)
	if s.manifests != nil {
		g.GET("/workorder/:WORKORDER_ID/datasets/:datasetId/deleted", func(c echo.Context) error {
			return s.streamManifest(c, catalog.Removal{Kind: catalog.RemovalWorkOrder, ID: c.Param("WORKORDER_ID"), DatasetID: c.Param("datasetId")})
		}, requireScope(catalog.ScopeAuditRead), s.long)
	}
}

// isWorkOrderRoute tells the error handler to add Adobe's work-order error fields (error_code, message).
func isWorkOrderRoute(path string) bool {
	return strings.HasPrefix(path, "/workorder") || strings.HasPrefix(path, hygienePrefix+"/workorder")
}

// workOrderTargets are the stores an order removes rows from, in Adobe's names of the services that hold them.
var workOrderTargets = []string{"datalake", "profile"}

// workOrderDoc is a work order in the shape of Adobe's Data Hygiene API. identityCount, rowsDeleted, reason,
// completedAt and parts are this service's additions.
type workOrderDoc struct {
	WorkOrderID          string             `json:"workorderId"`
	OrgID                string             `json:"orgId"`
	SandboxName          string             `json:"sandboxName"`
	Action               string             `json:"action"`
	CreatedAt            string             `json:"createdAt"`
	UpdatedAt            string             `json:"updatedAt"`
	OperationCount       int                `json:"operationCount"`
	TargetServices       []string           `json:"targetServices"`
	Status               string             `json:"status"`
	Reason               string             `json:"reason,omitempty"`
	CreatedBy            string             `json:"createdBy"`
	DatasetID            string             `json:"datasetId"`
	DatasetName          string             `json:"datasetName"`
	DisplayName          string             `json:"displayName"`
	Description          string             `json:"description"`
	IdentityCount        int                `json:"identityCount"`
	RowsDeleted          int64              `json:"rowsDeleted"`
	CompletedAt          *string            `json:"completedAt,omitempty"`
	ProductStatusDetails []productStatusDoc `json:"productStatusDetails"`
	Parts                []workOrderPartDoc `json:"parts,omitempty"`
}

// productStatusDoc is one store's progress, as Adobe's productStatusDetails: success once its rows are removed in
// every dataset of the order, waiting before.
type productStatusDoc struct {
	ProductName   string `json:"productName"`
	ProductStatus string `json:"productStatus"`
	CreatedAt     string `json:"createdAt"`
}

type workOrderPartDoc struct {
	DatasetID   string           `json:"datasetId"`
	DatasetName string           `json:"datasetName"`
	Status      string           `json:"status"`
	Reason      string           `json:"reason,omitempty"`
	RowsDeleted int64            `json:"rowsDeleted"`
	Stores      map[string]int64 `json:"stores"`
	CompletedAt *string          `json:"completedAt,omitempty"`
}

// productNames are Adobe's names of the products behind each store.
var productNames = map[catalog.Store]string{catalog.LakeHouse: "Data Management", catalog.Profile: "Profile Service"}

func newWorkOrderDoc(w *catalog.WorkOrder) workOrderDoc {
	doc := workOrderDoc{
		WorkOrderID: w.ID, OrgID: w.Org, SandboxName: w.Sandbox, Action: catalog.WorkOrderAction,
		CreatedAt: hygieneTime(w.Created), UpdatedAt: hygieneTime(w.Updated), OperationCount: w.IdentityCount,
		TargetServices: workOrderTargets, Status: string(w.Status), Reason: w.Reason, CreatedBy: w.CreatedBy,
		DatasetID: w.DatasetID, DatasetName: w.DatasetName, DisplayName: w.DisplayName, Description: w.Description,
		IdentityCount: w.IdentityCount, RowsDeleted: w.RowsDeleted, CompletedAt: optionalTime(w.CompletedAt),
		ProductStatusDetails: []productStatusDoc{},
	}
	status := "waiting"
	if w.Status == catalog.WorkOrderCompleted {
		status = "success"
	}
	for _, store := range catalog.Stores {
		doc.ProductStatusDetails = append(doc.ProductStatusDetails, productStatusDoc{ProductName: productNames[store],
			ProductStatus: status, CreatedAt: hygieneTime(w.Updated)})
	}
	for _, p := range w.Parts {
		stores := map[string]int64{}
		for st, n := range p.Stores {
			stores[string(st)] = n
		}
		doc.Parts = append(doc.Parts, workOrderPartDoc{DatasetID: p.DatasetID, DatasetName: p.DatasetName,
			Status: string(p.Status), Reason: p.Reason, RowsDeleted: p.RowsDeleted, Stores: stores,
			CompletedAt: optionalTime(p.CompletedAt)})
	}
	return doc
}

func workOrderID(c echo.Context) (string, error) {
	id := c.Param("WORKORDER_ID")
	return id, catalog.ValidateWorkOrderID(id)
}

// workOrderReadsPerOrg is how many work-order bodies of one org a replica reads and decodes at once: a body of
// 100,000 identities takes a core for a while, so an org's orders are read one after the other.
const workOrderReadsPerOrg = 1

// createWorkOrder answers 200, not 201, as Adobe's spec does: the order is accepted and runs later.
func (s *Server) createWorkOrder(c echo.Context) error {
	w, decoded, err := s.acceptWorkOrder(c)
	s.workOrderMetrics.observe(err, decoded)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, hygienePrefix+"/workorder/"+w.ID)
	return c.JSON(http.StatusOK, newWorkOrderDoc(w))
}

// tooManyWorkOrderReads is the refusal of an org's order body while another of its bodies is being read.
func (s *Server) tooManyWorkOrderReads(org string) error {
	return &catalog.Error{Code: catalog.EBUSY, Type: "too-many-workorder-reads", Message: fmt.Sprintf(
		"org %s already has %d work order being read on this server, its limit; send this one again when it has been answered",
		org, s.workOrderReads.max)}
}

// acceptWorkOrder reads, checks and stores an order; decoded is how many bytes of its body it read to decode. An
// order that no body could get past the org's bounds now (its orders in flight, a quota used up), or that comes
// while another of the org's orders is being read, is refused before its body is decoded: the body is discarded
// unread, so that an org sending orders past its bounds costs the service two index reads each, not the decoding
// of up to 100,000 identities (the victim's reads beside such a flood took 2.7 times a quiet service's).
func (s *Server) acceptWorkOrder(c echo.Context) (_ *catalog.WorkOrder, decoded int64, err error) {
	if err := requireJSON(c); err != nil {
		return nil, 0, err
	}
	org := caller(c).Org
	if !s.workOrderReads.acquire(org) {
		discardBody(c, MaxWorkOrderBody)
		return nil, 0, s.tooManyWorkOrderReads(org)
	}
	defer s.workOrderReads.release(org)
	if err := s.workOrders.CheckWorkOrderRoom(c.Request().Context(), caller(c)); err != nil {
		discardBody(c, MaxWorkOrderBody)
		return nil, 0, err
	}
	counted := &countingBody{ReadCloser: c.Request().Body}
	c.Request().Body = counted
	body, err := readJSONObjectMax(c, MaxWorkOrderBody)
	if err != nil {
		return nil, counted.n, err
	}
	create, err := catalog.ParseWorkOrderCreate(body)
	if err != nil {
		return nil, counted.n, err
	}
	w, err := s.workOrders.CreateWorkOrder(c.Request().Context(), caller(c), create)
	return w, counted.n, err
}

// discardBody reads a refused request's body to its end, at most most bytes, keeping and decoding none of it: the
// connection stays usable and the client reads the answer, where closing on a client still sending could reset
// the connection before it did. A client that asked to be told first (Expect: 100-continue) is never asked for
// its body; the connection is closed after the answer.
func discardBody(c echo.Context, most int64) {
	if strings.EqualFold(c.Request().Header.Get("Expect"), "100-continue") {
		return
	}
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(c.Response(), c.Request().Body, most))
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// workOrderMetrics count what POST /workorder cost the service: the bytes of a refused order's body that it read
// and decoded are work an org flooding it with orders past its bounds makes it do for nothing (the hostile suite's
// TestWorkOrderFloodLeavesOtherOrgsAlone judges by them).
type workOrderMetrics struct {
	creates      *prometheus.CounterVec
	refusedBytes prometheus.Counter
}

func newWorkOrderMetrics(reg *prometheus.Registry) *workOrderMetrics {
	m := &workOrderMetrics{
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_workorder_creates_total",
			Help: "POST /workorder requests by outcome: accepted, refused_unread (refused before the body was read), refused_read.",
		}, []string{"outcome"}),
		refusedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retention_workorder_refused_body_bytes_total",
			Help: "Bytes of POST /workorder bodies read and decoded for orders then refused.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.creates, m.refusedBytes)
	}
	return m
}

// observe counts one POST /workorder by its outcome: err nil, accepted; else refused after decoding bytes of its
// body, or unread when decoded is 0.
func (m *workOrderMetrics) observe(err error, decoded int64) {
	switch {
	case err == nil:
		m.creates.WithLabelValues("accepted").Inc()
	case decoded == 0:
		m.creates.WithLabelValues("refused_unread").Inc()
	default:
		m.creates.WithLabelValues("refused_read").Inc()
		m.refusedBytes.Add(float64(decoded))
	}
}

func (s *Server) getWorkOrder(c echo.Context) error {
	id, err := workOrderID(c)
	if err != nil {
		return err
	}
	w, err := s.workOrders.FindWorkOrder(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newWorkOrderDoc(w))
}

func (s *Server) updateWorkOrder(c echo.Context) error {
	id, err := workOrderID(c)
	if err != nil {
		return err
	}
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	u, err := catalog.ParseWorkOrderUpdate(body)
	if err != nil {
		return err
	}
	w, err := s.workOrders.UpdateWorkOrder(c.Request().Context(), caller(c), id, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newWorkOrderDoc(w))
}

// workOrderListDoc is a page of orders in Adobe's form.
type workOrderListDoc struct {
	Results []workOrderDoc           `json:"results"`
	Total   int                      `json:"total"`
	Count   int                      `json:"count"`
	Links   map[string]workOrderLink `json:"_links"`
}

type workOrderLink struct {
	Href      string `json:"href"`
	Templated bool   `json:"templated"`
}

func (s *Server) listWorkOrders(c echo.Context) error {
	f, err := parseWorkOrderFilter(c)
	if err != nil {
		return err
	}
	page, err := s.workOrders.FindWorkOrders(c.Request().Context(), caller(c), f)
	if err != nil {
		return err
	}
	if err := s.nothingHere(c, len(page.Results)); err != nil {
		return err
	}
	doc := workOrderListDoc{Results: make([]workOrderDoc, 0, len(page.Results)), Total: page.Total, Count: len(page.Results),
		Links: map[string]workOrderLink{"page": {Href: hygienePrefix + "/workorder?limit={limit}&page={page}", Templated: true}}}
	for _, w := range page.Results {
		doc.Results = append(doc.Results, newWorkOrderDoc(w))
	}
	if (f.Page+1)*f.Limit < page.Total {
		q := c.QueryParams()
		q.Set("page", strconv.Itoa(f.Page+1))
		q.Set("limit", strconv.Itoa(f.Limit))
		doc.Links["next"] = workOrderLink{Href: hygienePrefix + "/workorder?" + q.Encode()}
	}
	return c.JSON(http.StatusOK, doc)
}

// parseWorkOrderFilter reads the listing's parameters, Adobe's: limit, page, status, search, author, displayName,
// description, workorderId, fromDate with toDate (both or neither; filterDate for one day), orderBy. type may only
// be identity-delete; sandboxName and properties are accepted and ignored (an order is always read in the caller's
// sandbox). The first refused parameter, in that order, is the one the 400 names.
func parseWorkOrderFilter(c echo.Context) (catalog.WorkOrderFilter, error) {
	f := catalog.WorkOrderFilter{}
	var err error
	if f.Limit, err = intParam(c, "limit", catalog.DefaultExpirationLimit, 1, catalog.MaxExpirationLimit); err != nil {
		return f, err
	}
	if f.Page, err = intParam(c, "page", 0, 0, catalog.MaxExpirationPage); err != nil {
		return f, err
	}
	if f.Statuses, err = catalog.ParseWorkOrderStatuses(c.QueryParam("status")); err != nil {
		return f, err
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"search", &f.Search}, {"author", &f.Author}, {"displayName", &f.DisplayName}, {"description", &f.Description},
		{"workorderId", &f.WorkOrderID}} {
		if *p.dst = c.QueryParam(p.name); len(*p.dst) > catalog.MaxExpirationSearch {
			return f, catalog.Invalid("invalid-parameter", p.name, "%s must be at most %d bytes", p.name, catalog.MaxExpirationSearch)
		}
	}
	if t := c.QueryParam("type"); t != "" && t != catalog.WorkOrderAction {
		return f, catalog.Invalid("invalid-parameter", "type", "type must be %s, got %q", catalog.WorkOrderAction, catalog.Clip(t))
	}
	if (c.QueryParam("fromDate") == "") != (c.QueryParam("toDate") == "") {
		return f, catalog.Invalid("invalid-parameter", "fromDate", "fromDate and toDate go together: send both or neither")
	}
	if f.From, f.To, err = createdWindow(c); err != nil {
		return f, err
	}
	f.OrderBy, f.Desc, err = catalog.ParseWorkOrderOrder(c.QueryParam("orderBy"))
	return f, err
}

// createdWindow reads fromDate and toDate (dates or UTC date-times; a date toDate counts through its day), or
// filterDate, one whole day, into a half-open window of creation times.
func createdWindow(c echo.Context) (from, to *time.Time, err error) {
	bound := func(name string) (*time.Time, error) {
		v := c.QueryParam(name)
		if v == "" {
			return nil, nil
		}
		t, err := catalog.ParseExpiry(v)
		if err != nil {
			return nil, catalog.Invalid("invalid-parameter", name, "%s must be an ISO 8601 date or UTC date-time, got %q", name, catalog.Clip(v))
		}
		if name == "toDate" && len(v) == len(time.DateOnly) {
			t = t.AddDate(0, 0, 1)
		}
		return &t, nil
	}
	if from, err = bound("fromDate"); err != nil {
		return nil, nil, err
	}
	if to, err = bound("toDate"); err != nil {
		return nil, nil, err
	}
	if day := c.QueryParam("filterDate"); day != "" {
		t, err := time.Parse(time.DateOnly, day)
		if err != nil {
			return nil, nil, catalog.Invalid("invalid-parameter", "filterDate", "filterDate must be an ISO 8601 date (2030-12-31), got %q", catalog.Clip(day))
		}
		next := t.AddDate(0, 0, 1)
		from, to = later(from, &t), earlier(to, &next)
	}
	return from, to, nil
}

// identityQuotaDescriptions describe the record-delete quotas, in Adobe's words.
var identityQuotaDescriptions = map[string]string{
	catalog.QuotaDailyIdentities:   "The consumed number of deleted identities in all work order requests for the organization for today.",
	catalog.QuotaMonthlyIdentities: "The consumed number of deleted identities in all work order requests for the organization this month.",
}

// identityQuotas answers the record-delete quotas named by quotaType ("" for both).
func (s *Server) identityQuotas(c echo.Context, quotaType string) ([]quotaDoc, error) {
	if s.workOrders == nil {
		return nil, nil
	}
	qs, err := s.workOrders.IdentityQuotas(c.Request().Context(), caller(c))
	if err != nil {
		return nil, err
	}
	var out []quotaDoc
	for _, q := range qs {
		if quotaType == "" || quotaType == q.Name {
			out = append(out, quotaDoc{Name: q.Name, Description: identityQuotaDescriptions[q.Name], Consumed: q.Consumed, Quota: q.Quota})
		}
	}
	return out, nil
}

// workOrderErrorCode is Adobe's error_code of a work-order error: the status and 001 ("400001").
func workOrderErrorCode(status int) string { return fmt.Sprintf("%d001", status) }
