// Package apitest holds the HTTP tests to the service's OpenAPI document (httpapi/openapi.yaml): Handler wraps the
// API under test and validates, with kin-openapi, every request a test sends and every answer it gets, so that an
// undocumented route, status, parameter or field fails the test that met it.
//
// The rule for requests the document calls invalid (tests send hostile bodies and bad parameters on purpose): the
// service must refuse them with a 4xx the document lists for the operation, in the documented shape. A 2xx to such
// a request fails, and so does a request to a path and method the document lacks unless the service answers 4xx.
// A 500 fails unless the test injects failures (AllowInternalErrors).
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/acme/retention/httpapi"
)

// Bounds on what the wrapper keeps to validate: request bodies of metadata calls (httpapi.MaxMetadataBody) and
// answers up to a few pages of rows. A larger body or answer is passed through whole and its status, headers and
// content type are still checked; only its body goes unvalidated.
const (
	maxRequestBody = httpapi.MaxMetadataBody
	maxAnswerBody  = 16 << 20
)

// Document returns the service's OpenAPI document, loaded and validated once per test binary.
func Document(t testing.TB) *openapi3.T {
	t.Helper()
	doc, _, err := load()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	return doc
}

// loaded is the document and its router, built once per test binary.
type loaded struct {
	doc    *openapi3.T
	router routers.Router
}

// assetDecoders read the console's files (/ui/) as kin-openapi reads text/plain: as the text they are, for the
// document's string schemas. kin-openapi keeps its decoders in one table for the process, so they are registered
// with the document, once.
var assetDecoders = map[string]openapi3filter.BodyDecoder{
	"text/html": openapi3filter.PlainBodyDecoder, "text/css": openapi3filter.PlainBodyDecoder,
	"text/javascript": openapi3filter.PlainBodyDecoder, "image/svg+xml": openapi3filter.PlainBodyDecoder,
	"image/png": openapi3filter.FileBodyDecoder,
	// An NDJSON answer (a deletion manifest) is checked line by line: the document describes it as an array
	// whose items are its lines. NDJSON request bodies are never checked (requestAsRead).
	"application/x-ndjson": ndjsonLines,
}

// ndjsonLines decodes an NDJSON body into its lines, each decoded as JSON, for the document's array schema.
func ndjsonLines(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	dec := json.NewDecoder(body)
	dec.UseNumber()
	lines := []any{}
	for {
		var line any
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			return lines, nil
		} else if err != nil {
			return nil, fmt.Errorf("line %d: %w", len(lines)+1, err)
		}
		lines = append(lines, line)
	}
}

var loadOnce = sync.OnceValues(func() (loaded, error) {
	for contentType, decode := range assetDecoders {
		openapi3filter.RegisterBodyDecoder(contentType, decode)
	}
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPIDocument())
	if err != nil {
		return loaded{}, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return loaded{}, fmt.Errorf("not a valid OpenAPI document: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return loaded{}, fmt.Errorf("route its paths: %w", err)
	}
	return loaded{doc, router}, nil
})

func load() (*openapi3.T, routers.Router, error) {
	l, err := loadOnce()
	return l.doc, l.router, err
}

// options are kin-openapi's options for one check: schema errors name the rule and where it broke, without
// dumping the schema and the value.
func options() *openapi3filter.Options {
	o := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true}
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string {
		return fmt.Sprintf("%s (at /%s)", err.Reason, strings.Join(err.JSONPointer(), "/"))
	})
	return o
}

// Option tunes Handler.
type Option func(*validator)

// AllowInternalErrors lets answers of 500 pass (they are still checked against the document): for tests that make
// a service fail on purpose to see how the API answers.
func AllowInternalErrors() Option { return func(v *validator) { v.allowInternal = true } }

type validator struct {
	t             testing.TB
	next          http.Handler
	router        routers.Router
	allowInternal bool
}

// Handler returns next, validating each request and its answer against the service's OpenAPI document and
// reporting every mismatch with t.Errorf: method, path, status and kin-openapi's message. It changes nothing the
// service sees: the request body is checked as the handler read it, after the handler has run.
func Handler(t testing.TB, next http.Handler, opts ...Option) http.Handler {
	t.Helper()
	_, router, err := load()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	v := &validator{t: t, next: next, router: router}
	for _, o := range opts {
		o(v)
	}
	return v
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The router matches the path as sent, percent-encoding and all, as the service does.
	route, params, routeErr := v.router.FindRoute(r)
	decodeOnce(params)
	body := &teeBody{ReadCloser: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = body
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	v.next.ServeHTTP(rec, r)
	if rec.hijacked || r.Context().Err() != nil {
		return // the connection was cut or the client left: there is no answer to check
	}
	where := fmt.Sprintf("%s %s answered %d", r.Method, r.URL.RequestURI(), rec.status)
	if rec.status >= http.StatusInternalServerError && rec.status != http.StatusServiceUnavailable && !v.allowInternal {
		v.t.Errorf("openapi: %s: a 5xx other than 503 is a bug; body: %.500s", where, rec.body.Bytes())
	}
	if routeErr != nil {
		if rec.status < http.StatusBadRequest || rec.status >= http.StatusInternalServerError {
			v.t.Errorf("openapi: %s, but the document has no such operation: %v", where, routeErr)
		}
		return
	}
	asRead, bodyRead := requestAsRead(r, body)
	reqInput := &openapi3filter.RequestValidationInput{Request: asRead, PathParams: params, Route: route, Options: options()}
	reqInput.Options.ExcludeRequestBody = !bodyRead
	reqErr := openapi3filter.ValidateRequest(context.Background(), reqInput)
	if reqErr != nil && rec.status < http.StatusBadRequest {
		v.t.Errorf("openapi: %s to a request the document calls invalid: %v", where, reqErr)
	}
	resInput := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqInput, Status: rec.status, Header: rec.Header(),
		Body:    io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options: options(),
	}
	resInput.Options.IncludeResponseStatus = true
	resInput.Options.ExcludeResponseBody = rec.truncated || r.Method == http.MethodHead
	if err := openapi3filter.ValidateResponse(context.Background(), resInput); err != nil {
		v.t.Errorf("openapi: %s, not as documented: %v", where, err)
	}
}

// requestAsRead returns r with the body the handler read, and whether that body is to be validated: only a JSON
// body read to its end (NDJSON lines are the service's to judge one by one, and a body the handler left, or one over
// maxRequestBody, is not there to check).
func requestAsRead(r *http.Request, body *teeBody) (*http.Request, bool) {
	out := r.Clone(context.Background())
	out.Body = io.NopCloser(bytes.NewReader(body.buf.Bytes()))
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return out, err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) && body.complete()
}

// teeBody keeps a copy of what the handler reads of a request body, up to maxRequestBody.
type teeBody struct {
	io.ReadCloser
	buf      bytes.Buffer
	sawEOF   bool
	overflow bool
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.buf.Len()+n > maxRequestBody {
		b.overflow = true
	} else {
		b.buf.Write(p[:n])
	}
	if errors.Is(err, io.EOF) {
		b.sawEOF = true
	}
	return n, err
}

// complete reports whether the handler read the whole body and the copy holds it.
func (b *teeBody) complete() bool { return b.sawEOF && !b.overflow }

// recorder passes an answer through to the client and keeps its status and the start of its body.
type recorder struct {
	http.ResponseWriter
	status    int
	wrote     bool
	body      bytes.Buffer
	truncated bool
	hijacked  bool
}

func (w *recorder) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	w.wrote = true
	if w.body.Len()+len(p) > maxAnswerBody {
		w.truncated = true
	} else {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush, Hijack and Unwrap keep what the service does through http.ResponseController working: streaming pages,
// cutting a connection, write deadlines.
func (w *recorder) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// decodeOnce decodes the path parameters the router matched percent-encoded, as the service does (checkParams), so
// that the document's patterns judge the value the service sees.
func decodeOnce(params map[string]string) {
	for k, v := range params {
		if d, err := url.PathUnescape(v); err == nil {
			params[k] = d
		}
	}
}
