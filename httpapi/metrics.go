package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "retention_http_request_duration_seconds", Help: "HTTP request latency by route, method and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "status"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

// middleware records every request by its route pattern, not its path, so ids do not explode the label set.
func (m *httpMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		labels := prometheus.Labels{"route": route, "method": methodLabel(c.Request().Method), "status": strconv.Itoa(c.Response().Status)}
		m.requests.With(labels).Inc()
		m.duration.With(labels).Observe(time.Since(start).Seconds())
		return nil
	}
}

// knownMethods are the methods a metric names; a client may send any token as its method, before authentication,
// so each other one would add a series that lives as long as the process.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodOptions: true,
}

// methodLabel is the method as a metric label: one of knownMethods, or "other".
func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

// newRequestID generates the id of a request that arrives without an x-request-id.
func newRequestID() string { return uuid.NewString() }
