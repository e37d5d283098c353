package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// RunDoc is a run as the API shows it (GET /retention/runs/{id}, and each of GET /retention/runs). It is the one
// definition of that JSON shape: retentionctl reads runs into it.
type RunDoc struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	Trigger      string          `json:"trigger"`
	Store        string          `json:"store"`
	ScheduledFor string          `json:"scheduledFor,omitempty"`
	DryRun       bool            `json:"dryRun"`
	EvaluatedAt  string          `json:"evaluatedAt"`
	CreatedAt    string          `json:"createdAt"`
	StartedAt    string          `json:"startedAt,omitempty"`
	FinishedAt   string          `json:"finishedAt,omitempty"`
	Error        string          `json:"error,omitempty"`
	Progress     RunProgress     `json:"progress"`
	Datasets     []RunDatasetDoc `json:"datasets"`
	Links        map[string]link `json:"_links"`
}

// RunProgress is how far a run is: its datasets done of all, and the rows deleted (or, in a dry run, that would
// be) so far.
type RunProgress struct {
	DatasetsDone  int   `json:"datasetsDone"`
	DatasetsTotal int   `json:"datasetsTotal"`
	RowsDeleted   int64 `json:"rowsDeleted"`
}

// RunDatasetDoc is a dataset's part of a run: how it ended and what it deleted, under which TTL.
type RunDatasetDoc struct {
	DatasetID         string  `json:"datasetId"`
	Store             string  `json:"store"`
	Status            string  `json:"status"`
	TTLValue          *string `json:"ttlValue"`
	RowsDeleted       int64   `json:"rowsDeleted"`
	PartitionsDropped int     `json:"partitionsDropped"`
	Error             string  `json:"error,omitempty"`
}

// rfc3339ms is how run times are shown: RFC 3339 with milliseconds, in UTC.
const rfc3339ms = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(rfc3339ms)
}

func newRunDoc(r *catalog.Run) RunDoc {
	doc := RunDoc{
		ID: r.ID, Status: r.Status, Trigger: r.Trigger, Store: string(r.Store), ScheduledFor: formatTime(r.ScheduledFor),
		DryRun: r.DryRun, EvaluatedAt: formatTime(&r.EvaluatedAt), CreatedAt: formatTime(&r.CreatedAt),
		StartedAt: formatTime(r.StartedAt), FinishedAt: formatTime(r.FinishedAt), Error: r.Error,
		Progress: RunProgress{DatasetsDone: r.DatasetsDone, DatasetsTotal: r.DatasetsTotal, RowsDeleted: r.RowsDeleted},
		Datasets: make([]RunDatasetDoc, 0, len(r.Datasets)),
		Links:    map[string]link{"self": {Href: "/retention/runs/" + r.ID}},
	}
	for _, d := range r.Datasets {
		doc.Datasets = append(doc.Datasets, RunDatasetDoc{DatasetID: d.DatasetID, Store: string(r.Store), Status: d.Status,
			TTLValue: d.TTLValue, RowsDeleted: d.RowsDeleted, PartitionsDropped: d.PartitionsDropped, Error: d.Error})
	}
	return doc
}

func (s *Server) listRuns(c echo.Context) error {
	f := catalog.RunFilter{Limit: 20}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return catalog.Invalid("invalid-parameter", "limit", "limit must be an integer from 1 to %d, got %q", maxListLimit, catalog.Clip(v))
		}
		f.Limit = n
	}
	if v := c.QueryParam("start"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return catalog.Invalid("invalid-parameter", "start", "start must be a whole number of at least 0, got %q", catalog.Clip(v))
		}
		f.Offset = n
	}
	runs, err := s.runs.FindRuns(c.Request().Context(), caller(c), f)
	if err != nil {
		return err
	}
	if err := s.nothingHere(c, len(runs)); err != nil {
		return err
	}
	out := struct {
		Embedded struct {
			Runs []RunDoc `json:"runs"`
		} `json:"_embedded"`
		Links map[string]link `json:"_links"`
	}{Links: map[string]link{"self": {Href: c.Request().URL.RequestURI()}}}
	out.Embedded.Runs = make([]RunDoc, 0, len(runs))
	for _, r := range runs {
		out.Embedded.Runs = append(out.Embedded.Runs, newRunDoc(r))
	}
	if len(runs) == f.Limit {
		q := c.Request().URL.Query()
		q.Set("start", strconv.Itoa(f.Offset+f.Limit))
		out.Links["next"] = link{Href: c.Request().URL.Path + "?" + q.Encode()}
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getRun(c echo.Context) error {
	run, err := s.runs.FindRun(c.Request().Context(), caller(c), c.Param("runId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newRunDoc(run))
}

func (s *Server) startRun(c echo.Context) error {
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	req, err := parseRunRequest(body)
	if err != nil {
		return err
	}
	run, err := s.runs.StartRun(c.Request().Context(), caller(c), req)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/retention/runs/"+run.ID)
	return c.JSON(http.StatusAccepted, newRunDoc(run))
}

func parseRunRequest(body map[string]any) (catalog.RunRequest, error) {
	req := catalog.RunRequest{Store: catalog.LakeHouse}
	for key, v := range body {
		switch key {
		case "dryRun":
			b, ok := v.(bool)
			if !ok {
				return req, catalog.Invalid("invalid-type", "dryRun", "dryRun must be true or false")
			}
			req.DryRun = b
		case "store":
			st, _ := v.(string)
			req.Store = catalog.Store(st)
			if !req.Store.Valid() {
				return req, catalog.Invalid("invalid-field", "store", "store must be adobe_lakeHouse or adobe_unifiedProfile")
			}
		case "datasetIds":
			ids, ok := v.([]any)
			if !ok {
				return req, catalog.Invalid("invalid-type", "datasetIds", "datasetIds must be an array of dataset ids")
			}
			for _, raw := range ids {
				id, _ := raw.(string)
				if err := catalog.ValidateDatasetID(id); err != nil {
					return req, catalog.Invalid("invalid-field", "datasetIds", "datasetIds holds %v, which is not a dataset id (24 lowercase hex)", raw)
				}
				req.DatasetIDs = append(req.DatasetIDs, id)
			}
		default:
			return req, catalog.Invalid("unknown-field", key, "%s is not a field of a run request; use datasetIds, dryRun and store", key)
		}
	}
	return req, nil
}

// scheduleDoc is one store's schedule as GET /retention/schedule shows it: its cron expression, always evaluated in
// UTC, and when its next run is due.
type scheduleDoc struct {
	Store    string `json:"store"`
	Cron     string `json:"cron"`
	TimeZone string `json:"timeZone"`
	NextRun  string `json:"nextRun,omitempty"`
}

// getSchedule shows each store's schedule in catalog.Stores order; a store without one is left out. The schedule
// is the service's, the same for every org.
func (s *Server) getSchedule(c echo.Context) error {
	docs := make([]scheduleDoc, 0, len(s.schedules))
	for _, store := range catalog.Stores {
		spec, ok := s.schedules[store]
		if !ok {
			continue
		}
		doc := scheduleDoc{Store: string(store), Cron: spec, TimeZone: "UTC"}
		if s.nextRun != nil {
			doc.NextRun = formatTime(s.nextRun(store))
		}
		docs = append(docs, doc)
	}
	return c.JSON(http.StatusOK, map[string]any{"schedules": docs})
}
