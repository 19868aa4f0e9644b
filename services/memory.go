package services

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/store"
)

// Memory: every agent's own persistent notes (memory.read and memory.write,
// and a ranked recall). The agent is always the caller: no
// tool takes an agent argument, so an agent reads and writes only its own
// memory. Another agent's memory is read (read-only) by
// syscall.agent.inspect, through ReadAgentMemory.

// Recall budget bounds, in bytes of keys and values returned.
const (
	DefaultRecallBudget = 4 << 10
	MaxRecallBudget     = 64 << 10
)

// MemoryKey is a key of a memory listing: the key, the size of its value
// and when it was last written.
type MemoryKey struct {
	Key       string    `json:"key"`
	Bytes     int       `json:"bytes"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RecallHit is one entry recall returns.
type RecallHit struct {
	Key   string  `json:"key"`
	Value string  `json:"value"`
	Score float64 `json:"score"`
	// Truncated is set when Value is an excerpt (the whole value did not
	// fit the budget).
	Truncated bool      `json:"truncated,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Recall is recall's result.
type Recall struct {
	Hits []RecallHit `json:"hits"`
	// Matched is how many entries hold a query term; Searched how many
	// were searched.
	Matched  int `json:"matched"`
	Searched int `json:"searched"`
	// Used is the bytes of keys and values returned, at most Budget.
	Used   int `json:"used_bytes"`
	Budget int `json:"budget_bytes"`
}

var (
	memoryRead  = armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState}}
	memoryWrite = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapWriteState}}
)

// memoryTools are syscall.memory.write, read and recall.
func (m *Module) memoryTools() []*tool {
	return []*tool{
		{
			spec: armory.Spec{
				Name:        "syscall.memory.write",
				Description: "Write (or append to) a key of your own persistent memory; it outlives this session. At most 1000 keys of 64 KiB each.",
				InputSchema: schema([]string{"key", "value"},
					prop("key", str("The key (at most 256 bytes), e.g. \"project/decisions\".")),
					prop("value", str("The value (at most 64 KiB, also after appending).")),
					prop("append", boolean("Append value to the key's current value instead of replacing it."))),
			},
			man: memoryWrite,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Key    string `json:"key"`
					Value  string `json:"value"`
					Append bool   `json:"append"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				if err := store.CheckMemory(c.agent, a.Key, a.Value); err != nil {
					return storeFail(c.op, err)
				}
				st, err := m.store(ctx)
				if err != nil {
					return armory.FailErr(err)
				}
				write := st.WriteMemory
				if a.Append {
					write = st.AppendMemory
				}
				e, err := write(ctx, c.agent, a.Key, a.Value)
				if err != nil {
					return storeFail(c.op, err)
				}
				return jsonResult(MemoryKey{Key: e.Key, Bytes: len(e.Value), UpdatedAt: e.UpdatedAt})
			},
		},
		{
			spec: armory.Spec{
				Name:        "syscall.memory.read",
				Description: "Read a key of your persistent memory, or (without key) list your keys with their sizes.",
				InputSchema: schema(nil, prop("key", str("The key to read; leave out to list your keys.")), propLimit, propCursor),
			},
			man: memoryRead,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Key    string `json:"key"`
					Limit  int    `json:"limit"`
					Cursor string `json:"cursor"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				st, err := m.store(ctx)
				if err != nil {
					return armory.FailErr(err)
				}
				if a.Key != "" {
					e, err := st.ReadMemory(ctx, c.agent, a.Key)
					if errors.Is(err, store.ErrNotFound) {
						return c.fail(armory.KindNotFound, "your memory has no key %q; call syscall.memory.read without key to list your keys", a.Key)
					} else if err != nil {
						return storeFail(c.op, err)
					}
					return jsonResult(e)
				}
				entries, next, err := st.ListMemory(ctx, c.agent, pageArgs(a.Limit, a.Cursor))
				if err != nil {
					return storeFail(c.op, err)
				}
				keys := make([]MemoryKey, len(entries))
				for i, e := range entries {
					keys[i] = MemoryKey{Key: e.Key, Bytes: len(e.Value), UpdatedAt: e.UpdatedAt}
				}
				return jsonResult(listPage[MemoryKey]{Items: keys, NextCursor: next})
			},
		},
		{
			spec: armory.Spec{
				Name: "syscall.memory.recall",
				Description: "Recall what your memory holds about a topic: your entries ranked by keyword relevance (BM25), best first, " +
					"within a byte budget (default 4 KiB, at most 64 KiB).",
				InputSchema: schema([]string{"query"},
					prop("query", str("Keywords of the topic.")),
					prop("budget_bytes", `{"type":"integer","minimum":1,"maximum":65536,"description":"Most bytes of keys and values to return (default 4096)."}`)),
			},
			man: memoryRead,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Query  string `json:"query"`
					Budget int    `json:"budget_bytes"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				r, err := m.recall(ctx, c.agent, a.Query, a.Budget)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(r)
			},
		},
	}
}

// allMemory reads every entry of agent's memory (at most
// store.MaxMemoryKeys).
func allMemory(ctx context.Context, st store.Memory, agent string) ([]*store.MemoryEntry, error) {
	var all []*store.MemoryEntry
	cursor := ""
	for {
		page, next, err := st.ListMemory(ctx, agent, store.Page{Limit: store.MaxPage, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" || len(all) > store.MaxMemoryKeys {
			return all, nil
		}
		cursor = next
	}
}

// recall ranks agent's memory for query and returns the best entries
// within budget bytes (≤ 0: DefaultRecallBudget). An entry that does not
// fit whole is returned as an excerpt around its first match when at least
// 128 bytes of budget remain. Errors: KindInvalid (an empty query, a
// budget over MaxRecallBudget), KindUnavailable.
func (m *Module) recall(ctx context.Context, agent, query string, budget int) (Recall, error) {
	const op = "syscall.memory.recall"
	switch {
	case budget <= 0:
		budget = DefaultRecallBudget
	case budget > MaxRecallBudget:
		return Recall{}, armory.E(op, armory.KindInvalid, fmt.Sprintf("budget_bytes %d is more than the %d allowed", budget, MaxRecallBudget))
	}
	terms := uniq(tokenize(query))
	if len(terms) == 0 {
		return Recall{}, armory.E(op, armory.KindInvalid, "the query has no keyword (letters or digits); say what to recall")
	}
	if err := store.CheckText("query", query, store.MaxSubject, true); err != nil {
		return Recall{}, store.Err(op, err)
	}
	st, err := m.store(ctx)
	if err != nil {
		return Recall{}, err
	}
	entries, err := allMemory(ctx, st, agent)
	if err != nil {
		return Recall{}, store.Err(op, err)
	}
	docs := make([]recallDoc, len(entries))
	for i, e := range entries {
		docs[i] = recallDoc{Key: e.Key, Text: e.Value}
	}
	hits := rankBM25(docs, query)
	out := Recall{Hits: []RecallHit{}, Matched: len(hits), Searched: len(entries), Budget: budget}
	for _, h := range hits {
		e := entries[h.Index]
		left := budget - out.Used - len(e.Key)
		if left <= 0 {
			continue
		}
		hit := RecallHit{Key: e.Key, Value: e.Value, Score: roundScore(h.Score), UpdatedAt: e.UpdatedAt}
		if len(e.Value) > left {
			if left < 128 {
				continue
			}
			hit.Value, hit.Truncated = excerpt(e.Value, terms, left), true
		}
		out.Used += len(hit.Key) + len(hit.Value)
		out.Hits = append(out.Hits, hit)
	}
	return out, nil
}

func roundScore(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

// ReadAgentMemory returns a page of agent's memory entries, ordered by key,
// and the next page's cursor: the read-only view of another agent's memory
// that syscall.agent.inspect lists. It changes nothing.
// Errors: KindInvalid (a bad cursor), KindUnavailable.
func (m *Module) ReadAgentMemory(ctx context.Context, agent string, p store.Page) ([]*store.MemoryEntry, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	entries, next, err := st.ListMemory(ctx, agent, pageArgs(p.Limit, p.Cursor))
	return entries, next, store.Err("memory.read", err)
}
