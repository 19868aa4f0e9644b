package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// PageLimit: a page is DefaultPage when unasked, at most MaxPage.
func TestPageLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{-1, DefaultPage}, {0, DefaultPage}, {1, 1}, {MaxPage, MaxPage}, {MaxPage + 1, MaxPage}, {1 << 30, MaxPage}} {
		if got := PageLimit(tc.in); got != tc.want {
			t.Errorf("PageLimit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// MaxSubject holds for a message's subject and a task's title and reason,
// and a lease needs a positive TTL: one byte over is ErrInvalid naming the
// field and the limit; at the limit passes.
func TestSubjectAndLeaseBounds(t *testing.T) {
	at, over := strings.Repeat("s", MaxSubject), strings.Repeat("s", MaxSubject+1)
	task := func(title, reason string) *Task {
		return &Task{ID: "t1", Title: title, Reason: reason, Creator: "a", Status: TaskOpen}
	}
	for _, tc := range []struct {
		what string
		err  error
		want string // "" for no error
	}{
		{"subject at the limit", CheckMessage(&Message{To: "a", From: "b", Kind: "k", Subject: at}), ""},
		{"subject over", CheckMessage(&Message{To: "a", From: "b", Kind: "k", Subject: over}), "subject is 1025 bytes; the limit is 1024"},
		{"title at the limit", CheckTask(task(at, at)), ""},
		{"title over", CheckTask(task(over, "")), "title is 1025 bytes; the limit is 1024"},
		{"reason over", CheckTask(task("x", over)), "reason is 1025 bytes; the limit is 1024"},
		{"lease ttl 0", CheckLease("l", "h", 0, true), "a lease must be positive"},
		{"lease ttl not needed", CheckLease("l", "h", 0, false), ""},
		{"lease name over", CheckLease(strings.Repeat("n", MaxName+1), "h", time.Second, true), "lease name is 257 bytes; the limit is 256"},
	} {
		if tc.want == "" {
			if tc.err != nil {
				t.Errorf("%s: %v", tc.what, tc.err)
			}
			continue
		}
		if !errors.Is(tc.err, ErrInvalid) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", tc.what, tc.err, tc.want)
		}
	}
}
