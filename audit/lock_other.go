//go:build !unix

package audit

import "os"

// lockExclusive is a no-op where flock is not available: one writer per
// directory is then the caller's responsibility.
func lockExclusive(*os.File) error { return nil }
