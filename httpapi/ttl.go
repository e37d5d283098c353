package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// getTTL answers GET /ttl/{id}: the dataset with each store's TTL limits, as in the seed.
func (s *Server) getTTL(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	ds, limits, err := s.datasets.TTLLimits(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	return writeKeyed(c, http.StatusOK, []keyedEntry{{ds.ID, newDatasetDoc(ds, limitsExtensions(limits))}})
}

// patchDatasetV2 answers PATCH /v2/dataSets/{id}: a deep merge of the body, answered with the updated dataset.
func (s *Server) patchDatasetV2(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	patch, err := catalog.ParsePatch(body)
	if err != nil {
		return err
	}
	ds, err := s.datasets.PatchDataset(c.Request().Context(), caller(c), id, patch, c.Request().Header.Get("If-Match"))
	if err != nil {
		return err
	}
	setETag(c, ds)
	return writeKeyed(c, http.StatusOK, []keyedEntry{{ds.ID, newDatasetDoc(ds, s.datasetExtensions(ds))}})
}
