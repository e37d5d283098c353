package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// hygienePrefix is the base path of Adobe's Data Hygiene API, the only place dataset expirations are served: the
// root /ttl/{id} is the Catalog's row-TTL route.
const hygienePrefix = "/data/core/hygiene"

// hygieneTimeLayout writes times as Adobe's Data Hygiene examples do: UTC, milliseconds, Z.
const hygieneTimeLayout = "2006-01-02T15:04:05.000Z"

func (s *Server) hygieneRoutes(g *echo.Group) {
	read, manage := requireScope(catalog.ScopeDatasetsRead), requireScope(catalog.ScopeDatasetsManage)
	g.GET("/ttl", s.listExpirations, read, s.listing)
	g.POST("/ttl", s.createExpiration, manage)
	g.GET("/ttl/:ID", s.getExpiration, read)
	g.PUT("/ttl/:ID", s.updateExpiration, manage)
	g.DELETE("/ttl/:ID", s.cancelExpiration, manage)
	g.GET("/quota", s.getQuota, read)
}

// expirationDoc is a dataset expiration in the shape of Adobe's Data Hygiene API; reason and the times of the
// execution steps are this service's additions.
type expirationDoc struct {
	TTLID       string               `json:"ttlId"`
	DatasetID   string               `json:"datasetId"`
	DatasetName string               `json:"datasetName"`
	SandboxName string               `json:"sandboxName"`
	DisplayName string               `json:"displayName"`
	Description *string              `json:"description,omitempty"`
	ImsOrg      string               `json:"imsOrg"`
	Status      string               `json:"status"`
	Expiry      string               `json:"expiry"`
	UpdatedAt   string               `json:"updatedAt"`
	UpdatedBy   string               `json:"updatedBy"`
	Reason      string               `json:"reason,omitempty"`
	CreatedAt   string               `json:"createdAt"`
	CreatedBy   string               `json:"createdBy"`
	ExecutingAt *string              `json:"executingAt,omitempty"`
	CompletedAt *string              `json:"completedAt,omitempty"`
	CancelledAt *string              `json:"cancelledAt,omitempty"`
	History     []expirationEventDoc `json:"history,omitempty"`
}

type expirationEventDoc struct {
	Status    string `json:"status"`
	Expiry    string `json:"expiry"`
	UpdatedAt string `json:"updatedAt"`
	UpdatedBy string `json:"updatedBy"`
	Reason    string `json:"reason,omitempty"`
}

func hygieneTime(t time.Time) string { return t.UTC().Format(hygieneTimeLayout) }

func optionalTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	v := hygieneTime(*t)
	return &v
}

func newExpirationDoc(e *catalog.Expiration, withHistory bool) expirationDoc {
	doc := expirationDoc{
		TTLID: e.ID, DatasetID: e.DatasetID, DatasetName: e.DatasetName, SandboxName: e.Sandbox, DisplayName: e.DisplayName,
		Description: e.Description, ImsOrg: e.Org, Status: string(e.Status), Expiry: hygieneTime(e.Expiry),
		UpdatedAt: hygieneTime(e.Updated), UpdatedBy: e.UpdatedBy, Reason: e.Reason, CreatedAt: hygieneTime(e.Created),
		CreatedBy: e.CreatedBy, ExecutingAt: optionalTime(e.ExecutingAt), CompletedAt: optionalTime(e.CompletedAt),
		CancelledAt: optionalTime(e.CancelledAt),
	}
	if withHistory {
		doc.History = make([]expirationEventDoc, 0, len(e.History))
		for _, h := range e.History {
			doc.History = append(doc.History, expirationEventDoc{Status: h.Status, Expiry: hygieneTime(h.Expiry),
				UpdatedAt: hygieneTime(h.UpdatedAt), UpdatedBy: h.UpdatedBy, Reason: h.Reason})
		}
	}
	return doc
}

// includeHistory reads include, which asks for each expiration's history (Adobe's include=history); without it,
// no history is read.
func includeHistory(c echo.Context) (bool, error) {
	switch include := c.QueryParam("include"); include {
	case "":
		return false, nil
	case "history":
		return true, nil
	default:
		return false, catalog.Invalid("invalid-parameter", "include", "include must be history, got %q", catalog.Clip(include))
	}
}

func expirationRef(c echo.Context) (string, error) {
	ref := c.Param("ID")
	return ref, catalog.ValidateExpirationRef(ref)
}

func (s *Server) createExpiration(c echo.Context) error {
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	create, err := catalog.ParseExpirationCreate(body)
	if err != nil {
		return err
	}
	e, err := s.expirations.CreateExpiration(c.Request().Context(), caller(c), create)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, hygienePrefix+"/ttl/"+e.ID)
	return c.JSON(http.StatusCreated, newExpirationDoc(e, false))
}

func (s *Server) getExpiration(c echo.Context) error {
	ref, err := expirationRef(c)
	if err != nil {
		return err
	}
	withHistory, err := includeHistory(c)
	if err != nil {
		return err
	}
	e, err := s.expirations.FindExpiration(c.Request().Context(), caller(c), ref, withHistory)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newExpirationDoc(e, withHistory))
}

func (s *Server) updateExpiration(c echo.Context) error {
	ref, err := expirationRef(c)
	if err != nil {
		return err
	}
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	u, err := catalog.ParseExpirationUpdate(body)
	if err != nil {
		return err
	}
	e, err := s.expirations.UpdateExpiration(c.Request().Context(), caller(c), ref, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newExpirationDoc(e, false))
}

func (s *Server) cancelExpiration(c echo.Context) error {
	ref, err := expirationRef(c)
	if err != nil {
		return err
	}
	e, err := s.expirations.CancelExpiration(c.Request().Context(), caller(c), ref)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newExpirationDoc(e, false))
}

// expirationListDoc is a page of expirations, in Adobe's page form.
type expirationListDoc struct {
	Results     []expirationDoc `json:"results"`
	CurrentPage int             `json:"current_page"`
	TotalPages  int             `json:"total_pages"`
	TotalCount  int             `json:"total_count"`
}

func (s *Server) listExpirations(c echo.Context) error {
	f, err := parseExpirationFilter(c)
	if err != nil {
		return err
	}
	page, err := s.expirations.FindExpirations(c.Request().Context(), caller(c), f)
	if err != nil {
		return err
	}
	if err := s.nothingHere(c, len(page.Results)); err != nil {
		return err
	}
	doc := expirationListDoc{Results: make([]expirationDoc, 0, len(page.Results)), CurrentPage: f.Page,
		TotalPages: (page.Total + f.Limit - 1) / f.Limit, TotalCount: page.Total}
	for _, e := range page.Results {
		doc.Results = append(doc.Results, newExpirationDoc(e, f.WithHistory))
	}
	return c.JSON(http.StatusOK, doc)
}

// parseExpirationFilter reads the listing's parameters. An empty parameter counts as absent and unknown ones are
// ignored, as the Catalog's listing does. They are checked in a fixed order, and the first refused is the one the
// 400 names, so that a request with several bad ones always gets the same answer: limit, page, datasetId,
// datasetName, displayName, description, author, search, status, orderBy, expiryFromDate, expiryToDate,
// expiryDate, updatedFromDate, updatedToDate, updatedDate, include.
func parseExpirationFilter(c echo.Context) (catalog.ExpirationFilter, error) {
	f := catalog.ExpirationFilter{Limit: catalog.DefaultExpirationLimit}
	var err error
	if f.Limit, err = intParam(c, "limit", catalog.DefaultExpirationLimit, 1, catalog.MaxExpirationLimit); err != nil {
		return f, err
	}
	if f.Page, err = intParam(c, "page", 0, 0, catalog.MaxExpirationPage); err != nil {
		return f, err
	}
	if f.DatasetID = c.QueryParam("datasetId"); f.DatasetID != "" {
		if err := catalog.ValidateDatasetID(f.DatasetID); err != nil {
			return f, catalog.Invalid("invalid-parameter", "datasetId", "%s", catalog.ErrorMessage(err))
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"datasetName", &f.DatasetName}, {"displayName", &f.DisplayName}, {"description", &f.Description},
		{"author", &f.Author}, {"search", &f.Search}} {
		if *p.dst = c.QueryParam(p.name); len(*p.dst) > catalog.MaxExpirationSearch {
			return f, catalog.Invalid("invalid-parameter", p.name, "%s must be at most %d bytes", p.name, catalog.MaxExpirationSearch)
		}
	}
	if f.Statuses, err = catalog.ParseExpirationStatuses(c.QueryParam("status")); err != nil {
		return f, err
	}
	if f.OrderBy, err = catalog.ParseExpirationOrder(c.QueryParam("orderBy")); err != nil {
		return f, err
	}
	if f.ExpiryFrom, f.ExpiryTo, err = dateWindow(c, "expiry"); err != nil {
		return f, err
	}
	if f.UpdatedFrom, f.UpdatedTo, err = dateWindow(c, "updated"); err != nil {
		return f, err
	}
	f.WithHistory, err = includeHistory(c)
	return f, err
}

func intParam(c echo.Context, name string, def, lo, hi int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, catalog.Invalid("invalid-parameter", name, "%s must be an integer from %d to %d, got %q", name, lo, hi, catalog.Clip(v))
	}
	return n, nil
}

// dateWindow reads <prefix>Date (that whole day), <prefix>FromDate (from then on) and <prefix>ToDate (up to then:
// through the day for a date, through the instant for a date-time) into a half-open window [from, to).
func dateWindow(c echo.Context, prefix string) (from, to *time.Time, err error) {
	bound := func(name string, end bool) (*time.Time, error) {
		v := c.QueryParam(name)
		if v == "" {
			return nil, nil
		}
		t, err := catalog.ParseExpiry(v)
		if err != nil {
			return nil, catalog.Invalid("invalid-parameter", name, "%s must be an ISO 8601 date or UTC date-time, got %q", name, catalog.Clip(v))
		}
		if end {
			step := time.Millisecond
			if len(v) == len("2006-01-02") {
				step = 24 * time.Hour
			}
			t = t.Add(step)
		}
		return &t, nil
	}
	if from, err = bound(prefix+"FromDate", false); err != nil {
		return nil, nil, err
	}
	if to, err = bound(prefix+"ToDate", true); err != nil {
		return nil, nil, err
	}
	if day := c.QueryParam(prefix + "Date"); day != "" {
		t, err := time.Parse("2006-01-02", day)
		if err != nil {
			return nil, nil, catalog.Invalid("invalid-parameter", prefix+"Date", "%sDate must be an ISO 8601 date (2030-12-31), got %q", prefix, catalog.Clip(day))
		}
		next := t.Add(24 * time.Hour)
		from, to = later(from, &t), earlier(to, &next)
	}
	return from, to, nil
}

func later(a, b *time.Time) *time.Time {
	if a == nil || b.After(*a) {
		return b
	}
	return a
}

func earlier(a, b *time.Time) *time.Time {
	if a == nil || b.Before(*a) {
		return b
	}
	return a
}

// quotaDescription is how GET /quota describes the dataset-expiration quota, in Adobe's words.
const quotaDescription = "The number of concurrently active dataset-expiration delete operations in all work order requests for the organization."

// adobeQuotaTypes are the quota types Adobe's /quota takes: the dataset-expiration one, and the record-delete ones
// (listed only where work orders are served).
var adobeQuotaTypes = []string{catalog.QuotaDatasetExpiration, catalog.QuotaDailyIdentities, catalog.QuotaMonthlyIdentities}

type quotaDoc struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Consumed    int    `json:"consumed"`
	Quota       int    `json:"quota"`
}

func (s *Server) getQuota(c echo.Context) error {
	quotas := []quotaDoc{}
	qt := c.QueryParam("quotaType")
	if qt != "" && !slices.Contains(adobeQuotaTypes, qt) {
		return catalog.Invalid("invalid-parameter", "quotaType", "quotaType must be one of %v, got %q", adobeQuotaTypes, catalog.Clip(qt))
	}
	if qt == "" || qt == catalog.QuotaDatasetExpiration {
		q, err := s.expirations.ExpirationQuota(c.Request().Context(), caller(c))
		if err != nil {
			return err
		}
		quotas = append(quotas, quotaDoc{Name: q.Name, Description: quotaDescription, Consumed: q.Consumed, Quota: q.Quota})
	}
	if qt != catalog.QuotaDatasetExpiration {
		more, err := s.identityQuotas(c, qt)
		if err != nil {
			return err
		}
		quotas = append(quotas, more...)
	}
	consumed := 0
	for _, q := range quotas {
		consumed += q.Consumed
	}
	// Nothing consumed may be the cell an org left, where its orders and expirations no longer are.
	if err := s.nothingHere(c, consumed); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"quotas": quotas})
}
