package catalog

import "slices"

// Scopes a token may grant, space-separated in its scope claim.
const (
	ScopeDatasetsRead   = "datasets.read"
	ScopeDatasetsManage = "datasets.manage"
	ScopeAuditRead      = "audit.read"
	ScopeRetentionRun   = "retention.run"
	// ScopeRetentionHold places and releases legal holds and reads the expired rows a hold keeps. No other scope
	// implies it, datasets.manage included: stopping deletion is a compliance decision, not a dataset setting.
	ScopeRetentionHold = "retention.hold"
)

// AllScopes lists every scope the service checks, for the development tokens that grant them all (retentiond --dev,
// retentionctl token, make run-cells): a scope added to the service is added here, or those tokens lack it.
var AllScopes = []string{ScopeDatasetsRead, ScopeDatasetsManage, ScopeAuditRead, ScopeRetentionRun, ScopeRetentionHold,
	ScopeWorkOrdersManage}

// DefaultSandbox is the sandbox of a request that names none, as the seed's own PATCH requests do.
const DefaultSandbox = "prod"

// Caller is the authenticated principal a request acts for, and the tenancy it acts in.
type Caller struct {
	User      string // the token's sub, shown as createdUser/updatedUser and in audit events
	ClientID  string
	Org       string
	Sandbox   string
	Scopes    []string
	RequestID string // carried into audit events so a change can be traced to its request
}

// HasScope reports whether the caller's token grants scope. datasets.manage implies datasets.read, since a client
// allowed to change a dataset must be able to see it.
func (c *Caller) HasScope(scope string) bool {
	if slices.Contains(c.Scopes, scope) {
		return true
	}
	return scope == ScopeDatasetsRead && slices.Contains(c.Scopes, ScopeDatasetsManage)
}
