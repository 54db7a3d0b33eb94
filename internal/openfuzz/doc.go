// Package openfuzz holds the fuzz targets of dlock.Open over every
// registered backend (see fuzz_test.go). It has no code of its own: its
// tests import every backend, which no library package may do.
package openfuzz
