// Package hostile is the hostile-tenant suite: each of its tests runs one attack a hostile or careless tenant can
// make against a real retentiond process and PostgreSQL, and checks that a victim org served beside it is unharmed
// (its rows intact, its reads as fast as before within noise, /readyz 200).
//
// The package has no code of its own; the suite is in its _test.go files and runs with `make test`.
package hostile
