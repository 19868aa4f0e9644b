package services

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// Knowledge: the world's shared knowledge base (syscall.knowledge.*). Each entry has a read and a write list (acl.go);
// the tools enforce them for the calling agent, a person (REST, CLI) is
// not bound by them. A new entry is readable by everyone and writable by
// its author unless the write names its lists. Writing or deleting needs
// the write list; changing the lists is a write. Every write is a
// compare-and-set on the entry's version, so the permission decided is
// the permission of the version written: an entry changed in between is
// read and decided again.

// KnowledgeWrite is a write of syscall.knowledge.write (or of a person's
// PutKnowledge).
type KnowledgeWrite struct {
	Key   string `json:"key"`
	Title string `json:"title,omitempty"`
	Body  string `json:"body"`
	// Read and Write replace the entry's lists when given (nil keeps
	// them; a new entry gets ["*"] and ["agent:<author>"]).
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// ExpectVersion, when set, writes only on that version (0: a new
	// entry only).
	ExpectVersion *int64 `json:"expect_version,omitempty"`
}

// KnowledgeSummary is an entry in a list: everything but the body.
type KnowledgeSummary struct {
	Key       string   `json:"key"`
	Title     string   `json:"title,omitempty"`
	Author    string   `json:"author,omitempty"`
	Bytes     int      `json:"bytes"`
	Version   int64    `json:"version"`
	UpdatedAt string   `json:"updated_at"`
	CanWrite  bool     `json:"can_write"`
	Read      []string `json:"read,omitempty"`
	Write     []string `json:"write,omitempty"`
}

func summarize(e *store.KnowledgeEntry, canWrite bool) KnowledgeSummary {
	return KnowledgeSummary{Key: e.Key, Title: e.Title, Author: e.Author, Bytes: len(e.Body), Version: e.Version,
		UpdatedAt: e.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z"), CanWrite: canWrite}
}

func (m *Module) principal(agent string) Principal {
	return Principal{Agent: agent, Groups: m.groupsOf(agent)}
}

// refusal is the KindPermission error of a refused decision.
func refusal(op string, d ACLDecision) error {
	return armory.E(op, armory.KindPermission, strings.Join(d.Reasons, "; "))
}

func knowledgeErr(op, key string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return armory.E(op, armory.KindNotFound, fmt.Sprintf("no knowledge entry %q; syscall.knowledge.list shows the entries you may read", key))
	}
	return store.Err(op, err)
}

// checkACL validates an access list given in a write.
func checkACL(op, which string, list []string) error {
	if len(list) > store.MaxBatch {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("the %s list has %d entries; the limit is %d", which, len(list), store.MaxBatch))
	}
	for _, p := range list {
		if err := checkPrincipal(p); err != nil {
			return armory.E(op, armory.KindInvalid, err.Error())
		}
	}
	return nil
}

// putKnowledge writes w as who (nil: a person, not bound by the lists).
// Errors: KindPermission (with the reasons), KindConflict (a stale
// expect_version, saying the current one), KindInvalid, KindUnavailable.
func (m *Module) putKnowledge(ctx context.Context, who *Principal, w KnowledgeWrite) (*store.KnowledgeEntry, error) {
	const op = "syscall.knowledge.write"
	if err := checkAllText(store.CheckText("knowledge key", w.Key, store.MaxKey, true),
		store.CheckText("title", w.Title, store.MaxSubject, false), store.CheckText("body", w.Body, store.MaxBody, false)); err != nil {
		return nil, store.Err(op, err)
	}
	if err := checkACL(op, "read", w.Read); err != nil {
		return nil, err
	}
	if err := checkACL(op, "write", w.Write); err != nil {
		return nil, err
	}
	if w.ExpectVersion != nil && *w.ExpectVersion < 0 {
		return nil, armory.E(op, armory.KindInvalid, "expect_version must be 0 (a new entry) or a version knowledge.read returned")
	}
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	author := pipeline.Human
	if who != nil {
		author = who.Agent
	}
	for range 5 {
		cur, err := st.GetKnowledge(ctx, w.Key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, store.Err(op, err)
		}
		var e store.KnowledgeEntry
		expect := int64(0)
		if cur != nil {
			if who != nil {
				if d := DecideKnowledge(cur, *who, AccessWrite); !d.Allowed {
					return nil, refusal(op, d)
				}
			}
			e, expect = *cur, cur.Version
		} else {
			e = store.KnowledgeEntry{Key: w.Key, Author: author, Read: []string{Everyone}, Write: []string{"agent:" + author}}
			if who == nil {
				e.Write = []string{}
			}
		}
		if w.ExpectVersion != nil && *w.ExpectVersion != expect {
			if cur == nil {
				return nil, armory.E(op, armory.KindConflict, fmt.Sprintf("knowledge entry %q does not exist (you expected version %d); write it with expect_version 0 to create it", w.Key, *w.ExpectVersion))
			}
			return nil, armory.E(op, armory.KindConflict, fmt.Sprintf("knowledge entry %q is at version %d, not %d: read it again, re-apply your change and write with expect_version %d", w.Key, cur.Version, *w.ExpectVersion, cur.Version))
		}
		e.Title, e.Body = w.Title, w.Body
		if w.Read != nil {
			e.Read = w.Read
		}
		if w.Write != nil {
			e.Write = w.Write
		}
		err = st.PutKnowledge(ctx, &e, expect)
		if errors.Is(err, store.ErrConflict) {
			continue // changed in between: decide again on the new version
		}
		if err != nil {
			return nil, store.Err(op, err)
		}
		return &e, nil
	}
	return nil, armory.E(op, armory.KindConflict, fmt.Sprintf("knowledge entry %q kept changing while this write was applied; read it and retry", w.Key))
}

// deleteKnowledge deletes key as who (nil: a person). Errors:
// KindNotFound, KindPermission, KindConflict, KindUnavailable.
func (m *Module) deleteKnowledge(ctx context.Context, who *Principal, key string, expectVersion *int64) (*store.KnowledgeEntry, error) {
	const op = "syscall.knowledge.delete"
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	for range 5 {
		cur, err := st.GetKnowledge(ctx, key)
		if err != nil {
			return nil, knowledgeErr(op, key, err)
		}
		if who != nil {
			if d := DecideKnowledge(cur, *who, AccessWrite); !d.Allowed {
				return nil, refusal(op, d)
			}
		}
		if expectVersion != nil && *expectVersion != cur.Version {
			return nil, armory.E(op, armory.KindConflict, fmt.Sprintf("knowledge entry %q is at version %d, not %d; read it again before deleting it", key, cur.Version, *expectVersion))
		}
		err = st.DeleteKnowledge(ctx, key, cur.Version)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, store.Err(op, err)
		}
		return cur, nil
	}
	return nil, armory.E(op, armory.KindConflict, fmt.Sprintf("knowledge entry %q kept changing while it was deleted; read it and retry", key))
}

// listKnowledge returns a page of the entries under prefix that who may
// read (nil: a person, all of them). A page may hold fewer than the limit
// when the caller may not read some entries; the cursor goes on after
// them.
func (m *Module) listKnowledge(ctx context.Context, who *Principal, prefix string, p store.Page) ([]KnowledgeSummary, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	entries, next, err := st.ListKnowledge(ctx, prefix, pageArgs(p.Limit, p.Cursor))
	if err != nil {
		return nil, "", store.Err("syscall.knowledge.list", err)
	}
	out := make([]KnowledgeSummary, 0, len(entries))
	for _, e := range entries {
		if who == nil {
			s := summarize(e, true)
			s.Read, s.Write = e.Read, e.Write
			out = append(out, s)
			continue
		}
		if DecideKnowledge(e, *who, AccessRead).Allowed {
			out = append(out, summarize(e, DecideKnowledge(e, *who, AccessWrite).Allowed))
		}
	}
	return out, next, nil
}

// --- The tools

var (
	knowledgeRead  = armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState}}
	knowledgeWrite = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState, armory.CapWriteState}}
	knowledgeDel   = armory.Manifest{Danger: armory.DangerDangerous, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState, armory.CapWriteState}}
	aclProp        = func(which, def string) string {
		return stringList(fmt.Sprintf("Who may %s it: \"*\" (everyone), \"agent:<id>\", \"group:<privilege group>\". Leave out to keep the current list (a new entry: %s).", which, def))
	}
)

// knowledgeTools are syscall.knowledge.list, read, write and delete.
func (m *Module) knowledgeTools() []*tool {
	return []*tool{
		{
			spec: armory.Spec{
				Name:        "syscall.knowledge.list",
				Description: "List the knowledge entries you may read (key, title, size, version, whether you may write), ordered by key.",
				InputSchema: schema(nil, prop("prefix", str("Only keys starting with this prefix.")), propLimit, propCursor),
			},
			man: knowledgeRead,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Prefix string `json:"prefix"`
					Limit  int    `json:"limit"`
					Cursor string `json:"cursor"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				who := m.principal(c.agent)
				items, next, err := m.listKnowledge(ctx, &who, a.Prefix, store.Page{Limit: a.Limit, Cursor: a.Cursor})
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(listPage[KnowledgeSummary]{Items: items, NextCursor: next})
			},
		},
		{
			spec: armory.Spec{
				Name:        "syscall.knowledge.read",
				Description: "Read a knowledge entry by key (needs read permission).",
				InputSchema: schema([]string{"key"}, prop("key", str("The entry's key."))),
			},
			man: knowledgeRead,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Key string `json:"key"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				e, err := m.GetKnowledge(ctx, a.Key)
				if err != nil {
					return armory.FailErr(err)
				}
				if d := DecideKnowledge(e, m.principal(c.agent), AccessRead); !d.Allowed {
					return armory.FailErr(refusal(c.op, d))
				}
				return jsonResult(e)
			},
		},
		{
			spec: armory.Spec{
				Name: "syscall.knowledge.write",
				Description: "Create or update a knowledge entry (updating needs write permission). A new entry is readable by everyone and writable by you " +
					"unless you give read/write lists.",
				InputSchema: schema([]string{"key", "body"},
					prop("key", str("The entry's key (at most 256 bytes).")),
					prop("title", str("A one-line title.")),
					prop("body", str("The content (at most 64 KiB); replaces the current one.")),
					prop("read", aclProp("read", `["*"]`)),
					prop("write", aclProp("change or delete", `["agent:<you>"]`)),
					prop("expect_version", `{"type":"integer","minimum":0,"description":"Write only if the entry is at this version (0: only a new entry)."}`)),
			},
			man: knowledgeWrite,
			run: func(ctx context.Context, c call) armory.Result {
				var a KnowledgeWrite
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				who := m.principal(c.agent)
				e, err := m.putKnowledge(ctx, &who, a)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(map[string]any{"key": e.Key, "version": e.Version, "read": e.Read, "write": e.Write})
			},
		},
		{
			spec: armory.Spec{
				Name:        "syscall.knowledge.delete",
				Description: "Delete a knowledge entry (needs write permission).",
				InputSchema: schema([]string{"key"},
					prop("key", str("The entry's key.")),
					prop("expect_version", `{"type":"integer","minimum":1,"description":"Delete only if the entry is at this version."}`)),
			},
			man: knowledgeDel,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Key           string `json:"key"`
					ExpectVersion *int64 `json:"expect_version"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				who := m.principal(c.agent)
				e, err := m.deleteKnowledge(ctx, &who, a.Key, a.ExpectVersion)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(map[string]any{"deleted": e.Key, "version": e.Version})
			},
		},
	}
}

// --- The human API (REST, CLI): a person is not bound by the lists.

// ListKnowledge returns a page of every entry under prefix (with its
// lists) and the next cursor. Errors: KindInvalid, KindUnavailable.
func (m *Module) ListKnowledge(ctx context.Context, prefix string, p store.Page) ([]KnowledgeSummary, string, error) {
	return m.listKnowledge(ctx, nil, prefix, p)
}

// GetKnowledge returns the entry of key. Errors: KindNotFound,
// KindUnavailable.
func (m *Module) GetKnowledge(ctx context.Context, key string) (*store.KnowledgeEntry, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	e, err := st.GetKnowledge(ctx, key)
	if err != nil {
		return nil, knowledgeErr("syscall.knowledge.read", key, err)
	}
	return e, nil
}

// PutKnowledge writes an entry on a person's behalf (a new one has an
// empty write list unless w gives one: only people may change it), audited
// through p as tool "knowledge.write". Errors: as syscall.knowledge.write's
// but KindPermission.
func (m *Module) PutKnowledge(ctx context.Context, p *pipeline.Pipeline, via string, w KnowledgeWrite) (*store.KnowledgeEntry, error) {
	e, err := m.putKnowledge(ctx, nil, w)
	if err != nil {
		return nil, err
	}
	return e, audited(ctx, p, pipeline.HumanAction{Tool: "knowledge.write",
		Args:   map[string]any{"key": w.Key, "title": w.Title, "bytes": len(w.Body), "read": e.Read, "write": e.Write, "via": via},
		Result: fmt.Sprintf("knowledge %q written at version %d by %s via %s", e.Key, e.Version, pipeline.Human, via)})
}

// DeleteKnowledge deletes an entry on a person's behalf (at
// expectVersion when not nil), audited through p as tool
// "knowledge.delete". Errors: KindNotFound, KindConflict, KindUnavailable.
func (m *Module) DeleteKnowledge(ctx context.Context, p *pipeline.Pipeline, via, key string, expectVersion *int64) error {
	e, err := m.deleteKnowledge(ctx, nil, key, expectVersion)
	if err != nil {
		return err
	}
	return audited(ctx, p, pipeline.HumanAction{Tool: "knowledge.delete", Args: map[string]any{"key": key, "via": via},
		Result: fmt.Sprintf("knowledge %q (version %d) deleted by %s via %s", key, e.Version, pipeline.Human, via)})
}
