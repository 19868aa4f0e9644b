package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
)

// fakeGate refuses the agents in refuse with their error and keeps the
// conversations in holders (first caller holds); it counts its calls.
type fakeGate struct {
	refuse   map[string]error
	holders  map[string]string
	admits   atomic.Int64
	channels atomic.Int64
}

func (g *fakeGate) Admit(_ context.Context, agent string) error {
	g.admits.Add(1)
	return g.refuse[agent]
}

type fakeChannelGate struct{ *fakeGate }

func (g fakeChannelGate) AdmitChannel(_ context.Context, agent, channel string) (string, error) {
	g.channels.Add(1)
	if h, ok := g.holders[channel]; ok && h != agent {
		return h, armory.E("", armory.KindConflict, "conversation "+channel+" is held by "+h)
	} else if !ok {
		g.holders[channel] = agent
	}
	return agent, nil
}

// The gates run once per call, after lookup found the agent: a refusal is
// audited in stage "gate" (or "channel") with the gate's reason; a gate's
// error without a kind still refuses (KindInternal, status error); the
// channel gates run only for a call that names a conversation, and the
// conversation name is bounded before any gate runs.
func TestGates(t *testing.T) {
	f := newFixture(t)
	g := &fakeGate{refuse: map[string]error{
		"dev":   armory.E("", armory.KindBlocked, "agent dev is stopped"),
		"plain": errors.New("status unreadable"),
	}, holders: map[string]string{}}
	p, err := New(f.h, Options{Store: f.st, Now: f.clock, Gates: []Gate{fakeChannelGate{g}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exec := func(agent, channel string) Outcome {
		return p.Execute(ctx, Call{Agent: agent, Tool: "test.noop", Channel: channel, Args: json.RawMessage(`{}`)})
	}
	stageOf := func(o Outcome, name string) string {
		t.Helper()
		recs := f.records(t, o.CallID)
		for _, st := range recs[len(recs)-1].Stages {
			if st.Name == name {
				return st.Decision + ": " + strings.Join(st.Reasons, "; ")
			}
		}
		return ""
	}

	runs := f.tools["test.noop"].runs.Load()
	if o := exec("dev", ""); o.Status != audit.StatusBlocked || o.Kind != armory.KindBlocked || o.Result != "agent dev is stopped" ||
		stageOf(o, "gate") != "block: agent dev is stopped" {
		t.Fatalf("stopped agent: %+v", o)
	}
	if o := exec("plain", ""); o.Status != audit.StatusError || o.Kind != armory.KindInternal {
		t.Fatalf("gate without a kind: %+v", o)
	}
	if f.tools["test.noop"].runs.Load() != runs {
		t.Fatal("a refused call ran")
	}
	if o := exec("ops", ""); o.Status != audit.StatusSuccess || stageOf(o, "gate") != "" || stageOf(o, "channel") != "" || g.channels.Load() != 0 {
		t.Fatalf("admitted call without a conversation: %+v (channel gate calls %d)", o, g.channels.Load())
	}
	if n := g.admits.Load(); n != 3 {
		t.Fatalf("Admit ran %d times for 3 calls", n)
	}

	at := strings.Repeat("c", MaxChannelBytes)
	if o := exec("ops", at); o.Status != audit.StatusSuccess || !strings.HasPrefix(stageOf(o, "channel"), "ok: conversation") {
		t.Fatalf("conversation at the limit: %+v", o)
	}
	if o := exec("warden", at); o.Status != audit.StatusBlocked || o.Kind != armory.KindConflict ||
		!strings.Contains(stageOf(o, "channel"), "block: conversation") || !strings.Contains(o.Result, "held by ops") {
		t.Fatalf("conversation held by another agent: %+v", o)
	}
	before := g.channels.Load()
	for _, bad := range []string{at + "c", "a\x1b[2Jb", "\xff"} {
		if o := exec("ops", bad); o.Status != audit.StatusError || o.Kind != armory.KindInvalid || !strings.Contains(o.Result, "Invalid conversation") {
			t.Fatalf("conversation %q: %+v", bad, o)
		}
	}
	if g.channels.Load() != before {
		t.Fatal("a channel gate ran for a refused conversation name")
	}
}
