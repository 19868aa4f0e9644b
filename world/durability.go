package world

import "time"

// Durability modes of the audit store ("durability:"): see docs/storage.md.
const (
	DurabilityStrict  = "strict"
	DurabilityBatched = "batched"
)

var durabilityModes = []string{DurabilityStrict, DurabilityBatched}

// maxDurabilityWindow bounds "durability_window:" (store.MaxDurabilityWindow).
const maxDurabilityWindow = 10 * time.Second

// parseDurability reads "durability:" (strict or batched; an unknown mode
// is an error naming the closest one).
func (w *World) parseDurability(r nodeReader, p pair) {
	v, ok := r.str(p.v, "durability")
	if !ok {
		return
	}
	switch v {
	case DurabilityStrict, DurabilityBatched:
		w.Durability = v
	default:
		r.ds.Errorf(r.file, p.v.Line, "durability must be strict or batched, got %q%s", v, didYouMean(v, durabilityModes))
	}
}

// parseDurabilityWindow reads "durability_window:", the longest a batched
// commit waits for its sync (a duration, at most 10s).
func (w *World) parseDurabilityWindow(r nodeReader, p pair) {
	if d, ok := r.duration(p.v, "durability_window", maxDurabilityWindow); ok {
		w.DurabilityWindow = d
		w.durabilityWindowLine = p.k.Line
	}
}

// checkDurability warns about a window set for a mode that has none.
func (w *World) checkDurability(ds *Diagnostics) {
	if w.DurabilityWindow > 0 && w.Durability != DurabilityBatched {
		ds.Warnf(ConfigFile, w.durabilityWindowLine, "durability_window applies only to durability: batched (the mode is strict)")
	}
}
