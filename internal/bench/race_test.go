//go:build race

package bench_test

// raceFlags builds the service's binaries as the test itself is built, so that they reuse the packages `go test
// -race` just compiled instead of compiling everything again.
var raceFlags = []string{"-race"}
