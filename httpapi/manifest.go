package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// manifestRoutes adds the deletion manifests' routes (issue #32.3) when the server has a manifest service: which
// rows a removal took, for audit.read callers.
func (s *Server) manifestRoutes(g *echo.Group, name string) {
	read := requireScope(catalog.ScopeAuditRead)
	g.GET("/"+name+"/:id/rowDeletes/:eventId/deleted", func(c echo.Context) error {
		return s.streamManifest(c, catalog.Removal{Kind: catalog.RemovalRowDelete, ID: c.Param("eventId"), DatasetID: c.Param("id")})
	}, read, s.long)
}

// getRunManifest answers GET /retention/runs/{runId}/datasets/{datasetId}/deleted.
func (s *Server) getRunManifest(c echo.Context) error {
	return s.streamManifest(c, catalog.Removal{Kind: catalog.RemovalRun, ID: c.Param("runId"), DatasetID: c.Param("datasetId")})
}

// manifestEntryDoc is one line of a manifest: a row a removal took.
type manifestEntryDoc struct {
	ID        string `json:"_id"`
	Store     string `json:"store"`
	Timestamp string `json:"timestamp"`
	ExpiresAt string `json:"expiresAt,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// manifestSummaryDoc is a manifest's last line: the rows the removal removed (its audit event's count), those
// listed above, and those counted but not listed, with why.
type manifestSummaryDoc struct {
	Summary struct {
		RowsDeleted int64  `json:"rowsDeleted"`
		Listed      int64  `json:"listed"`
		Unlisted    int64  `json:"unlisted"`
		Note        string `json:"note,omitempty"`
	} `json:"summary"`
}

// unlistedNote says why rows are counted and not listed.
const unlistedNote = "rows removed while the store's deletionManifest was off are counted, not listed"

// streamManifest streams the removal's manifest as NDJSON, one entry a line and a summary line last, in pages of
// catalog.ManifestPageSize read with a database connection that is released before the page is written (as an
// audit export is): a client that stops reading holds no connection, and is cut off once a page has waited the
// write timeout. The entries are those the removal's counts saw (Manifest.Through), so that the summary and the
// lines agree even while a run goes on. An error after the first page cuts the connection, so that a client never
// takes a truncated manifest, which lacks its summary line, for a whole one.
func (s *Server) streamManifest(c echo.Context, r catalog.Removal) error {
	ctx := c.Request().Context()
	m, err := s.manifests.OpenManifest(ctx, caller(c), r)
	if err != nil {
		return err
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	buf := bufio.NewWriterSize(res, 64<<10)
	enc := json.NewEncoder(buf)
	err = s.writeManifestPages(c, m, buf, enc)
	if err == nil {
		err = enc.Encode(newManifestSummary(m))
	}
	if err == nil {
		err = buf.Flush()
	}
	if err != nil {
		if !res.Committed {
			return err
		}
		s.logger.ErrorContext(ctx, "manifest stream failed mid-stream; cutting the connection",
			slog.String("request_id", res.Header().Get(echo.HeaderXRequestID)), slog.Any("error", err))
		abortResponse(res)
	}
	return nil
}

// writeManifestPages writes m's entries, page by page, flushing each to the client within the write timeout.
func (s *Server) writeManifestPages(c echo.Context, m *catalog.Manifest, buf *bufio.Writer, enc *json.Encoder) error {
	res := c.Response()
	for after := int64(0); after < m.Through; {
		page, err := s.manifests.ManifestPage(c.Request().Context(), m, after, catalog.ManifestPageSize)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		if err := s.extendWriteDeadline(res); err != nil {
			return err
		}
		for _, e := range page {
			if err := enc.Encode(newManifestEntryDoc(e)); err != nil {
				return err
			}
		}
		after = page[len(page)-1].Seq
		if err := buf.Flush(); err != nil {
			return err
		}
		if err := http.NewResponseController(res).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return fmt.Errorf("flush a manifest page: %w", err)
		}
	}
	return s.extendWriteDeadline(res)
}

func newManifestEntryDoc(e catalog.ManifestEntry) manifestEntryDoc {
	doc := manifestEntryDoc{ID: e.ID, Store: string(e.Store), Timestamp: e.Timestamp.UTC().Format(time.RFC3339Nano)}
	if e.Reason == "expired" && e.ExpiresAt != nil {
		doc.ExpiresAt = e.ExpiresAt.UTC().Format(time.RFC3339Nano)
	} else {
		doc.Reason = e.Reason
	}
	return doc
}

func newManifestSummary(m *catalog.Manifest) manifestSummaryDoc {
	var doc manifestSummaryDoc
	doc.Summary.RowsDeleted, doc.Summary.Listed = m.Removed, m.Listed
	doc.Summary.Unlisted = max(m.Removed-m.Listed, 0)
	if doc.Summary.Unlisted > 0 {
		doc.Summary.Note = unlistedNote
	}
	return doc
}
