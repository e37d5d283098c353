package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// holdRoutes registers the legal-hold routes of a dataset. Listing and reading holds takes datasets.read; placing
// and releasing takes retention.hold, which no other scope implies.
func (s *Server) holdRoutes(g *echo.Group, name string) {
	read, hold := requireScope(catalog.ScopeDatasetsRead), requireScope(catalog.ScopeRetentionHold)
	g.POST("/"+name+"/:id/holds", s.placeHold, hold)
	g.GET("/"+name+"/:id/holds", s.listHolds, read)
	g.GET("/"+name+"/:id/holds/:holdId", s.getHold, read)
	g.DELETE("/"+name+"/:id/holds/:holdId", s.releaseHold, hold)
}

// holdDoc is a legal hold as the API shows it; times are RFC 3339, as in the audit log the hold's events go to.
type holdDoc struct {
	ID         string  `json:"id"`
	DatasetID  string  `json:"datasetId"`
	Reason     string  `json:"reason"`
	Reference  *string `json:"reference"`
	PlacedBy   string  `json:"placedBy"`
	PlacedAt   string  `json:"placedAt"`
	Active     bool    `json:"active"`
	ReleasedBy *string `json:"releasedBy,omitempty"`
	ReleasedAt *string `json:"releasedAt,omitempty"`
}

func newHoldDoc(h *catalog.Hold) holdDoc {
	doc := holdDoc{ID: h.ID, DatasetID: h.DatasetID, Reason: h.Reason, Reference: h.Reference, PlacedBy: h.PlacedBy,
		PlacedAt: rfc3339(h.PlacedAt), Active: h.ReleasedAt == nil, ReleasedBy: h.ReleasedBy}
	if h.ReleasedAt != nil {
		at := rfc3339(*h.ReleasedAt)
		doc.ReleasedAt = &at
	}
	return doc
}

func (s *Server) placeHold(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	create, err := catalog.ParseHoldCreate(body)
	if err != nil {
		return err
	}
	h, err := s.holds.PlaceHold(c.Request().Context(), caller(c), id, create)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, s.datasetURL(c, id)+"/holds/"+h.ID)
	return c.JSON(http.StatusCreated, newHoldDoc(h))
}

func (s *Server) listHolds(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	holds, err := s.holds.FindHolds(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	docs := make([]holdDoc, 0, len(holds))
	for _, h := range holds {
		docs = append(docs, newHoldDoc(h))
	}
	return c.JSON(http.StatusOK, map[string]any{"holds": docs, "active": len(docs)})
}

// holdIDs reads the dataset and hold ids of the path.
func holdIDs(c echo.Context) (string, string, error) {
	id, err := datasetID(c)
	if err != nil {
		return "", "", err
	}
	holdID := c.Param("holdId")
	return id, holdID, catalog.ValidateHoldID(holdID)
}

func (s *Server) getHold(c echo.Context) error {
	id, holdID, err := holdIDs(c)
	if err != nil {
		return err
	}
	h, err := s.holds.FindHold(c.Request().Context(), caller(c), id, holdID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newHoldDoc(h))
}

func (s *Server) releaseHold(c echo.Context) error {
	id, holdID, err := holdIDs(c)
	if err != nil {
		return err
	}
	h, err := s.holds.ReleaseHold(c.Request().Context(), caller(c), id, holdID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newHoldDoc(h))
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
