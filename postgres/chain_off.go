//go:build audit_nochain

package postgres

// chainAuditEvents is false in the audit_nochain build, which exists solely for retentionbench's "audit chain"
// scenario (the cost of the chain, measured against a build without it): events are written unchained, without
// hash and prev_hash and without touching audit_chains. Such a build gives up tamper evidence; production builds
// never set the tag and always chain (chain_on.go).
const chainAuditEvents = false
