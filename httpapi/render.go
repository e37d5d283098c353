package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// datasetDoc is a dataset in the shape of Adobe's Catalog.
type datasetDoc struct {
	Name           string              `json:"name"`
	Description    *string             `json:"description,omitempty"`
	ImsOrg         string              `json:"imsOrg"`
	SandboxName    string              `json:"sandboxName"`
	Tags           map[string][]string `json:"tags"`
	Classification classificationDoc   `json:"classification"`
	SchemaRef      map[string]any      `json:"schemaRef,omitempty"`
	Extensions     map[string]any      `json:"extensions"`
	Version        string              `json:"version"`
	Created        int64               `json:"created"`
	Updated        int64               `json:"updated"`
	CreatedClient  string              `json:"createdClient"`
	CreatedUser    string              `json:"createdUser"`
	UpdatedUser    string              `json:"updatedUser"`
	Holds          holdsDoc            `json:"holds"`
}

// holdsDoc sums up a dataset's legal holds: how many are active (GET /dataSets/{id}/holds lists them).
type holdsDoc struct {
	Active int `json:"active"`
}

type classificationDoc struct {
	DataBehavior string `json:"dataBehavior"`
	ManagedBy    string `json:"managedBy"`
}

func newDatasetDoc(ds *catalog.Dataset, extensions map[string]any) datasetDoc {
	return datasetDoc{
		Name: ds.Name, Description: ds.Description, ImsOrg: ds.Org, SandboxName: ds.Sandbox, Tags: datasetTags(ds),
		Classification: classificationDoc{string(ds.Classification.DataBehavior), string(ds.Classification.ManagedBy)},
		SchemaRef:      ds.SchemaRef, Extensions: extensions, Version: ds.VersionString(),
		Created: catalog.EpochMillis(ds.Created), Updated: catalog.EpochMillis(ds.Updated),
		CreatedClient: ds.CreatedClient, CreatedUser: ds.CreatedUser, UpdatedUser: ds.UpdatedUser,
		Holds: holdsDoc{Active: ds.ActiveHolds},
	}
}

// datasetTags are the dataset's tags with, while it has a pending expiration, catalog.ExpirationTag (its expiry in
// epoch milliseconds, as a string). The tag is derived here and only here: a stored one (written before requests
// were kept from storing it) is never shown.
func datasetTags(ds *catalog.Dataset) map[string][]string {
	_, stored := ds.Tags[catalog.ExpirationTag]
	if ds.PendingExpiry == nil && !stored {
		return ds.Tags
	}
	tags := make(map[string][]string, len(ds.Tags)+1)
	maps.Copy(tags, ds.Tags)
	delete(tags, catalog.ExpirationTag)
	if ds.PendingExpiry != nil {
		tags[catalog.ExpirationTag] = []string{strconv.FormatInt(catalog.EpochMillis(*ds.PendingExpiry), 10)}
	}
	return tags
}

// datasetExtensions merges the extension keys the caller stored with the service's own rowExpiration of each store,
// and the store's next scheduled run where it may remove the dataset's rows (catalog.Dataset.NextRun: not while
// the dataset is held).
func (s *Server) datasetExtensions(ds *catalog.Dataset) map[string]any {
	ext := catalog.DeepMerge(map[string]any{}, ds.Extensions)
	for _, store := range catalog.Stores {
		re, ok := ds.RowExpiration[store]
		if !ok {
			continue
		}
		storeDoc, _ := ext[string(store)].(map[string]any)
		if storeDoc == nil {
			storeDoc = map[string]any{}
		}
		doc := re.Document()
		if store == catalog.LakeHouse {
			doc["rowOverrides"] = string(ds.RowOverrides)
		}
		if s.nextRun != nil {
			if next := ds.NextRun(store, s.nextRun(store)); next != nil {
				doc["nextRun"] = catalog.EpochMillis(*next)
			}
		}
		storeDoc["rowExpiration"] = doc
		if store == catalog.LakeHouse && ds.Metrics != nil {
			storeDoc["metrics"] = map[string]any{"storageSize": ds.Metrics.StorageSize, "rowCount": ds.Metrics.RowCount,
				"asOf": catalog.EpochMillis(ds.Metrics.AsOf)}
		}
		addBacklog(storeDoc, ds, store)
		ext[string(store)] = storeDoc
	}
	return ext
}

// addBacklog adds the store's expired backlog to its metrics object when it was read (GET /dataSets/{id}):
// expiredRowCount and oldestExpiredAt (epoch milliseconds, null when no row is counted), with asOf.
func addBacklog(storeDoc map[string]any, ds *catalog.Dataset, store catalog.Store) {
	b, ok := ds.Backlog[store]
	if !ok || ds.Metrics == nil {
		return
	}
	metrics, _ := storeDoc["metrics"].(map[string]any)
	if metrics == nil {
		metrics = map[string]any{"asOf": catalog.EpochMillis(ds.Metrics.AsOf)}
	}
	metrics["expiredRowCount"] = b.ExpiredRows
	metrics["oldestExpiredAt"] = nil
	if b.OldestExpiredAt != nil {
		metrics["oldestExpiredAt"] = catalog.EpochMillis(*b.OldestExpiredAt)
	}
	storeDoc["metrics"] = metrics
}

// limitsExtensions is the extensions object of GET /ttl/{id}: each store's limits, and beside the lake's the
// dataset's rowOverrides switch, which says whether its rows may carry an expiry of their own within them.
func limitsExtensions(ds *catalog.Dataset, limits map[catalog.Store]catalog.Limits) map[string]any {
	ext := map[string]any{}
	for _, store := range catalog.Stores {
		doc := limits[store].Document()
		if store == catalog.LakeHouse {
			doc["rowOverrides"] = string(ds.RowOverrides)
		}
		ext[string(store)] = map[string]any{"rowExpiration": doc}
	}
	return ext
}

// keyedEntry is one member of an object keyed by dataset id.
type keyedEntry struct {
	ID  string
	Doc any
}

// writeKeyed answers with a JSON object keyed by dataset id, in the given order: Adobe's Catalog answers lists
// that way, and a Go map would lose the order.
func writeKeyed(c echo.Context, entries []keyedEntry) error {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, e := range entries {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, _ := marshal(e.ID)
		doc, err := marshal(e.Doc)
		if err != nil {
			return fmt.Errorf("render dataset %s: %w", e.ID, err)
		}
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(doc)
	}
	buf.WriteByte('}')
	return writeJSON(c, http.StatusOK, buf.Bytes())
}

// project keeps only the named top-level properties of doc; an object with none of them renders as {}.
func project(doc datasetDoc, properties []string) (any, error) {
	if len(properties) == 0 {
		return doc, nil
	}
	raw, err := marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("render dataset: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("render dataset: %w", err)
	}
	out := map[string]json.RawMessage{}
	for _, p := range properties {
		if v, ok := all[p]; ok {
			out[p] = v
		}
	}
	return out, nil
}

func setETag(c echo.Context, ds *catalog.Dataset) {
	tag := `"` + ds.VersionString() + `"`
	c.Response().Header().Set("ETag", tag)
	c.Response().Header().Set("E-Tag", tag)
}

// parseIfMatch reads an If-Match header into the precondition it states, nil for none. Clients may send the ETag
// quoted or bare, weak (W/), and a list of tags, as RFC 9110 allows; "*" matches any version.
func parseIfMatch(header string) *catalog.Precondition {
	if header == "" {
		return nil
	}
	p := &catalog.Precondition{Asked: header}
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" {
			p.Any = true
			continue
		}
		p.Versions = append(p.Versions, strings.Trim(tag, `"`))
	}
	return p
}

func referenceList(id string) []string { return []string{"@/dataSets/" + id} }
