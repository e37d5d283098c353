// Package retention holds the rules of row expiry: the ISO-8601 period
// grammar that a dataset's rowExpiration.ttlValue must follow, and the
// calendar arithmetic that turns such a period into an expiry or cutoff
// time. The arithmetic mirrors Postgres' interval rules on purpose, so that a
// period evaluated in Go and the same period evaluated in SQL never disagree
// about which rows have expired.
package retention
