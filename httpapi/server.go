// Package httpapi serves the service's REST API with Echo: Adobe-style gateway authentication and tenancy, the
// Catalog dataset and TTL routes, health and metrics. It maps domain errors to HTTP statuses in one table
// (error.go) and never imports the database driver.
package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/console"
)

// adobePrefix is the base path of Adobe's Catalog Service; every route is also served under it, so an Adobe client
// works by changing only the host.
const adobePrefix = "/data/foundation/catalog"

// Config holds what the server needs. Ready reports whether the service can serve (Postgres reachable, migrations
// applied); Registry receives the HTTP metrics and is served at /metrics.
type Config struct {
	Datasets catalog.DatasetService
	Rows     catalog.RowService
	Runs     catalog.RunService
	Preview  catalog.PreviewService
	// Holds serves the legal-hold routes (/dataSets/{id}/holds); nil leaves them out.
	Holds catalog.HoldService
	// Audit serves the Audit Query API (/audit/events, /audit/export, /audit/verify); nil leaves those routes out.
	Audit audit.Service
	// Expirations serves Adobe's Data Hygiene dataset expirations (/data/core/hygiene/ttl, /quota); nil leaves
	// those routes out.
	Expirations catalog.ExpirationService
	// Manifests serves the deletion manifests (…/deleted: which rows a removal took); nil leaves those routes out.
	Manifests catalog.ManifestService
	// WorkOrders serves Adobe's record-delete work orders (/data/core/hygiene/workorder and /workorder) and the
	// identity quotas of /quota; nil leaves them out.
	WorkOrders catalog.WorkOrderService
	// NextRun tells when a store's next scheduled run is due; nil when no schedule is known.
	NextRun func(store catalog.Store) *time.Time
	// Explain serves GET /dataSets/{id}/rows/{rowId}/expiry; nil leaves it out.
	Explain catalog.RowExpiryExplainer
	// RunAt tells when the store's first scheduled run at or after a time is due (nil: none); the explanation of a
	// row names the one that deletes it. nil when no schedule is known.
	RunAt func(store catalog.Store, from time.Time) *time.Time
	// Schedules are the cron expressions of the stores' scheduled runs (UTC), which GET /retention/schedule shows
	// with NextRun; a store missing from it has no scheduled runs.
	Schedules map[catalog.Store]string
	Auth      *Authenticator
	Logger    *slog.Logger
	Ready     func(ctx context.Context) error
	Registry  *prometheus.Registry
	// ChunkCommitted, when set, is told of every ingestion chunk committed; tests use it to watch streaming.
	ChunkCommitted func(rows int)
	// TranslateError, when set, turns a storage error that reached the API untranslated into a domain error
	// (postgres.TranslateError): a safety net under the services' own translation, so that a value the database
	// refuses is a 400 and not a 500.
	TranslateError func(error) error
	// OrgMovedAway, when set, tells whether an org has moved from this cell to another (postgres.DB.OrgMovedAway):
	// the error to answer instead of a not-found or an empty read (503 org-moved naming the cell), nil when it did
	// not move. It is asked only for requests that found nothing of the caller's org (a not-found, an empty page,
	// export, audit chain or quota), so it costs other requests nothing.
	OrgMovedAway func(ctx context.Context, org string) error
	// ReadTimeout is the longest a request body may go without a byte arriving (30 s when zero).
	ReadTimeout time.Duration
	// WriteTimeout is the longest a client may take to accept an answer, or one page of a stream
	// (30 s when zero).
	WriteTimeout time.Duration
	// LongRequestsPerOrg bounds each org's long requests in flight (4 when zero).
	LongRequestsPerOrg int
}

// Server is the HTTP API.
type Server struct {
	echo     *echo.Echo
	datasets catalog.DatasetService
	rows     catalog.RowService
	runs     catalog.RunService
	preview  catalog.PreviewService
	holds    catalog.HoldService
	audit    audit.Service
	// expirations serves the Data Hygiene routes (hygiene.go).
	expirations catalog.ExpirationService
	manifests   catalog.ManifestService
	// workOrders serves the record-delete work orders (workorder.go).
	workOrders catalog.WorkOrderService
	nextRun    func(store catalog.Store) *time.Time
	explainer  catalog.RowExpiryExplainer
	runAt      func(store catalog.Store, from time.Time) *time.Time
	schedules  map[catalog.Store]string
	auth       *Authenticator
	logger     *slog.Logger
	ready      func(ctx context.Context) error
	metrics    *httpMetrics
	// workOrderMetrics count what POST /workorder cost (workorder.go).
	workOrderMetrics *workOrderMetrics

	chunkCommitted func(rows int)
	translateError func(error) error
	orgMovedAway   func(ctx context.Context, org string) error
	readTimeout    time.Duration
	writeTimeout   time.Duration
	longRequests   *orgLimiter
	listings       *orgLimiter // an org's listings in flight, as many as its long requests
	workOrderReads *orgLimiter // an org's work-order bodies being read (workorder.go)
}

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	s := &Server{
		echo: echo.New(), datasets: cfg.Datasets, rows: cfg.Rows, runs: cfg.Runs, preview: cfg.Preview, holds: cfg.Holds, audit: cfg.Audit, expirations: cfg.Expirations, manifests: cfg.Manifests, workOrders: cfg.WorkOrders, nextRun: cfg.NextRun, explainer: cfg.Explain, runAt: cfg.RunAt, schedules: cfg.Schedules, auth: cfg.Auth, logger: cfg.Logger, ready: cfg.Ready,
		metrics: newHTTPMetrics(cfg.Registry), workOrderMetrics: newWorkOrderMetrics(cfg.Registry), chunkCommitted: cfg.ChunkCommitted, translateError: cfg.TranslateError, orgMovedAway: cfg.OrgMovedAway,
		readTimeout: cmp.Or(cfg.ReadTimeout, defaultReadTimeout), writeTimeout: cmp.Or(cfg.WriteTimeout, defaultWriteTimeout),
		longRequests:   newOrgLimiter(cmp.Or(cfg.LongRequestsPerOrg, defaultLongRequestsPerOrg)),
		listings:       newOrgLimiter(cmp.Or(cfg.LongRequestsPerOrg, defaultLongRequestsPerOrg)),
		workOrderReads: newOrgLimiter(workOrderReadsPerOrg),
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.JSONSerializer = jsonSerializer{}
	e.Pre(routeOnEscapedPath, dropUnsoundRequestID)
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{Generator: newRequestID, TargetHeader: echo.HeaderXRequestID}))
	e.Use(s.recoverPanics, s.logRequests, s.metrics.middleware, s.deadlines)

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))
	e.GET("/openapi.json", serveOpenAPI)
	for _, prefix := range []string{"", adobePrefix} {
		s.routes(e.Group(prefix, s.authenticate, s.checkParams))
	}
	s.registerAudit(e)
	if s.expirations != nil {
		s.hygieneRoutes(e.Group(hygienePrefix, s.authenticate, s.checkParams))
	}
	if s.workOrders != nil {
		s.workOrderRoutes(e.Group(hygienePrefix, s.authenticate, s.checkParams))
		s.workOrderRoutes(e.Group("", s.authenticate, s.checkParams))
	}
	s.registerConsole(e)
	return s
}

func (s *Server) routes(g *echo.Group) {
	read, manage := requireScope(catalog.ScopeDatasetsRead), requireScope(catalog.ScopeDatasetsManage)
	for _, name := range []string{"dataSets", "datasets"} {
		g.GET("/"+name, s.listDatasets, read, s.listing)
		g.POST("/"+name, s.createDataset, manage)
		g.GET("/"+name+"/:id", s.getDataset, read)
		g.DELETE("/"+name+"/:id", s.deleteDataset, manage)
		g.PATCH("/"+name+"/:id", s.patchDatasetV1, manage)
		g.PUT("/"+name+"/:id", s.putDataset, manage)
		g.PATCH("/v2/"+name+"/:id", s.patchDatasetV2, manage)
		g.POST("/"+name+"/:id/rows", s.ingestRows, manage, s.long)
		g.GET("/"+name+"/:id/rows", s.listRows, read, s.long)
		g.DELETE("/"+name+"/:id/rows/:rowId", s.deleteRow, manage)
		if s.explainer != nil {
			g.GET("/"+name+"/:id/rows/:rowId/expiry", s.explainRow, read)
		}
		if s.holds != nil {
			s.holdRoutes(g, name)
		}
		if s.manifests != nil {
			s.manifestRoutes(g, name)
		}
	}
	g.GET("/ttl/:id", s.getTTL, read)
	g.GET("/ttl/:id/preview", s.previewTTL, read, s.long)
	g.GET("/retention/runs", s.listRuns, read)
	g.GET("/retention/runs/:runId", s.getRun, read)
	g.GET("/retention/schedule", s.getSchedule, read)
	g.POST("/retention/runs", s.startRun, requireScope(catalog.ScopeRetentionRun))
	if s.manifests != nil {
		g.GET("/retention/runs/:runId/datasets/:datasetId/deleted", s.getRunManifest, requireScope(catalog.ScopeAuditRead), s.long)
	}
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		s.logger.WarnContext(ctx, "not ready", slog.Any("error", err))
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// recoverPanics turns a panicking handler into a logged 500 instead of a dropped connection.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.logger.ErrorContext(c.Request().Context(), "handler panicked",
					slog.Any("panic", r), slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
				err = echo.NewHTTPError(http.StatusInternalServerError)
			}
		}()
		return next(c)
	}
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.logger.InfoContext(c.Request().Context(), "request",
			slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
			slog.String("method", c.Request().Method), slog.String("route", c.Path()),
			slog.Int("status", c.Response().Status), slog.Duration("duration", time.Since(start)))
		return nil
	}
}

// registerConsole serves the web console's static client at /ui/. It carries no authentication of its own: the
// files are public, and everything they show comes from the API, under the caller's token.
func (s *Server) registerConsole(e *echo.Echo) {
	files := echo.WrapHandler(console.Handler("/ui/"))
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	// Browsers ask every site for /favicon.ico; the console's icon answers it, so that the request is no 403 in
	// the browser's console and the log.
	e.GET("/favicon.ico", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/favicon.svg") })
	for _, path := range []string{"/ui/", "/ui/*"} {
		e.GET(path, files)
		e.HEAD(path, files)
	}
}
