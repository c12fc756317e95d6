package testkit

import "io"

// Closing returns v, what a constructor returned with err, for the test to
// use until it ends: it fails the test when err is not nil, and closes v at
// cleanup. A helper that builds a client is then one call:
//
//	c, err := leash.New(store, opts)
//	return testkit.Closing(t, c, err)
func Closing[T io.Closer](t TB, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}
