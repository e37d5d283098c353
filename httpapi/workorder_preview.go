package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// workOrderPreviewDoc is POST /workorder/preview's answer: what the order in the body would remove if it ran now.
type workOrderPreviewDoc struct {
	CountedAt     string                       `json:"countedAt"`
	DatasetID     string                       `json:"datasetId"`
	IdentityCount int                          `json:"identityCount"`
	DatasetCount  int                          `json:"datasetCount"`
	RowCount      int64                        `json:"rowCount"`
	Datasets      []workOrderPreviewDatasetDoc `json:"datasets"`
}

type workOrderPreviewDatasetDoc struct {
	DatasetID   string           `json:"datasetId"`
	DatasetName string           `json:"datasetName"`
	RowCount    int64            `json:"rowCount"`
	Stores      map[string]int64 `json:"stores"`
	HeldBy      string           `json:"heldBy,omitempty"`
}

// previewWorkOrder counts what the order in the body would remove, creating nothing and counting no quota. It takes
// the scope that creates orders: which identities have rows is as personal as the rows.
func (s *Server) previewWorkOrder(c echo.Context) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	// A preview's body is an order's, as costly to decode: it shares the org's one body at a time.
	org := caller(c).Org
	if !s.workOrderReads.acquire(org) {
		discardBody(c, MaxWorkOrderBody)
		return s.tooManyWorkOrderReads(org)
	}
	defer s.workOrderReads.release(org)
	body, err := readJSONObjectMax(c, MaxWorkOrderBody)
	if err != nil {
		return err
	}
	create, err := catalog.ParseWorkOrderCreate(body)
	if err != nil {
		return err
	}
	p, err := s.workOrders.PreviewWorkOrder(c.Request().Context(), caller(c), create)
	if err != nil {
		return err
	}
	if err := s.nothingHere(c, p.DatasetCount); err != nil {
		return err
	}
	doc := workOrderPreviewDoc{CountedAt: hygieneTime(p.At), DatasetID: p.DatasetID, IdentityCount: p.IdentityCount,
		DatasetCount: p.DatasetCount, RowCount: p.RowCount, Datasets: []workOrderPreviewDatasetDoc{}}
	for _, d := range p.Datasets {
		stores := map[string]int64{}
		for st, n := range d.Stores {
			stores[string(st)] = n
		}
		doc.Datasets = append(doc.Datasets, workOrderPreviewDatasetDoc{DatasetID: d.DatasetID, DatasetName: d.DatasetName,
			RowCount: d.RowCount, Stores: stores, HeldBy: d.HeldBy})
	}
	return c.JSON(http.StatusOK, doc)
}
