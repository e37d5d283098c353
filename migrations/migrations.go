// Package migrations embeds the schema as numbered up/down SQL files (NNNN_name.up.sql, NNNN_name.down.sql), applied
// in order by package postgres and by `retentionctl migrate`.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
