package audit

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acme/retention/catalog"
)

// Field is an event property the Audit Query API filters or orders on. The names are Adobe's.
type Field string

// Fields of the query language.
const (
	FieldAction    Field = "action"
	FieldAssetType Field = "assetType"
	FieldAssetID   Field = "assetId"
	FieldAssetName Field = "assetName"
	FieldUser      Field = "user"
	FieldStatus    Field = "status"
	FieldRequestID Field = "requestId"
	FieldTimestamp Field = "timestamp"
	// FieldType is Adobe's event type, Core or Enhanced. Every event of this service is a top-level (core) record,
	// so type==core matches all of them and type==enhanced none.
	FieldType Field = "type"
)

// filterable lists the fields a property filter may name, in the order error messages list them.
var filterable = []Field{
	FieldAction, FieldAssetType, FieldAssetID, FieldAssetName, FieldUser, FieldStatus, FieldRequestID, FieldTimestamp, FieldType,
}

// CaseInsensitive reports whether the field matches values without regard to case, as Adobe's examples
// (action==create) expect of its enumerations.
func (f Field) CaseInsensitive() bool {
	return f == FieldAction || f == FieldAssetType || f == FieldStatus || f == FieldType
}

// Op is a filter's comparison.
type Op string

// Operators; the ordering ones apply only to timestamp. Longer operators come first, so parsing finds >= before >.
const (
	OpEq Op = "=="
	OpNe Op = "!="
	OpGe Op = ">="
	OpLe Op = "<="
	OpGt Op = ">"
	OpLt Op = "<"
)

var ops = []Op{OpEq, OpNe, OpGe, OpLe, OpGt, OpLt}

// Filter is one property term: Field Op Values. With == any value matches (a comma in the term separates them);
// with != none may. Times holds the parsed values of a timestamp filter.
type Filter struct {
	Field  Field
	Op     Op
	Values []string
	Times  []time.Time
}

// String is the filter in the query language.
func (f Filter) String() string { return string(f.Field) + string(f.Op) + strings.Join(f.Values, ",") }

// Order is one key of orderBy.
type Order struct {
	Field Field
	Desc  bool
}

// String is the key in the query language, with its explicit sign.
func (o Order) String() string {
	if o.Desc {
		return "-" + string(o.Field)
	}
	return "+" + string(o.Field)
}

// Limits of a page.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
	// TotalCap bounds the count behind totalElements: counting stops past it, so a page of a huge log costs the
	// same as one of a small log, and the page says the total is capped.
	TotalCap = 10_000
)

// ExportWindow is how far back an export reaches, as Adobe's export does: the last 365 days.
const ExportWindow = 365 * 24 * time.Hour

// Query is a parsed, validated audit query. Every filter must hold. OrderBy always has at least one key.
type Query struct {
	Filters []Filter
	OrderBy []Order
	Limit   int
	Start   int
}

// Params are a query's parameters as the client sent them; an empty string means the parameter is absent.
type Params struct {
	Property []string
	OrderBy  string
	Limit    string
	Start    string
	QueryID  string
}

// ParseQuery validates params into a Query. A queryId stands for the filters, order and limit of the query it was
// issued for; limit and start may still be given beside it (the next-page links do), but property and orderBy may
// not. Every refusal is an EINVALID error naming the parameter and, for a filter, the term.
func ParseQuery(p Params) (Query, error) {
	if p.QueryID != "" {
		if len(p.Property) > 0 || p.OrderBy != "" {
			return Query{}, catalog.Invalid("invalid-query-id", "queryId",
				"queryId stands for a whole query: send it without property and orderBy, or send those without queryId")
		}
		stored, err := decodeQueryID(p.QueryID)
		if err != nil {
			return Query{}, err
		}
		if p.Limit != "" {
			stored.Limit = p.Limit
		}
		stored.Start = p.Start
		return ParseQuery(stored)
	}
	q := Query{Limit: DefaultLimit}
	for _, term := range p.Property {
		f, err := ParseFilter(term)
		if err != nil {
			return Query{}, err
		}
		q.Filters = append(q.Filters, f)
	}
	var err error
	if q.OrderBy, err = ParseOrderBy(p.OrderBy); err != nil {
		return Query{}, err
	}
	if p.Limit != "" {
		n, err := strconv.Atoi(p.Limit)
		if err != nil || n < 1 || n > MaxLimit {
			return Query{}, catalog.Invalid("invalid-limit", "limit", "limit must be an integer from 1 to %d, got %q", MaxLimit, catalog.Clip(p.Limit))
		}
		q.Limit = n
	}
	if p.Start != "" {
		n, err := strconv.Atoi(p.Start)
		if err != nil || n < 0 {
			return Query{}, catalog.Invalid("invalid-start", "start", "start must be an integer of 0 or more, got %q", catalog.Clip(p.Start))
		}
		q.Start = n
	}
	return q, nil
}

// ParseFilter parses one property term, FIELD OP VALUE[,VALUE…], such as action==Create,Update or
// timestamp>2025-01-01T00:00:00Z.
func ParseFilter(term string) (Filter, error) {
	if err := catalog.CheckText("property", term); err != nil {
		return Filter{}, err
	}
	i := 0
	for i < len(term) && (term[i] >= 'a' && term[i] <= 'z' || term[i] >= 'A' && term[i] <= 'Z') {
		i++
	}
	name, rest := term[:i], term[i:]
	var op Op
	for _, o := range ops {
		if strings.HasPrefix(rest, string(o)) {
			op = o
			break
		}
	}
	if name == "" || op == "" {
		return Filter{}, catalog.Invalid("invalid-filter", "property",
			"property %q is not a filter: write FIELD==VALUE, FIELD!=VALUE, or timestamp>TIME / timestamp<TIME (also >=, <=), with commas between values that may each match", catalog.Clip(term))
	}
	f := Filter{Field: Field(name), Op: op}
	if !slices.Contains(filterable, f.Field) {
		return Filter{}, catalog.Invalid("unknown-filter-field", "property",
			"property %q filters on %q, which the Audit Query API does not offer; filter on one of %s", catalog.Clip(term), catalog.Clip(name), fieldList(filterable))
	}
	value := strings.TrimPrefix(rest, string(op))
	if value == "" {
		return Filter{}, catalog.Invalid("invalid-filter", "property", "property %q has no value after %s", catalog.Clip(term), op)
	}
	ordering := op != OpEq && op != OpNe
	if ordering && f.Field != FieldTimestamp {
		return Filter{}, catalog.Invalid("invalid-filter", "property",
			"property %q compares %s with %s, but only timestamp takes >, <, >= and <=; use == or !=", catalog.Clip(term), catalog.Clip(name), op)
	}
	for _, v := range strings.Split(value, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return Filter{}, catalog.Invalid("invalid-filter", "property", "property %q has an empty value in its comma-separated list", catalog.Clip(term))
		}
		f.Values = append(f.Values, v)
	}
	if ordering && len(f.Values) > 1 {
		return Filter{}, catalog.Invalid("invalid-filter", "property",
			"property %q gives %s several values; a range is two terms, such as timestamp>A and timestamp<B", catalog.Clip(term), op)
	}
	switch f.Field {
	case FieldTimestamp:
		for _, v := range f.Values {
			t, err := parseTime(v)
			if err != nil {
				return Filter{}, catalog.Invalid("invalid-filter", "property",
					"property %q: %q is not an RFC 3339 time such as 2025-01-31T00:00:00Z", catalog.Clip(term), catalog.Clip(v))
			}
			f.Times = append(f.Times, t)
		}
	case FieldType:
		for _, v := range f.Values {
			if !strings.EqualFold(v, "core") && !strings.EqualFold(v, "enhanced") {
				return Filter{}, catalog.Invalid("invalid-filter", "property", "property %q: type is core or enhanced, got %q", catalog.Clip(term), catalog.Clip(v))
			}
		}
	}
	return f, nil
}

// parseTime reads RFC 3339, and also the form events show (2025-06-24T16:50:28.318+0000), so a timestamp copied from
// an event works in a filter. A '+' that arrived as a space (an unencoded + in a query string) is taken back.
func parseTime(v string) (time.Time, error) {
	v = strings.ReplaceAll(v, " ", "+")
	for _, layout := range []string{time.RFC3339Nano, TimestampLayout, "2006-01-02T15:04:05-0700"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time: %q", catalog.Clip(v))
}

// TimestampLayout is how events show their time, as Adobe's do: milliseconds and a numeric zone, in UTC.
const TimestampLayout = "2006-01-02T15:04:05.000-0700"

// orderable lists the fields orderBy may name.
var orderable = []Field{FieldTimestamp, FieldAction, FieldAssetType, FieldAssetID, FieldAssetName, FieldUser, FieldStatus, FieldRequestID}

// ParseOrderBy parses orderBy: comma-separated fields in priority order, each prefixed with + (ascending) or -
// (descending); a field without prefix is ascending. Empty means -timestamp, newest first.
func ParseOrderBy(s string) ([]Order, error) {
	if s == "" {
		return []Order{{Field: FieldTimestamp, Desc: true}}, nil
	}
	var out []Order
	for _, key := range strings.Split(s, ",") {
		o := Order{}
		switch {
		case strings.HasPrefix(key, "-"):
			o.Desc, key = true, key[1:]
		case strings.HasPrefix(key, "+"):
			key = key[1:]
		case strings.HasPrefix(key, " "):
			key = key[1:] // a + sent unencoded arrives as a space
		}
		o.Field = Field(key)
		if !slices.Contains(orderable, o.Field) {
			return nil, catalog.Invalid("invalid-order-by", "orderBy",
				"orderBy %q: %q is not a field to order by; use one of %s, each optionally prefixed with + or -", catalog.Clip(s), catalog.Clip(key), fieldList(orderable))
		}
		if slices.ContainsFunc(out, func(p Order) bool { return p.Field == o.Field }) {
			return nil, catalog.Invalid("invalid-order-by", "orderBy", "orderBy %q names %s twice", catalog.Clip(s), catalog.Clip(key))
		}
		out = append(out, o)
	}
	return out, nil
}

func fieldList(fields []Field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// queryIDPrefix versions the encoding of query ids.
const queryIDPrefix = "q1?"

// ID returns the query's queryId: its filters, order and limit, encoded reversibly (base64url of a query string),
// so that any replica can re-run it without storing anything. It carries no tenancy: a queryId runs in the scope of
// whoever sends it.
func (q Query) ID() string {
	return base64.RawURLEncoding.EncodeToString([]byte(queryIDPrefix + q.Encode(false)))
}

// Encode renders the query as URL query parameters (property…, orderBy, limit, and with start also start), in a
// fixed order.
func (q Query) Encode(start bool) string {
	v := url.Values{}
	for _, f := range q.Filters {
		v.Add("property", f.String())
	}
	keys := make([]string, len(q.OrderBy))
	for i, o := range q.OrderBy {
		keys[i] = o.String()
	}
	v.Set("orderBy", strings.Join(keys, ","))
	v.Set("limit", strconv.Itoa(q.Limit))
	if start {
		v.Set("start", strconv.Itoa(q.Start))
	}
	return v.Encode()
}

func decodeQueryID(id string) (Params, error) {
	bad := catalog.Invalid("invalid-query-id", "queryId", "queryId %q is not one this service issued", catalog.Clip(id))
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return Params{}, bad
	}
	encoded, ok := strings.CutPrefix(string(raw), queryIDPrefix)
	if !ok {
		return Params{}, bad
	}
	v, err := url.ParseQuery(encoded)
	if err != nil {
		return Params{}, bad
	}
	// A queryId is the client's to forge: what it decodes to must pass the checks a query parameter passes.
	for _, values := range v {
		for _, value := range values {
			if catalog.CheckText("queryId", value) != nil {
				return Params{}, bad
			}
		}
	}
	return Params{Property: v["property"], OrderBy: v.Get("orderBy"), Limit: v.Get("limit")}, nil
}
