//go:build !race

package bench_test

// raceFlags builds the service's binaries as the test itself is built (see race_test.go).
var raceFlags []string
