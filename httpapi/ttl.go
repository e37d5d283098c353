package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
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
	return writeKeyed(c, []keyedEntry{{ds.ID, newDatasetDoc(ds, limitsExtensions(ds, limits))}})
}

// patchDatasetV2 answers PATCH /v2/dataSets/{id}: a deep merge of the body, answered with the updated dataset.
func (s *Server) patchDatasetV2(c echo.Context) error {
	ds, err := s.applyDatasetBody(c, catalog.ParsePatch)
	if err != nil {
		return err
	}
	return writeKeyed(c, []keyedEntry{{ds.ID, newDatasetDoc(ds, s.datasetExtensions(ds))}})
}

// patchDatasetV1 answers the Catalog v1 PATCH /dataSets/{id}: the top-level attributes sent replace the
// dataset's (catalog.ParsePatchV1), through the same change, limits and audit event as v2.
func (s *Server) patchDatasetV1(c echo.Context) error {
	return s.updateDataset(c, catalog.ParsePatchV1)
}

// putDataset answers the Catalog v1 PUT /dataSets/{id}: the body replaces the dataset's writable attributes
// (catalog.ParsePut), through the same change, limits and audit event as v2.
func (s *Server) putDataset(c echo.Context) error { return s.updateDataset(c, catalog.ParsePut) }

// updateDataset applies a v1 body read by parse and answers as Adobe's v1 Catalog does: ["@/dataSets/{id}"], with
// the new version as ETag.
func (s *Server) updateDataset(c echo.Context, parse func(map[string]any) (*catalog.Patch, error)) error {
	ds, err := s.applyDatasetBody(c, parse)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, referenceList(ds.ID))
}

// applyDatasetBody reads the request's JSON body with parse and applies it to the dataset of the path under the
// request's If-Match, setting the new version as ETag: the one change v2 PATCH and v1 PATCH and PUT share.
func (s *Server) applyDatasetBody(c echo.Context, parse func(map[string]any) (*catalog.Patch, error)) (*catalog.Dataset, error) {
	id, err := datasetID(c)
	if err != nil {
		return nil, err
	}
	body, err := readJSONObject(c)
	if err != nil {
		return nil, err
	}
	patch, err := parse(body)
	if err != nil {
		return nil, err
	}
	ds, err := s.datasets.PatchDataset(c.Request().Context(), caller(c), id, patch, parseIfMatch(c.Request().Header.Get("If-Match")))
	if err != nil {
		return nil, err
	}
	setETag(c, ds)
	return ds, nil
}

type previewDoc struct {
	DatasetID    string          `json:"datasetId"`
	Store        string          `json:"store"`
	TTLValue     *string         `json:"ttlValue"`
	EvaluatedAt  string          `json:"evaluatedAt"`
	RowsToDelete int64           `json:"rowsToDelete"`
	RowCount     int64           `json:"rowCount"`
	Distribution distributionDoc `json:"distribution"`
}

type distributionDoc struct {
	Estimated bool        `json:"estimated"`
	Buckets   []bucketDoc `json:"buckets"`
}

type bucketDoc struct {
	Month string `json:"month"`
	Rows  int64  `json:"rows"`
}

// previewTTL answers GET /ttl/{id}/preview: how many rows a run would delete now with ttlValue (the current TTL
// when absent), and the rows by age, without deleting anything.
func (s *Server) previewTTL(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	store := catalog.LakeHouse
	if v := c.QueryParam("store"); v != "" {
		if store = catalog.Store(v); !store.Valid() {
			return catalog.Invalid("invalid-parameter", "store", "store must be adobe_lakeHouse or adobe_unifiedProfile, got %q", catalog.Clip(v))
		}
	}
	var ttl *retention.Period
	raw, useCurrent := c.QueryParam("ttlValue"), true
	if raw != "" {
		useCurrent = false
		var value any = raw
		if raw == "null" {
			value = nil
		}
		if ttl, err = catalog.ParseTTLValue("ttlValue", value); err != nil {
			return err
		}
	}
	p, err := s.preview.Preview(c.Request().Context(), caller(c), id, store, ttl, useCurrent)
	if err != nil {
		return err
	}
	doc := previewDoc{DatasetID: id, Store: string(store), EvaluatedAt: formatTime(&p.At), RowsToDelete: p.RowsToDelete,
		RowCount: p.RowCount, Distribution: distributionDoc{Estimated: p.Estimated, Buckets: []bucketDoc{}}}
	if p.TTL != nil {
		v := p.TTL.String()
		doc.TTLValue = &v
	}
	for _, b := range p.Distribution {
		doc.Distribution.Buckets = append(doc.Distribution.Buckets, bucketDoc{Month: b.Month.UTC().Format("2006-01"), Rows: b.Rows})
	}
	return c.JSON(http.StatusOK, doc)
}
