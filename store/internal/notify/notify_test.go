package notify

import "testing"

func TestHub(t *testing.T) {
	var h Hub
	a, cancelA := h.Subscribe("x")
	b, cancelB := h.Subscribe("x")
	c, cancelC := h.Subscribe("y")
	defer cancelC()
	h.Notify("x")
	h.Notify("x") // coalesced, never blocks
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("subscriber of x not woken")
		}
	}
	select {
	case <-c:
		t.Fatal("subscriber of y woken by x")
	default:
	}
	cancelA()
	h.Notify("x")
	select {
	case <-a:
		t.Fatal("cancelled subscriber woken")
	default:
	}
	<-b
	h.NotifyAll()
	<-b
	<-c
	cancelB()
	cancelB() // idempotent
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.waiters["x"]; ok {
		t.Fatal("empty key not removed")
	}
}
