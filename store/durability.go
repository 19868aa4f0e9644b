package store

import (
	"fmt"
	"time"
)

// Durability is when a committed audit record reaches stable storage
// (docs/storage.md, "Durability modes").
type Durability string

const (
	// Strict (the default): a commit that must be durable waits for
	// stable storage (fsync, or Postgres's WAL flush) before its caller
	// goes on; only AdmitRequest.NoSync admissions are relaxed.
	Strict Durability = "strict"
	// Batched: every commit is committed — visible to every process,
	// surviving a crash of the process — before its caller goes on, and
	// made durable within the store's durability window by one background
	// sync that covers every commit before it. A power loss or an
	// operating-system crash can lose the last window.
	Batched Durability = "batched"
)

// DefaultDurabilityWindow is how long a Batched store lets a commit wait
// for its sync when no window is set.
const DefaultDurabilityWindow = 10 * time.Millisecond

// MaxDurabilityWindow bounds a Batched store's window.
const MaxDurabilityWindow = 10 * time.Second

// DurabilityModes lists the modes, for messages.
var DurabilityModes = []string{string(Strict), string(Batched)}

// Normalize returns d with its defaults ("" is Strict, a Batched window of
// 0 is DefaultDurabilityWindow), or ErrInvalid for an unknown mode or a
// window out of (0, MaxDurabilityWindow].
func (d Durability) Normalize(window time.Duration) (Durability, time.Duration, error) {
	switch d {
	case "", Strict:
		return Strict, 0, nil
	case Batched:
		if window == 0 {
			window = DefaultDurabilityWindow
		}
		if window < 0 || window > MaxDurabilityWindow {
			return "", 0, fmt.Errorf("%w: durability window %v out of (0, %v]", ErrInvalid, window, MaxDurabilityWindow)
		}
		return Batched, window, nil
	}
	return "", 0, fmt.Errorf("%w: durability must be strict or batched, got %q", ErrInvalid, string(d))
}
