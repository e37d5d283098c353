//go:build !audit_nochain

package postgres

// chainAuditEvents is whether writeAuditEvent links each event into its org's hash chain. It is a constant so that
// only the benchmark can turn chaining off: the audit_nochain build tag (chain_off.go) exists solely for
// retentionbench's "audit chain" scenario, which compares a build with the chain to one without. Production builds
// never set the tag and always chain.
const chainAuditEvents = true
