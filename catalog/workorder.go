package catalog

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ScopeWorkOrdersManage creates record-delete work orders (POST /data/core/hygiene/workorder) and changes their name
// and description. No other scope implies it, datasets.manage included: erasing a person's rows across datasets is
// a power of its own. Reading orders takes datasets.read.
const ScopeWorkOrdersManage = "workorders.manage"

// WorkOrderStatus is where a record-delete work order stands, as Adobe's Data Hygiene API names it. Its transitions:
// received (accepted and stored) → validated (its datasets resolved into parts) → submitted (removal under way) →
// completed when every part is done; ingested when every part but those of held datasets is done (the reason names
// the hold), completed at the first tick after the release; failed (with a reason) when it cannot run at all.
type WorkOrderStatus string

// The statuses of a work order.
const (
	WorkOrderReceived  WorkOrderStatus = "received"
	WorkOrderValidated WorkOrderStatus = "validated"
	WorkOrderSubmitted WorkOrderStatus = "submitted"
	WorkOrderIngested  WorkOrderStatus = "ingested"
	WorkOrderCompleted WorkOrderStatus = "completed"
	WorkOrderFailed    WorkOrderStatus = "failed"
)

// WorkOrderStatuses lists every status, in the order of the lifecycle.
var WorkOrderStatuses = []WorkOrderStatus{WorkOrderReceived, WorkOrderValidated, WorkOrderSubmitted, WorkOrderIngested,
	WorkOrderCompleted, WorkOrderFailed}

// Open reports whether the order still has work to do (it counts against MaxWorkOrdersInFlight).
func (s WorkOrderStatus) Open() bool { return s != WorkOrderCompleted && s != WorkOrderFailed }

// Removing reports whether an order in this status is removing rows: submitted, or ingested while a part waits for
// a hold's release.
func (s WorkOrderStatus) Removing() bool { return s == WorkOrderSubmitted || s == WorkOrderIngested }

// WorkOrderAction is how answers spell the action, as Adobe's answers do; requests may also spell it
// delete_identity (Adobe's spec) or delete-identity (Adobe's guide).
const WorkOrderAction = "identity-delete"

// AllDatasets is the datasetId of an order that covers every dataset of the sandbox.
const AllDatasets = "ALL"

// Bounds of work orders and identities.
const (
	// MaxWorkOrderIdentities bounds the identities of one order, as Adobe's.
	MaxWorkOrderIdentities = 100_000
	// DefaultDailyIdentityQuota and DefaultMonthlyIdentityQuota are the identities an org's accepted orders may name
	// in a UTC day and a UTC month, Adobe's defaults; RETENTION_WORKORDER_DAILY_QUOTA and
	// RETENTION_WORKORDER_MONTHLY_QUOTA set others.
	DefaultDailyIdentityQuota   = 1_000_000
	DefaultMonthlyIdentityQuota = 2_000_000
	// MaxIdentityQuota bounds a configured quota.
	MaxIdentityQuota = 1_000_000_000
	// DefaultWorkOrdersInFlight is how many open (not completed, not failed) orders an org may have at once;
	// RETENTION_WORKORDERS_IN_FLIGHT sets another.
	DefaultWorkOrdersInFlight = 10
	// MaxNamespaceCodeLength and MaxIdentityValueLength bound an identity's namespace code and value.
	MaxNamespaceCodeLength = 64
	MaxIdentityValueLength = 1024
	// MaxRowIdentities bounds the identities one row's identityMap may carry.
	MaxRowIdentities = 100
)

// Quota names of GET /quota, as Adobe's.
const (
	QuotaDailyIdentities   = "dailyConsumerDeleteIdentitiesQuota"
	QuotaMonthlyIdentities = "monthlyConsumerDeleteIdentitiesQuota"
)

// Identity is a person's identity in one namespace.
type Identity struct {
	Namespace string
	Value     string
}

// emailNamespaces are the namespace codes whose values compare without case: Adobe's Email namespace is
// case-insensitive, so Alice@Example.com and alice@example.com are one person.
var emailNamespaces = []string{"email"}

// IdentityKey is what an identity is stored and matched by, in rows and in orders: the namespace code lowercased
// (Adobe's codes compare without case: Email and email are one namespace), a colon and the value as sent, except
// in the email namespace, whose values are lowercased. Values are otherwise compared exactly (no trimming): an
// ECID or a CRM id is case-sensitive.
func IdentityKey(namespace, value string) string {
	ns := strings.ToLower(namespace)
	if slices.Contains(emailNamespaces, ns) {
		value = strings.ToLower(value)
	}
	return ns + ":" + value
}

// Key returns the identity's IdentityKey.
func (id Identity) Key() string { return IdentityKey(id.Namespace, id.Value) }

// CheckIdentity validates a namespace code and a value; field names what the caller reads them from.
func CheckIdentity(field, namespace, value string) error {
	if !validNamespaceCode(namespace) {
		return Invalid("invalid-identity", field, "%s: namespace code %q must be 1 to %d letters, digits, _, . or - (starting with a letter or digit)",
			field, Clip(namespace), MaxNamespaceCodeLength)
	}
	if !validIdentityValue(value) {
		return Invalid("invalid-identity", field, "%s: an identity value must be 1 to %d bytes of UTF-8 text without NUL", field, MaxIdentityValueLength)
	}
	return nil
}

// validNamespaceCode tells whether namespace is 1 to MaxNamespaceCodeLength letters, digits, _, . or -, starting
// with a letter or digit. Every identity of every ingested row is checked, so it is a loop, not a regular expression.
func validNamespaceCode(namespace string) bool {
	if namespace == "" || len(namespace) > MaxNamespaceCodeLength {
		return false
	}
	for i := 0; i < len(namespace); i++ {
		c := namespace[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

func validIdentityValue(value string) bool {
	return value != "" && len(value) <= MaxIdentityValueLength && utf8.ValidString(value) && !strings.ContainsRune(value, 0)
}

// ParseIdentityMap reads an event's XDM identityMap ({"email":[{"id":"a@example.com","primary":true}]}) and returns
// the keys (IdentityKey) the row is found by. When some entry is marked "primary": true, only the primary entries
// count, as Adobe's work-order guide says: an order then matches the row by its primary identity alone. A
// malformed map refuses the line, naming the field.
func ParseIdentityMap(raw any) ([]string, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, rowErr("identityMap", "identityMap must be an object of namespace codes, each an array of {\"id\": …} objects, got %s", jsonType(raw))
	}
	var all, primary []string
	for _, ns := range sortedKeys(m) {
		list, ok := m[ns].([]any)
		if !ok {
			field := "identityMap." + Clip(ns)
			return nil, rowErr(field, "%s must be an array of {\"id\": …} objects, got %s", field, jsonType(m[ns]))
		}
		for i, e := range list {
			key, isPrimary, err := identityEntry(ns, i, e)
			if err != nil {
				return nil, err
			}
			all = append(all, key)
			if isPrimary {
				primary = append(primary, key)
			}
		}
	}
	if len(all) > MaxRowIdentities {
		return nil, rowErr("identityMap", "identityMap carries %d identities; a row carries at most %d", len(all), MaxRowIdentities)
	}
	if len(primary) > 0 {
		all = primary
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// identityEntry reads entry i of namespace ns of an identityMap. The entry's field name is built only to refuse it:
// every identity of every ingested row passes here.
func identityEntry(ns string, i int, raw any) (string, bool, error) {
	field := func() string { return fmt.Sprintf("identityMap.%s[%d]", Clip(ns), i) }
	entry, ok := raw.(map[string]any)
	if !ok {
		f := field()
		return "", false, rowErr(f, "%s must be an object with an id, got %s", f, jsonType(raw))
	}
	id, ok := entry["id"].(string)
	if !ok {
		f := field()
		return "", false, rowErr(f+".id", "%s.id must be a string, got %s", f, jsonType(entry["id"]))
	}
	if !validNamespaceCode(ns) || !validIdentityValue(id) {
		f := field()
		return "", false, rowErr(f, "%s", ErrorMessage(CheckIdentity(f, ns, id)))
	}
	primary := false
	if p, ok := entry["primary"]; ok && p != nil {
		b, ok := p.(bool)
		if !ok {
			f := field()
			return "", false, rowErr(f+".primary", "%s.primary must be true or false, got %s", f, jsonType(p))
		}
		primary = b
	}
	return IdentityKey(ns, id), primary, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WorkOrderCreate is a validated POST /workorder.
type WorkOrderCreate struct {
	DisplayName string
	Description string
	// DatasetID is one dataset's id, or AllDatasets.
	DatasetID string
	// Identities are the order's identities, deduplicated by key, in the order first sent.
	Identities []Identity
}

// Keys returns the order's identity keys.
func (c WorkOrderCreate) Keys() []string {
	keys := make([]string, len(c.Identities))
	for i, id := range c.Identities {
		keys[i] = id.Key()
	}
	return keys
}

// WorkOrderUpdate is a validated PUT /workorder/{id}: the fields present change.
type WorkOrderUpdate struct {
	DisplayName *string
	Description *string
}

// WorkOrderPartStatus is where one dataset's part of an order stands.
type WorkOrderPartStatus string

// The statuses of a part.
const (
	PartWaiting   WorkOrderPartStatus = "waiting"   // not yet done, or held (the part's Reason names the hold)
	PartCompleted WorkOrderPartStatus = "completed" // its rows are removed, with the Delete event
	PartSkipped   WorkOrderPartStatus = "skipped"   // its dataset was deleted before the part ran
)

// WorkOrderPart is an order's work on one dataset: done in one transaction with its Delete audit event.
type WorkOrderPart struct {
	DatasetID   string
	DatasetName string
	Status      WorkOrderPartStatus
	Reason      string
	RowsDeleted int64
	// Stores counts the rows removed from each store.
	Stores      map[Store]int64
	CompletedAt *time.Time
}

// WorkOrder is a record-delete work order (Adobe's workorderId DI-…), owned by an org and sandbox.
type WorkOrder struct {
	ID            string
	Org           string
	Sandbox       string
	DatasetID     string // a dataset's id, or AllDatasets
	DatasetName   string // "" for AllDatasets
	DisplayName   string
	Description   string
	Status        WorkOrderStatus
	Reason        string // why it failed, or what an ingested one waits for
	IdentityCount int
	CreatedBy     string
	Created       time.Time
	UpdatedBy     string
	Updated       time.Time
	CompletedAt   *time.Time
	RowsDeleted   int64
	Parts         []WorkOrderPart // filled by a read of one order
}

// WorkOrderFilter selects and orders an org's orders (GET /workorder). Text fields are case-insensitive "contains"
// matches; Search matches any of them or the exact id.
type WorkOrderFilter struct {
	Statuses    []WorkOrderStatus
	Search      string
	Author      string
	DisplayName string
	Description string
	WorkOrderID string
	From, To    *time.Time // createdAt window, half-open
	Page, Limit int
	OrderBy     string // a column name of workOrderOrders
	Desc        bool
}

// WorkOrderOrders maps orderBy's names (Adobe's) to what they sort by.
var WorkOrderOrders = map[string]string{
	"displayName": "display_name", "description": "description", "id": "id", "createdBy": "created_by",
	"createdAt": "created_at", "updatedAt": "updated_at", "operation": "id", "operationCount": "identity_count",
	"status": "status",
}

// WorkOrderPage is a page of orders and how many match in all.
type WorkOrderPage struct {
	Results []*WorkOrder
	Total   int
}

// WorkOrderService keeps work orders, scoped to the caller's org and sandbox: a foreign order is a missing one.
type WorkOrderService interface {
	// CreateWorkOrder stores a received order and counts its identities against the org's quotas. ENOTFOUND for a
	// dataset missing in the caller's sandbox; EBUSY past the orders in flight; EINVALID past a quota.
	CreateWorkOrder(ctx context.Context, c *Caller, create WorkOrderCreate) (*WorkOrder, error)
	// FindWorkOrder returns one order with its parts.
	FindWorkOrder(ctx context.Context, c *Caller, id string) (*WorkOrder, error)
	// FindWorkOrders returns a page of the orders matching the filter.
	FindWorkOrders(ctx context.Context, c *Caller, f WorkOrderFilter) (*WorkOrderPage, error)
	// UpdateWorkOrder changes an order's name and description.
	UpdateWorkOrder(ctx context.Context, c *Caller, id string, u WorkOrderUpdate) (*WorkOrder, error)
	// IdentityQuotas returns the org's daily and monthly identity quotas with what its accepted orders consumed.
	IdentityQuotas(ctx context.Context, c *Caller) ([]Quota, error)
	// CheckWorkOrderRoom refuses, before an order's body is read, what no order could get past now: EBUSY when the
	// org has its bound of orders in flight, EINVALID (quota-exceeded) when a quota has no identity left. It takes
	// no lock and reads no identity; CreateWorkOrder checks again, under the org's lock, with the order's count.
	CheckWorkOrderRoom(ctx context.Context, c *Caller) error
	// PreviewWorkOrder counts, without deleting or storing anything, the rows an order with these identities and
	// datasets would remove if it ran now. ENOTFOUND for a dataset missing in the caller's sandbox; EINVALID
	// (preview-over-budget) when the count takes longer than WorkOrderPreviewBudget.
	PreviewWorkOrder(ctx context.Context, c *Caller, create WorkOrderCreate) (*WorkOrderPreview, error)
}

// WorkOrderPreviewBudget is the longest a work order's preview counts before it is refused: it reads every
// partition's identities index with up to MaxWorkOrderIdentities keys, as the order's deletes will.
const WorkOrderPreviewBudget = 10 * time.Second

// WorkOrderPreview is what an order would remove if it ran at At: the rows of each dataset in its scope carrying
// one of its identities, every version of a record included, as the order's parts count them.
type WorkOrderPreview struct {
	At            time.Time
	DatasetID     string // the order's: a dataset's id, or AllDatasets
	IdentityCount int
	// DatasetCount is the datasets in the order's scope now.
	DatasetCount int
	// RowCount is the rows of every dataset and store the order would remove.
	RowCount int64
	// Datasets are the datasets holding matching rows, by name (an order on one dataset lists it even with none).
	Datasets []WorkOrderPreviewDataset
}

// WorkOrderPreviewDataset is one dataset's share of a preview.
type WorkOrderPreviewDataset struct {
	DatasetID   string
	DatasetName string
	RowCount    int64
	Stores      map[Store]int64
	// HeldBy names the hold that would keep these rows, as a waiting part's reason does ("" when none).
	HeldBy string
}

// NewWorkOrderID returns a fresh order id, DI- and a UUID, as Adobe's.
func NewWorkOrderID() string { return "DI-" + uuid.NewString() }

var workOrderIDPattern = regexp.MustCompile(`^DI-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsWorkOrderID reports whether id has the form of an order id (DI- and a lowercase UUID).
func IsWorkOrderID(id string) bool { return workOrderIDPattern.MatchString(id) }

// ValidateWorkOrderID refuses a path parameter that is not an order id; such an id names no order, but the 400
// tells a client it sent something else (a bundle id BN-…, a dataset id).
func ValidateWorkOrderID(id string) error {
	if !IsWorkOrderID(id) {
		return Invalid("invalid-workorder-id", "WORKORDER_ID", "a work order id is DI- and a lowercase UUID, got %q", Clip(id))
	}
	return nil
}

// workOrderActions are the spellings of the one action: Adobe's spec, its guide, and its answers.
var workOrderActions = []string{"delete_identity", "delete-identity", WorkOrderAction}

var createWorkOrderFields = []string{"action", "datasetId", "description", "displayName", "namespacesIdentities"}

// ParseWorkOrderCreate validates a decoded POST /workorder body.
func ParseWorkOrderCreate(body map[string]any) (WorkOrderCreate, error) {
	var create WorkOrderCreate
	if err := onlyFields(body, createWorkOrderFields, "a work order"); err != nil {
		return create, err
	}
	action, ok := body["action"].(string)
	if !ok || !slices.Contains(workOrderActions, action) {
		return create, Invalid("invalid-action", "action", "action must be one of %v, got %s", workOrderActions, compact(body["action"]))
	}
	id, ok := body["datasetId"].(string)
	switch {
	case body["datasetId"] == nil:
		return create, Invalid("missing-field", "datasetId", "datasetId is required: a dataset id, or ALL for every dataset of the sandbox")
	case !ok || (id != AllDatasets && !datasetIDPattern.MatchString(id)):
		return create, Invalid("invalid-dataset-id", "datasetId", "datasetId must be a dataset id of 24 lowercase hexadecimal characters or ALL, got %s", compact(body["datasetId"]))
	}
	create.DatasetID = id
	var err error
	if body["displayName"] == nil {
		return create, Invalid("missing-field", "displayName", "displayName is required")
	}
	if create.DisplayName, err = parseExpirationText(body["displayName"], "displayName", MaxNameLength, false); err != nil {
		return create, err
	}
	if raw, ok := body["description"]; ok && raw != nil {
		if create.Description, err = parseExpirationText(raw, "description", MaxDescriptionLength, true); err != nil {
			return create, err
		}
	}
	create.Identities, err = parseNamespacesIdentities(body["namespacesIdentities"])
	return create, err
}

// parseNamespacesIdentities reads [{"namespace":{"code":"email"},"IDs":["a@example.com"]}], deduplicated by key.
func parseNamespacesIdentities(raw any) ([]Identity, error) {
	const field = "namespacesIdentities"
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return nil, Invalid("invalid-field", field, "%s must be a non-empty array of {\"namespace\":{\"code\":…},\"IDs\":[…]}", field)
	}
	// An order of 100,000 identities is the largest body the service decodes: the namespace code is checked once
	// per entry, a field's name is written only for an error, and the set of keys is sized once.
	sent := 0
	for _, e := range list {
		if entry, ok := e.(map[string]any); ok {
			ids, _ := entry["IDs"].([]any)
			sent += len(ids)
		}
	}
	seen := make(map[string]struct{}, min(sent, MaxWorkOrderIdentities+1))
	var out []Identity
	for i, e := range list {
		at := fmt.Sprintf("%s[%d]", field, i)
		entry, ok := e.(map[string]any)
		if !ok {
			return nil, Invalid("invalid-field", at, "%s must be an object with namespace and IDs", at)
		}
		nsObj, _ := entry["namespace"].(map[string]any)
		code, ok := nsObj["code"].(string)
		if !ok {
			return nil, Invalid("invalid-field", at+".namespace.code", "%s.namespace.code must be a namespace code string", at)
		}
		ids, ok := entry["IDs"].([]any)
		if !ok || len(ids) == 0 {
			return nil, Invalid("invalid-field", at+".IDs", "%s.IDs must be a non-empty array of identity strings", at)
		}
		codeOK := validNamespaceCode(code)
		for j, v := range ids {
			value, ok := v.(string)
			if !ok || !codeOK || !validIdentityValue(value) {
				f := fmt.Sprintf("%s.IDs[%d]", at, j)
				if !ok {
					return nil, Invalid("invalid-identity", f, "%s must be a string", f)
				}
				return nil, CheckIdentity(f, code, value)
			}
			id := Identity{Namespace: code, Value: value}
			key := id.Key()
			if _, dup := seen[key]; dup {
				continue
			}
			seen[key] = struct{}{}
			if len(out) == MaxWorkOrderIdentities {
				return nil, Invalid("too-many-identities", field, "an order names at most %d identities", MaxWorkOrderIdentities)
			}
			out = append(out, id)
		}
	}
	return out, nil
}

var updateWorkOrderFields = []string{"description", "displayName", "name"}

// ParseWorkOrderUpdate validates a decoded PUT /workorder/{id} body: name (Adobe's spec; displayName is accepted
// too) and description, at least one.
func ParseWorkOrderUpdate(body map[string]any) (WorkOrderUpdate, error) {
	var u WorkOrderUpdate
	if err := onlyFields(body, updateWorkOrderFields, "a work order update"); err != nil {
		return u, err
	}
	for _, f := range []string{"name", "displayName"} {
		if raw, ok := body[f]; ok {
			s, err := parseExpirationText(raw, f, MaxNameLength, false)
			if err != nil {
				return u, err
			}
			u.DisplayName = &s
		}
	}
	if raw, ok := body["description"]; ok {
		s := ""
		if raw != nil {
			var err error
			if s, err = parseExpirationText(raw, "description", MaxDescriptionLength, true); err != nil {
				return u, err
			}
		}
		u.Description = &s
	}
	if u.DisplayName == nil && u.Description == nil {
		return u, Invalid("missing-field", "name", "a work order update changes name or description; send at least one")
	}
	return u, nil
}

// ParseWorkOrderStatuses reads a comma-separated status filter; each must be one of WorkOrderStatuses.
func ParseWorkOrderStatuses(v string) ([]WorkOrderStatus, error) {
	if v == "" {
		return nil, nil
	}
	var out []WorkOrderStatus
	for _, s := range strings.Split(v, ",") {
		st := WorkOrderStatus(s)
		if !slices.Contains(WorkOrderStatuses, st) {
			return nil, Invalid("invalid-parameter", "status", "status must be a comma-separated list of %v, got %q", WorkOrderStatuses, Clip(s))
		}
		out = append(out, st)
	}
	return out, nil
}

// ParseWorkOrderOrder reads orderBy: a name of WorkOrderOrders, optionally prefixed with + or - (descending).
// Default: newest first.
func ParseWorkOrderOrder(v string) (column string, desc bool, err error) {
	if v == "" {
		return "created_at", true, nil
	}
	name := strings.TrimLeft(v, "+- ")
	desc = strings.HasPrefix(v, "-")
	col, ok := WorkOrderOrders[name]
	if !ok {
		return "", false, Invalid("invalid-parameter", "orderBy", "orderBy must be one of the fields of %v, optionally after + or -, got %q", sortedOrderNames(), Clip(v))
	}
	return col, desc, nil
}

func sortedOrderNames() []string {
	names := make([]string, 0, len(WorkOrderOrders))
	for k := range WorkOrderOrders {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// ErrTooManyWorkOrders refuses an order past the org's orders in flight.
func ErrTooManyWorkOrders(open, most int) error {
	return &Error{Code: EBUSY, Type: "too-many-workorders", Field: "datasetId",
		Message: fmt.Sprintf("the organization has %d work orders in flight, its bound is %d; wait for one to complete", open, most)}
}

// ErrIdentityQuota refuses an order whose identities would pass a quota.
func ErrIdentityQuota(q Quota, adding int) error {
	return &Error{Code: EINVALID, Type: "quota-exceeded", Field: "namespacesIdentities",
		Message: fmt.Sprintf("the order's %d identities would pass %s: %d of %d consumed", adding, q.Name, q.Consumed, q.Quota)}
}

// ErrIdentityQuotaUsedUp refuses an order, before its identities are read, when a quota has none left.
func ErrIdentityQuotaUsedUp(q Quota) error {
	return &Error{Code: EINVALID, Type: "quota-exceeded", Field: "namespacesIdentities",
		Message: fmt.Sprintf("%s is used up: %d of %d consumed; no order is accepted until it resets", q.Name, q.Consumed, q.Quota)}
}

// IdentityHash is how audit events name an identity without holding it in clear: HMAC-SHA256 of its IdentityKey
// under the service's key (RETENTION_IDENTITY_HASH_KEY), in lowercase hex. A reviewer who holds the key checks that
// an order erased alice@example.com by computing `retentionctl workorders hash email alice@example.com` and finding
// it in the identityHashes of the order's Delete events; without the key, the hashes tell nothing.
func IdentityHash(key []byte, identityKey string) string {
	return NewIdentityHasher(key).Hash(identityKey)
}

// IdentityHasher computes IdentityHash for many identities under one key, its HMAC's state set up once (an order's
// million keys spent more time setting it up than hashing). It is not safe for concurrent use.
type IdentityHasher struct {
	mac hash.Hash
	sum []byte
}

// NewIdentityHasher returns a hasher of identities under key.
func NewIdentityHasher(key []byte) *IdentityHasher {
	return &IdentityHasher{mac: hmac.New(sha256.New, key)}
}

// Hash returns IdentityHash of identityKey.
func (h *IdentityHasher) Hash(identityKey string) string {
	h.mac.Reset()
	h.mac.Write([]byte(identityKey))
	h.sum = h.mac.Sum(h.sum[:0])
	return hex.EncodeToString(h.sum)
}

// PrimaryIdentityExtension is the extension key where a dataset declares its primary identity, for rows that carry
// no identityMap: {"namespace": "email", "path": "person.email"}, the namespace code and the dotted path of the
// row's field holding the value. It is set and cleared by PATCH like any extension key, so its changes are audited
// with the dataset's other settings, in the same transaction; ApplyPatch refuses a malformed one.
const PrimaryIdentityExtension = "primaryIdentity"

// PrimaryIdentity is a dataset's declared primary identity.
type PrimaryIdentity struct {
	Namespace string
	Path      []string
}

// DatasetPrimaryIdentity reads the declaration from a dataset's extension keys: nil when it has none.
func DatasetPrimaryIdentity(ext map[string]any) (*PrimaryIdentity, error) {
	raw, ok := ext[PrimaryIdentityExtension]
	if !ok || raw == nil {
		return nil, nil
	}
	const field = "extensions." + PrimaryIdentityExtension
	obj, ok := raw.(map[string]any)
	ns, nsOK := obj["namespace"].(string)
	path, pathOK := obj["path"].(string)
	if !ok || !nsOK || !pathOK || len(obj) != 2 {
		return nil, Invalid("invalid-field", field, `%s must be {"namespace": <a namespace code>, "path": <the dotted path of the field holding the value>}`, field)
	}
	if !validNamespaceCode(ns) {
		return nil, Invalid("invalid-field", field+".namespace", "%s.namespace must be 1 to %d letters, digits, _, . or - (starting with a letter or digit)", field, MaxNamespaceCodeLength)
	}
	segments := strings.Split(path, ".")
	if len(path) > MaxNameLength || slices.Contains(segments, "") || strings.HasPrefix(path, "_") || segments[0] == "timestamp" || segments[0] == "identityMap" {
		return nil, Invalid("invalid-field", field+".path", "%s.path must be a dotted path of 1 to %d bytes to a field of the event's own data (not _…, timestamp or identityMap), got %q", field, MaxNameLength, Clip(path))
	}
	return &PrimaryIdentity{Namespace: ns, Path: segments}, nil
}

// rowKeys returns the identity key of a row without identityMap under the dataset's declaration: none
// when the row has no string at the path; a value that is no identity refuses the line, naming the path.
func (pi *PrimaryIdentity) rowKeys(obj map[string]any) ([]string, error) {
	var v any = obj
	for _, seg := range pi.Path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		v = m[seg]
	}
	s, ok := v.(string)
	if !ok {
		return nil, nil
	}
	field := strings.Join(pi.Path, ".")
	if err := CheckIdentity(field, pi.Namespace, s); err != nil {
		return nil, rowErr(field, "%s (the dataset's primary identity)", ErrorMessage(err))
	}
	return []string{IdentityKey(pi.Namespace, s)}, nil
}
