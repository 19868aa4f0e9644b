//go:build unix

package audit

import (
	"os"
	"syscall"
)

// lockExclusive takes a non-blocking exclusive advisory lock on f; it is
// released when f is closed (or the process exits).
func lockExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
