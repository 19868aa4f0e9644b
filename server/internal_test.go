package server

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/pipeline"
)

func TestHubDropsSlowSubscriber(t *testing.T) {
	h := newHub(2, 16)
	slow, _, _ := h.subscribe(eventFilter{}, nil)
	fast, _, _ := h.subscribe(eventFilter{}, nil)
	for i := range 5 {
		h.publish(pipeline.Event{Kind: pipeline.EventCallFinished, Message: fmt.Sprint(i)}) // never blocks
		<-fast.ch
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("a subscriber that fell behind by more than its buffer was not dropped")
	}
	select {
	case <-fast.gone:
		t.Fatal("a subscriber that kept up was dropped")
	default:
	}
	if n := h.count(); n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
	// The slow one got exactly its buffer's worth, in order.
	if m := string(<-slow.ch); !strings.Contains(m, `"message":"0"`) || !strings.HasPrefix(m, "id: "+h.id(1)+"\nevent: call_finished\ndata: ") || !strings.HasSuffix(m, "\n\n") {
		t.Fatalf("first buffered event: %q", m)
	}
	h.unsubscribe(slow) // after a drop: no double close
	h.close()
	select {
	case <-fast.gone:
	default:
		t.Fatal("close did not end the streams")
	}
	if _, _, err := h.subscribe(eventFilter{}, nil); err == nil {
		t.Fatal("subscribed after close")
	}
	h.publish(pipeline.Event{Kind: "x"}) // no subscribers, no panic
}

func TestHostPolicy(t *testing.T) {
	hp, err := newHostPolicy("10.1.2.3:7411", []string{"Armory.Internal", "proxy.example:8443", "[fd00::1]"}, []string{"https://console.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:7411", true},
		{"localhost", true},
		{"LOCALHOST:1", true},
		{"[::1]:7411", true},
		{"10.1.2.3:7411", true},
		{"armory.internal:99", true},
		{"proxy.example:8443", true},
		{"proxy.example:8444", false},
		{"proxy.example", false},
		{"[fd00::1]:80", true},
		{"", false},
		{"evil.example", false},
		{"127.0.0.1.evil.example:7411", false},
		{"localhost.evil.example", false},
		{"127.0.0.2:7411", false},
		{"0.0.0.0:7411", false},
	} {
		if got := hp.hostOK(tc.host); got != tc.ok {
			t.Errorf("hostOK(%q) = %v, want %v", tc.host, got, tc.ok)
		}
	}
	for _, tc := range []struct {
		origin, host string
		ok           bool
	}{
		{"http://127.0.0.1:7411", "127.0.0.1:7411", true},
		{"http://127.0.0.1:7412", "127.0.0.1:7411", false},
		{"https://console.example", "127.0.0.1:7411", true},
		{"http://console.example", "127.0.0.1:7411", false},
		{"null", "127.0.0.1:7411", false},
		{"file://", "127.0.0.1:7411", false},
		{"chrome-extension://abc", "abc", false},
		{"http://evil.example", "evil.example", true}, // same origin; the Host check refuses it first
	} {
		if got := hp.originOK(tc.origin, tc.host); got != tc.ok {
			t.Errorf("originOK(%q, %q) = %v, want %v", tc.origin, tc.host, got, tc.ok)
		}
	}
	// Bound to every interface: only loopback names (and allowed ones).
	any, _ := newHostPolicy("0.0.0.0:7411", nil, nil)
	if any.hostOK("0.0.0.0:7411") || any.hostOK("192.168.1.5:7411") || !any.hostOK("localhost:7411") {
		t.Error("0.0.0.0 policy")
	}
	for _, bad := range []struct{ addr, origin string }{{"nohostport", ""}, {"127.0.0.1:1", "console.example"}} {
		var origins []string
		if bad.origin != "" {
			origins = []string{bad.origin}
		}
		if _, err := newHostPolicy(bad.addr, nil, origins); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// FuzzHostPolicy: no input panics, and an accepted Host always names an
// allowed host.
func FuzzHostPolicy(f *testing.F) {
	for _, s := range []string{"localhost:1", "[::1]:80", "evil.example", "127.0.0.1", "[", "::1", "a:b:c", "%00"} {
		f.Add(s, "http://"+s)
	}
	hp, _ := newHostPolicy("127.0.0.1:7411", []string{"armory.internal"}, nil)
	f.Fuzz(func(t *testing.T, host, origin string) {
		if hp.hostOK(host) {
			name := strings.ToLower(host)
			if h, _, err := net.SplitHostPort(name); err == nil {
				name = h
			}
			name = strings.Trim(name, "[]")
			switch name {
			case "localhost", "127.0.0.1", "::1", "armory.internal":
			default:
				t.Fatalf("accepted Host %q", host)
			}
		}
		hp.originOK(origin, host)
	})
}

// The hub keeps at most its replay bound of events, streams open or not.
func TestHubRingBounded(t *testing.T) {
	h := newHub(4, 3)
	for i := range 10 {
		h.publish(pipeline.Event{Kind: pipeline.EventCallFinished, Message: fmt.Sprint(i)})
	}
	if len(h.ring) != 3 || cap(h.ring) != 3 || h.evicted != 7 {
		t.Fatalf("ring of %d (cap %d), evicted up to %d", len(h.ring), cap(h.ring), h.evicted)
	}
	_, replay, _ := h.subscribe(eventFilter{}, &cursor{h.epoch, 8})
	if len(replay) != 2 || !strings.Contains(string(replay[0]), `"message":"8"`) || !strings.HasPrefix(string(replay[1]), "id: "+h.id(10)+"\n") {
		t.Fatalf("replay after 8: %q", replay)
	}
	none := newHub(4, 0)
	none.publish(pipeline.Event{Kind: pipeline.EventCallFinished})
	if _, replay, _ := none.subscribe(eventFilter{}, &cursor{none.epoch, 0}); len(none.ring) != 0 || len(replay) != 1 || !strings.Contains(string(replay[0]), "event: gap") {
		t.Fatalf("no replay kept: ring %d, replay %q", len(none.ring), replay)
	}
}

// The other processes' events reach the hub only while it watches them:
// a client whose last event came before the watch (re)started is told of
// the gap, even though every local event is kept. The watch lingers after
// its last stream (a reconnect then resumes with no gap); with no linger
// it ends with the last stream.
func TestHubPeerGap(t *testing.T) {
	var subs, unsubs int
	var peer func(pipeline.Event)
	subscribe := func(f func(pipeline.Event)) func() {
		subs++
		peer = f
		return func() { unsubs++ }
	}
	h := newHub(8, 16)
	w := &peerWatch{subscribe: subscribe, linger: -1}
	release := w.hold(h)
	peer(pipeline.Event{Kind: pipeline.EventCallFinished, Tool: "peer.one"})
	last := cursor{h.epoch, h.seq}
	release()
	if subs != 1 || unsubs != 1 {
		t.Fatalf("watch with no linger: %d subscribed, %d ended", subs, unsubs)
	}
	h.publish(pipeline.Event{Kind: pipeline.EventCallFinished, Tool: "local.two"}) // kept, but a peer's may have been missed
	defer w.hold(h)()
	_, replay, _ := h.subscribe(eventFilter{}, &last)
	if len(replay) != 1 || !strings.Contains(string(replay[0]), "event: gap") || !strings.Contains(string(replay[0]), "did not listen") {
		t.Fatalf("replay across an unwatched time: %q", replay)
	}

	// Lingering (a long linger, never reached by the test): the watch
	// stays, and a reconnect resumes without a gap.
	subs, unsubs = 0, 0
	h = newHub(8, 16)
	w = &peerWatch{subscribe: subscribe, linger: time.Hour}
	release = w.hold(h)
	peer(pipeline.Event{Kind: pipeline.EventCallFinished, Tool: "peer.one"})
	last = cursor{h.epoch, h.seq}
	release()
	peer(pipeline.Event{Kind: pipeline.EventCallFinished, Tool: "peer.two"})
	release = w.hold(h)
	_, replay, _ = h.subscribe(eventFilter{}, &last)
	if subs != 1 || unsubs != 0 || len(replay) != 1 || !strings.Contains(string(replay[0]), "peer.two") {
		t.Fatalf("lingering watch: %d subscribed, %d ended, replay %q", subs, unsubs, replay)
	}
	release()
	w.close()
	if unsubs != 1 {
		t.Fatal("close did not end the lingering watch")
	}
	w.hold(h)()
	if subs != 1 {
		t.Fatal("a closed watch subscribed again")
	}
}
