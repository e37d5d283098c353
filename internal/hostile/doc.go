// Package hostile is the hostile-tenant suite: each of its tests runs one attack a hostile or careless tenant can
// make against a real retentiond process and PostgreSQL, and checks that a victim org served beside it is unharmed
// (its rows intact and every read answered, /readyz 200). No verdict rests on a duration measured alone, which
// moves with the machine's load: slowness is judged by the work a victim waits for (connections, partitions) or
// against a control measured alternately with it in the same run, with a wide margin.
//
// The package has no code of its own; the suite is in its _test.go files and runs with `make test`.
package hostile
