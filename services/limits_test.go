package services_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// Each bound of the agents' tools that no other test reaches holds at its
// edge: one past it is refused with a kind and a message that names the
// bound, and nothing is written.
func TestToolLimits(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		w := open(t, msgWorld(t, "alice", "bob"), db, services.Options{})
		st := w.eng.Store()
		ctx := context.Background()

		t.Run("think", func(t *testing.T) {
			w := &world{t: t, eng: w.eng, mod: w.mod}
			w.ok("alice", "think", map[string]any{"thought": strings.Repeat("x", services.MaxThought)}, nil)
			w.refused("alice", "think", map[string]any{"thought": strings.Repeat("x", services.MaxThought+1)}, armory.KindTooLarge, fmt.Sprintf("the %d allowed", services.MaxThought))
			w.refused("alice", "think", map[string]any{"thought": " "}, armory.KindInvalid, "empty")
		})

		t.Run("chat", func(t *testing.T) {
			w := &world{t: t, eng: w.eng, mod: w.mod}
			members := make([]string, services.MaxChatMembers+1)
			for i := range members {
				members[i] = "bob"
			}
			w.refused("alice", "syscall.chat.create", map[string]any{"name": "crowd", "members": members}, armory.KindTooLarge,
				fmt.Sprintf("at most %d", services.MaxChatMembers))
			w.refused("alice", "syscall.chat.create", map[string]any{"name": strings.Repeat("n", store.MaxName+1), "members": []string{"bob"}},
				armory.KindTooLarge, fmt.Sprintf("at most %d", store.MaxName))
			w.refused("alice", "syscall.chat.create", map[string]any{"name": "  ", "members": []string{"bob"}}, armory.KindInvalid, "name is empty")
			if chats, _, err := st.ListChats(ctx, "alice", store.Page{}); err != nil || len(chats) != 0 {
				t.Fatalf("refused chats were created: %d, %v", len(chats), err)
			}
			w.ok("alice", "syscall.chat.list", map[string]any{"limit": services.MaxChatList}, nil)
			w.fails("alice", "syscall.chat.list", map[string]any{"limit": services.MaxChatList + 1}, "")
		})

		t.Run("knowledge ACL", func(t *testing.T) {
			w := &world{t: t, eng: w.eng, mod: w.mod}
			long := make([]string, store.MaxBatch+1)
			for i := range long {
				long[i] = "*"
			}
			w.refused("alice", "syscall.knowledge.write", map[string]any{"key": "k", "body": "b", "read": long}, armory.KindInvalid,
				fmt.Sprintf("the limit is %d", store.MaxBatch))
			w.refused("alice", "syscall.knowledge.write", map[string]any{"key": "k", "body": "b", "write": long}, armory.KindInvalid,
				fmt.Sprintf("the limit is %d", store.MaxBatch))
			w.refused("alice", "syscall.knowledge.write", map[string]any{"key": "k", "body": "b", "read": []string{"agent:" + strings.Repeat("a", store.MaxName)}},
				armory.KindInvalid, "access list entry")
			w.refused("alice", "syscall.knowledge.write", map[string]any{"key": "k", "body": "b", "read": []string{"alice"}}, armory.KindInvalid, `want "*"`)
			w.refused("alice", "syscall.knowledge.write", map[string]any{"key": strings.Repeat("k", store.MaxKey+1), "body": "b"}, armory.KindInvalid, "knowledge key")
			w.refused("alice", "syscall.knowledge.write", map[string]any{"key": "k", "body": strings.Repeat("b", store.MaxBody+1)}, armory.KindInvalid, "body")
			if _, err := st.GetKnowledge(ctx, "k"); err == nil {
				t.Fatal("a refused knowledge write was stored")
			}
		})

		t.Run("memory", func(t *testing.T) {
			w := &world{t: t, eng: w.eng, mod: w.mod}
			w.refused("bob", "syscall.memory.write", map[string]any{"key": strings.Repeat("k", store.MaxKey+1), "value": "v"}, armory.KindInvalid, "memory key")
			w.refused("bob", "syscall.memory.write", map[string]any{"key": "k", "value": strings.Repeat("v", store.MaxBody+1)}, armory.KindInvalid, "memory value")
			w.ok("bob", "syscall.memory.write", map[string]any{"key": "k", "value": strings.Repeat("v", store.MaxBody)}, nil)
			w.refused("bob", "syscall.memory.write", map[string]any{"key": "k", "value": "v", "append": true}, armory.KindInvalid)
			for i := 1; i < store.MaxMemoryKeys; i++ { // the store is the truth: fill it directly
				if _, err := st.WriteMemory(ctx, "bob", fmt.Sprintf("k%04d", i), "v"); err != nil {
					t.Fatal(err)
				}
			}
			w.ok("bob", "syscall.memory.write", map[string]any{"key": "k0001", "value": "rewritten"}, nil) // an existing key is no new one
			w.refused("bob", "syscall.memory.write", map[string]any{"key": "one-too-many", "value": "v"}, armory.KindInvalid, fmt.Sprint(store.MaxMemoryKeys))
			if _, err := st.ReadMemory(ctx, "bob", "one-too-many"); err == nil {
				t.Fatal("the key past the bound was stored")
			}
		})

		t.Run("handoff note", func(t *testing.T) {
			w := &world{t: t, eng: w.eng, mod: w.mod}
			o := w.in("c1", "alice", "channel.handoff", map[string]any{"agent": "bob", "note": strings.Repeat("n", services.MaxMessage)})
			if o.Kind != armory.KindTooLarge || !strings.Contains(o.Result, "note is") {
				t.Fatalf("an oversized handoff note: %s (%v): %s", o.Status, o.Kind, o.Result)
			}
		})
	})
}
