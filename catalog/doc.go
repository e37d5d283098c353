// Package catalog holds the dataset and its settings as domain types: datasets, their two row-expiration stores,
// the policy limits that bound a TTL, the PATCH v2 merge rules, and the caller on whose behalf a change is made. It
// also holds how events become rows: the EventReader that reads and validates an ingestion body for the API and the
// CLI alike, and the RowWriter port that writes the rows it yields.
// It imports no adapter: Postgres lives in package postgres and HTTP in package httpapi.
package catalog
