package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// Listing bounds, as Adobe's Catalog: 20 by default, 100 at most.
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

func (s *Server) createDataset(c echo.Context) error {
	body, err := readJSONObject(c)
	if err != nil {
		return err
	}
	create, err := catalog.ParseCreate(body)
	if err != nil {
		return err
	}
	ds, err := s.datasets.CreateDataset(c.Request().Context(), caller(c), create)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, s.datasetURL(c, ds.ID))
	setETag(c, ds)
	return c.JSON(http.StatusCreated, referenceList(ds.ID))
}

// datasetURL is the dataset's address under the same prefix the request used.
func (s *Server) datasetURL(c echo.Context, id string) string {
	prefix := ""
	if strings.HasPrefix(c.Path(), adobePrefix) {
		prefix = adobePrefix
	}
	return prefix + "/dataSets/" + id
}

func datasetID(c echo.Context) (string, error) {
	id := c.Param("id")
	return id, catalog.ValidateDatasetID(id)
}

func (s *Server) getDataset(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	ds, err := s.datasets.FindDatasetByID(c.Request().Context(), caller(c), id)
	if err != nil {
		return err
	}
	doc, err := project(newDatasetDoc(ds, s.datasetExtensions(ds)), splitList(c.QueryParam("properties")))
	if err != nil {
		return err
	}
	setETag(c, ds)
	return writeKeyed(c, []keyedEntry{{ds.ID, doc}})
}

func (s *Server) deleteDataset(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	if err := s.datasets.DeleteDataset(c.Request().Context(), caller(c), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, referenceList(id))
}

func (s *Server) listDatasets(c echo.Context) error {
	filter, err := parseDatasetFilter(c)
	if err != nil {
		return err
	}
	datasets, err := s.datasets.FindDatasets(c.Request().Context(), caller(c), filter)
	if err != nil {
		return err
	}
	if err := s.nothingHere(c, len(datasets)); err != nil {
		return err
	}
	properties := splitList(c.QueryParam("properties"))
	entries := make([]keyedEntry, 0, len(datasets))
	for _, ds := range datasets {
		doc, err := project(newDatasetDoc(ds, s.datasetExtensions(ds)), properties)
		if err != nil {
			return err
		}
		entries = append(entries, keyedEntry{ds.ID, doc})
	}
	return writeKeyed(c, entries)
}

// parseDatasetFilter reads the listing parameters. An empty parameter counts as absent and unknown ones are
// ignored, as Adobe's Catalog does.
func parseDatasetFilter(c echo.Context) (catalog.DatasetFilter, error) {
	f := catalog.DatasetFilter{Limit: defaultListLimit}
	var err error
	if v := c.QueryParam("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > maxListLimit {
			return f, catalog.Invalid("invalid-parameter", "limit", "limit must be an integer from 1 to %d, got %q", maxListLimit, catalog.Clip(v))
		}
	}
	if v := c.QueryParam("start"); v != "" {
		if f.Offset, err = strconv.Atoi(v); err != nil || f.Offset < 0 {
			return f, catalog.Invalid("invalid-parameter", "start", "start must be a whole number of at least 0, got %q", catalog.Clip(v))
		}
	}
	if f.OrderBy, err = parseOrderBy(c.QueryParam("orderBy")); err != nil {
		return f, err
	}
	parseNameFilter(c.QueryParam("name"), &f)
	if err = parsePropertyFilter(c.QueryParams()["property"], &f); err != nil {
		return f, err
	}
	if f.Tags, err = parseTagFilter(c.QueryParam("tags")); err != nil {
		return f, err
	}
	return f, nil
}

// orderable are the fields orderBy accepts.
var orderable = map[string]bool{
	"name": true, "created": true, "updated": true, "classification.dataBehavior": true, "classification.managedBy": true,
	"extensions.adobe_lakeHouse.rowExpiration.ttlValue": true, "extensions.adobe_unifiedProfile.rowExpiration.ttlValue": true,
	"extensions.adobe_lakeHouse.rowExpiration.lastCompleted": true, "extensions.adobe_lakeHouse.metrics.rowCount": true,
	"extensions.adobe_lakeHouse.rowExpiration.nextRun": true, "extensions.adobe_lakeHouse.metrics.storageSize": true,
}

// maxNameFilterBytes bounds property=name~text: no name is longer (catalog's name bound), so a longer text matches
// nothing and is refused instead.
const maxNameFilterBytes = 256

// The held filters of the inventory: property=holds.active>0 lists the datasets with an active legal hold,
// property=holds.active==0 those without.
const (
	propertyHeld    = "holds.active>0"
	propertyNotHeld = "holds.active==0"
)

// propertyFilters names the property= expressions a dataset listing supports, for the message refusing the others.
const propertyFilters = "name~text (the name contains text, ignoring case), " + propertyHeld + " or " + propertyNotHeld

// parsePropertyFilter reads Adobe's property= expressions into f. Adobe's Catalog documents property as a filter
// without naming its grammar; this service takes three terms and refuses any other rather than ignoring a filter the
// caller relies on. Adobe reads ~ as a regular expression; a literal substring is what a search box needs and costs
// nothing a tenant could abuse.
func parsePropertyFilter(terms []string, f *catalog.DatasetFilter) error {
	for _, term := range terms {
		if text, ok := strings.CutPrefix(term, "name~"); ok {
			if err := parseNameContains(text, f); err != nil {
				return err
			}
			continue
		}
		var held bool
		switch strings.ReplaceAll(term, " ", "") {
		case "":
			continue
		case propertyHeld:
			held = true
		case propertyNotHeld:
		default:
			if err := catalog.CheckText("property", term); err != nil {
				return err
			}
			return catalog.Invalid("invalid-parameter", "property", "property filter %q is not supported; use %s", catalog.Clip(term), propertyFilters)
		}
		if f.Held != nil && *f.Held != held {
			return catalog.Invalid("invalid-parameter", "property", "property filters %s and %s exclude each other", propertyHeld, propertyNotHeld)
		}
		f.Held = &held
	}
	return nil
}

// parseNameContains reads the text of property=name~text into f.
func parseNameContains(text string, f *catalog.DatasetFilter) error {
	switch {
	case len(text) > maxNameFilterBytes:
		return catalog.Invalid("invalid-parameter", "property",
			"property filter name~ may be at most %d bytes, got %d", maxNameFilterBytes, len(text))
	case f.NameContains != "" && text != f.NameContains:
		return catalog.Invalid("invalid-parameter", "property", "property filter name~ may be given once")
	}
	if err := catalog.CheckText("property", text); err != nil {
		return err
	}
	f.NameContains = text
	return nil
}

func parseOrderBy(v string) ([]catalog.Order, error) {
	var out []catalog.Order
	for _, item := range splitList(v) {
		o := catalog.Order{Field: item}
		if field, ok := strings.CutPrefix(item, "asc:"); ok {
			o.Field = field
		} else if field, ok := strings.CutPrefix(item, "desc:"); ok {
			o.Field, o.Desc = field, true
		}
		if !orderable[o.Field] {
			return nil, catalog.Invalid("invalid-parameter", "orderBy",
				"orderBy field %q is not orderable; use name, created, updated, classification.dataBehavior, "+
					"classification.managedBy, extensions.adobe_lakeHouse.rowExpiration.ttlValue, "+
					"extensions.adobe_unifiedProfile.rowExpiration.ttlValue, extensions.adobe_lakeHouse.rowExpiration.lastCompleted, "+
					"extensions.adobe_lakeHouse.rowExpiration.nextRun, "+
					"extensions.adobe_lakeHouse.metrics.rowCount or extensions.adobe_lakeHouse.metrics.storageSize, "+
					"optionally prefixed asc: or desc:", catalog.Clip(o.Field))
		}
		out = append(out, o)
	}
	return out, nil
}

// parseNameFilter reads name=a,b (any of) and name=!a,b (none of).
func parseNameFilter(v string, f *catalog.DatasetFilter) {
	if v == "" {
		return
	}
	if rest, ok := strings.CutPrefix(v, "!"); ok {
		f.NotNames = splitList(rest)
		return
	}
	f.Names = splitList(v)
}

// parseTagFilter reads tags=name:value,other:* (all must hold; * is a wildcard).
func parseTagFilter(v string) ([]catalog.TagFilter, error) {
	var out []catalog.TagFilter
	for _, item := range splitList(v) {
		name, value, ok := strings.Cut(item, ":")
		if !ok || name == "" || value == "" {
			return nil, catalog.Invalid("invalid-parameter", "tags",
				"tags filter %q must be name:value (value may be * or contain * as a wildcard)", catalog.Clip(item))
		}
		out = append(out, catalog.TagFilter{Name: name, Value: value})
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
