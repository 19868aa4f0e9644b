package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/armory-dev/armory/store"
)

func testChannels(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	ch, err := s1.ClaimChannel(ctx, "slack:T1/C2/1700.1", "alice")
	must(t, err)
	if ch.Holder != "alice" || ch.Creator != "alice" || ch.Version != 1 || ch.CreatedAt.IsZero() {
		t.Errorf("claimed %+v", ch)
	}
	// A second claim, by anyone, returns the conversation as it is.
	again, err := s2.ClaimChannel(ctx, "slack:T1/C2/1700.1", "bob")
	must(t, err)
	if again.Holder != "alice" || again.Version != 1 {
		t.Errorf("claimed again %+v", again)
	}
	_, err = s1.ClaimChannel(ctx, "", "alice")
	wantErr(t, "claim without id", err, store.ErrInvalid)
	_, err = s1.GetChannel(ctx, "nope")
	wantErr(t, "get unknown", err, store.ErrNotFound)

	for _, body := range []string{"one", "two", "three"} {
		m := &store.ChannelMessage{Channel: ch.ID, From: "alice", Kind: store.ChannelSend, Body: body}
		must(t, s1.AppendChannelMessage(ctx, m))
		if m.ID == "" || m.Seq == 0 || m.CreatedAt.IsZero() {
			t.Errorf("appended %+v", m)
		}
	}
	wantErr(t, "append by a non-holder", s2.AppendChannelMessage(ctx, &store.ChannelMessage{Channel: ch.ID, From: "bob", Kind: store.ChannelSend, Body: "x"}), store.ErrConflict)
	wantErr(t, "append to unknown", s2.AppendChannelMessage(ctx, &store.ChannelMessage{Channel: "nope", From: "bob", Kind: store.ChannelSend, Body: "x"}), store.ErrNotFound)
	wantErr(t, "append without kind", s2.AppendChannelMessage(ctx, &store.ChannelMessage{Channel: ch.ID, From: "alice", Body: "x"}), store.ErrInvalid)

	hm := &store.ChannelMessage{Channel: ch.ID, From: "alice", Kind: store.ChannelHandoff, Body: "over to you"}
	got, err := s2.HandoffChannel(ctx, hm, "bob")
	must(t, err)
	if got.Holder != "bob" || got.Creator != "alice" || got.Version != 2 || hm.To != "bob" || hm.Seq == 0 {
		t.Errorf("handed off %+v, message %+v", got, hm)
	}
	_, err = s1.HandoffChannel(ctx, &store.ChannelMessage{Channel: ch.ID, From: "alice", Kind: store.ChannelHandoff}, "carol")
	wantErr(t, "handoff by the old holder", err, store.ErrConflict)
	_, err = s1.HandoffChannel(ctx, &store.ChannelMessage{Channel: "nope", From: "alice", Kind: store.ChannelHandoff}, "carol")
	wantErr(t, "handoff of unknown", err, store.ErrNotFound)
	wantErr(t, "append by the old holder", s1.AppendChannelMessage(ctx, &store.ChannelMessage{Channel: ch.ID, From: "alice", Kind: store.ChannelSend, Body: "x"}), store.ErrConflict)
	must(t, s1.AppendChannelMessage(ctx, &store.ChannelMessage{Channel: ch.ID, From: "bob", Kind: store.ChannelSend, Body: "four"}))

	all, pages := allPages(t, 2, func(p store.Page) ([]*store.ChannelMessage, string, error) {
		return s2.ChannelMessages(ctx, ch.ID, p)
	})
	var bodies []string
	for _, m := range all {
		bodies = append(bodies, m.Kind+":"+m.Body)
	}
	want := []string{"message:one", "message:two", "message:three", "handoff:over to you", "message:four"}
	if len(bodies) != len(want) || pages != 3 {
		t.Fatalf("messages %q in %d pages, want %q in 3", bodies, pages, want)
	}
	for i := range want {
		if bodies[i] != want[i] {
			t.Errorf("message %d: %q, want %q", i, bodies[i], want[i])
		}
	}
	// Following the conversation: the last cursor reads what came since.
	first, next, err := s1.ChannelMessages(ctx, ch.ID, store.Page{Limit: 5})
	must(t, err)
	if len(first) != 5 || next != "" {
		t.Fatalf("one page: %d messages, next %q", len(first), next)
	}
	_, _, err = s1.ChannelMessages(ctx, "nope", store.Page{})
	wantErr(t, "messages of unknown", err, store.ErrNotFound)
	_, _, err = s1.ChannelMessages(ctx, ch.ID, store.Page{Cursor: "!!"})
	wantErr(t, "bad cursor", err, store.ErrInvalid)
}

// testChannelHandoffRace: holders racing to hand one conversation off
// from two stores: exactly one wins each round.
func testChannelHandoffRace(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	_, err := stores[0].ClaimChannel(ctx, "race", "a0")
	must(t, err)
	holder := "a0"
	for round := 1; round <= 5; round++ {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				to := fmt.Sprintf("r%d-%d", round, i)
				_, err := stores[i%2].HandoffChannel(ctx, &store.ChannelMessage{Channel: "race", From: holder, Kind: store.ChannelHandoff}, to)
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, to)
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: %d handoffs won (%v), want 1", round, len(wins), wins)
		}
		ch, err := stores[1].GetChannel(ctx, "race")
		must(t, err)
		if ch.Holder != wins[0] || ch.Version != int64(round+1) {
			t.Fatalf("round %d: %+v, want holder %s", round, ch, wins[0])
		}
		holder = wins[0]
	}
}
