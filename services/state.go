package services

import (
	"context"
	"errors"
	"fmt"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// The world's shared state: a key/value map every agent reads and writes,
// with a version per key for compare-and-set (syscall.state.read and
// syscall.state.write). A write that names
// expect_version lands only on that version: two agents racing on one key
// never silently overwrite each other; the loser gets a KindConflict
// result that says the current version, reads again and retries.

// stateReadTool is syscall.state.read.
func (m *Module) stateReadTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.state.read",
			Description: "Read a key of the world's shared state with its version, or (without key) a page of all keys, optionally under a prefix.",
			InputSchema: schema(nil,
				prop("key", str("The key to read; leave out to list keys.")),
				prop("prefix", str("Without key: only keys starting with this prefix.")),
				propLimit, propCursor),
		},
		man: armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState}},
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Key    string `json:"key"`
				Prefix string `json:"prefix"`
				Limit  int    `json:"limit"`
				Cursor string `json:"cursor"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			if a.Key != "" && (a.Prefix != "" || a.Cursor != "") {
				return c.fail(armory.KindInvalid, "give either key (one entry) or prefix/cursor (a page of entries), not both")
			}
			if a.Key != "" {
				e, err := m.ReadState(ctx, a.Key)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(e)
			}
			entries, next, err := m.ListState(ctx, a.Prefix, pageArgs(a.Limit, a.Cursor))
			if err != nil {
				return armory.FailErr(err)
			}
			return jsonResult(listPage[*store.StateEntry]{Items: nonNilSlice(entries), NextCursor: next})
		},
	}
}

// StateWrite is a write of syscall.state.write (or of a person, through
// WriteState).
type StateWrite struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// ExpectVersion, when set, makes the write a compare-and-set: it lands
	// only if the key is at that version (0: only if it does not exist).
	ExpectVersion *int64 `json:"expect_version,omitempty"`
}

// StateWritten is a write's result.
type StateWritten struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
}

// stateWriteTool is syscall.state.write.
func (m *Module) stateWriteTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name: "syscall.state.write",
			Description: "Write a key of the world's shared state (values up to 64 KiB). Pass expect_version (from state.read; 0 for a new key) " +
				"to write only if nobody changed it since: on a conflict, read again, re-apply your change and retry.",
			InputSchema: schema([]string{"key", "value"},
				prop("key", str("The key (at most 256 bytes).")),
				prop("value", str("The new value (at most 64 KiB).")),
				prop("expect_version", `{"type":"integer","minimum":0,"description":"Write only if the key is at this version (0: only if it does not exist yet)."}`)),
		},
		man: armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapWriteState}},
		run: func(ctx context.Context, c call) armory.Result {
			var a StateWrite
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			w, err := m.writeState(ctx, a)
			if err != nil {
				return armory.FailErr(err)
			}
			return jsonResult(w)
		},
	}
}

// ReadState returns the state entry of key. Errors: KindNotFound,
// KindInvalid, KindUnavailable (the store).
func (m *Module) ReadState(ctx context.Context, key string) (*store.StateEntry, error) {
	const op = "syscall.state.read"
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	e, err := st.ReadState(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, armory.E(op, armory.KindNotFound, fmt.Sprintf("state key %q does not exist; write it with expect_version 0 to create it", key))
	}
	return e, store.Err(op, err)
}

// ListState returns a page of the state entries whose key starts with
// prefix, ordered by key, and the next page's cursor ("" on the last).
// Errors: KindInvalid (a bad cursor), KindUnavailable.
func (m *Module) ListState(ctx context.Context, prefix string, p store.Page) ([]*store.StateEntry, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	entries, next, err := st.ReadAllState(ctx, prefix, pageArgs(p.Limit, p.Cursor))
	return entries, next, store.Err("syscall.state.read", err)
}

// WriteState is a person's state write (REST, CLI), audited through p as
// tool "state.write" with via (the surface). Errors: as writeState's; a
// KindUnavailable after the write means only its audit entry is missing.
func (m *Module) WriteState(ctx context.Context, p *pipeline.Pipeline, via string, w StateWrite) (StateWritten, error) {
	out, err := m.writeState(ctx, w)
	if err != nil {
		return out, err
	}
	args := map[string]any{"key": w.Key, "value": w.Value, "via": via}
	if w.ExpectVersion != nil {
		args["expect_version"] = *w.ExpectVersion
	}
	return out, audited(ctx, p, pipeline.HumanAction{Tool: "state.write", Args: args,
		Result: fmt.Sprintf("state %q written at version %d by %s via %s", w.Key, out.Version, pipeline.Human, via)})
}

// writeState writes w. Errors: KindConflict (a stale expect_version; the
// message says the current version), KindInvalid (bounds, a negative
// version), KindUnavailable.
func (m *Module) writeState(ctx context.Context, w StateWrite) (StateWritten, error) {
	const op = "syscall.state.write"
	expect := store.AnyVersion
	if w.ExpectVersion != nil {
		if *w.ExpectVersion < 0 {
			return StateWritten{}, armory.E(op, armory.KindInvalid, "expect_version must be 0 (a new key) or a version state.read returned")
		}
		expect = *w.ExpectVersion
	}
	if err := store.CheckState(w.Key, w.Value); err != nil {
		return StateWritten{}, store.Err(op, err)
	}
	st, err := m.store(ctx)
	if err != nil {
		return StateWritten{}, err
	}
	v, err := st.WriteState(ctx, w.Key, w.Value, expect)
	if errors.Is(err, store.ErrConflict) {
		return StateWritten{}, stateConflict(ctx, st, w.Key, expect)
	}
	if err != nil {
		return StateWritten{}, store.Err(op, err)
	}
	return StateWritten{Key: w.Key, Version: v}, nil
}

// stateConflict is the KindConflict error of a stale compare-and-set,
// saying the key's current version.
func stateConflict(ctx context.Context, st store.State, key string, expect int64) error {
	const op = "syscall.state.write"
	cur, err := st.ReadState(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return armory.E(op, armory.KindConflict, fmt.Sprintf("state key %q does not exist (you expected version %d); write it with expect_version 0 to create it", key, expect))
	case err != nil:
		return armory.E(op, armory.KindConflict, fmt.Sprintf("state key %q is not at version %d (reading its current version failed: %v); read it again and retry", key, expect, err))
	case expect == 0:
		return armory.E(op, armory.KindConflict, fmt.Sprintf("state key %q already exists, at version %d; read it, re-apply your change and write with expect_version %d", key, cur.Version, cur.Version))
	}
	return armory.E(op, armory.KindConflict, fmt.Sprintf("state key %q is at version %d, not %d: someone wrote it since you read it; read it again, re-apply your change and write with expect_version %d", key, cur.Version, expect, cur.Version))
}

// nonNilSlice returns xs, or an empty slice for nil (a JSON [] rather than
// null).
func nonNilSlice[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
