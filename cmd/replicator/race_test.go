//go:build race

package main

// raceEnabled is true when the tests run under the race detector; the
// binary they start is then built with it too.
const raceEnabled = true
