package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

// The skill state role (store.Skills).

// skillStates reads every page of agent's holds ("" for every agent) with
// page size n (0: the default page).
func skillStates(t *testing.T, s store.Store, agent string, n int) []*store.SkillState {
	t.Helper()
	ctx := ctxT(t)
	if n == 0 {
		n = store.DefaultPage
	}
	all, _ := allPages(t, n, func(p store.Page) ([]*store.SkillState, string, error) { return s.ListSkillStates(ctx, agent, p) })
	return all
}

// holdNames is "agent/skill" of each state.
func holdNames(states []*store.SkillState) []string {
	var out []string
	for _, st := range states {
		out = append(out, st.Agent+"/"+st.Skill)
	}
	return out
}

// wantHold fails t unless st is agent's hold on skill with the parts set
// as given, each part's time set exactly when it is, in UTC µs.
func wantHold(t *testing.T, what string, st *store.SkillState, agent, skill string, acquired, active bool) {
	t.Helper()
	if st == nil {
		t.Fatalf("%s: no state, want %s/%s acquired=%v active=%v", what, agent, skill, acquired, active)
	}
	if st.Agent != agent || st.Skill != skill || st.Acquired != acquired || st.Active != active ||
		st.AcquiredAt.IsZero() == acquired || st.ActivatedAt.IsZero() == active || st.UpdatedAt.IsZero() {
		t.Fatalf("%s: %+v, want %s/%s acquired=%v active=%v", what, st, agent, skill, acquired, active)
	}
	for _, tm := range []time.Time{st.AcquiredAt, st.ActivatedAt, st.UpdatedAt} {
		if !tm.IsZero() && (tm.Location() != time.UTC || !tm.Equal(tm.Truncate(time.Microsecond))) {
			t.Fatalf("%s: time %v is not UTC µs", what, tm)
		}
	}
}

// setSkill is one change as SetSkillAcquired or SetSkillActive makes it.
type setSkill func(agent, skill string, on bool) (*store.SkillState, bool, error)

// testSkills: acquire, activate, deactivate and drop, each idempotent,
// with their times; activation without acquisition; what a second Store
// sees; invalid names.
func testSkills(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	acquire := func(agent, skill string, on bool) (*store.SkillState, bool, error) {
		return s1.SetSkillAcquired(ctx, agent, skill, on)
	}
	activate := func(agent, skill string, on bool) (*store.SkillState, bool, error) {
		return s1.SetSkillActive(ctx, agent, skill, on)
	}
	step := func(what string, set setSkill, skill string, on, wantChanged bool) *store.SkillState {
		t.Helper()
		st, changed, err := set("alice", skill, on)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if changed != wantChanged {
			t.Fatalf("%s: changed %v, want %v (state %+v)", what, changed, wantChanged, st)
		}
		return st
	}
	// Acquire, then again: nothing changes, AcquiredAt is kept.
	st := step("acquire", acquire, "pdf", true, true)
	wantHold(t, "acquire", st, "alice", "pdf", true, false)
	if !st.UpdatedAt.Equal(st.AcquiredAt) {
		t.Errorf("acquire: updated %v, acquired %v", st.UpdatedAt, st.AcquiredAt)
	}
	acquired := st.AcquiredAt
	time.Sleep(2 * time.Millisecond)
	again := step("acquire again", acquire, "pdf", true, false)
	if !reflect.DeepEqual(again, st) {
		t.Errorf("acquire again: %+v, want %+v", again, st)
	}
	// Activate, then again: ActivatedAt is kept, AcquiredAt too.
	time.Sleep(2 * time.Millisecond)
	st = step("activate", activate, "pdf", true, true)
	wantHold(t, "activate", st, "alice", "pdf", true, true)
	if !st.AcquiredAt.Equal(acquired) || !st.ActivatedAt.After(acquired) || !st.UpdatedAt.Equal(st.ActivatedAt) {
		t.Errorf("activate: %+v (acquired at %v)", st, acquired)
	}
	time.Sleep(2 * time.Millisecond)
	if again := step("activate again", activate, "pdf", true, false); !reflect.DeepEqual(again, st) {
		t.Errorf("activate again: %+v, want %+v", again, st)
	}
	// The other Store sees the row at once.
	if got := skillStates(t, s2, "alice", 0); len(got) != 1 || !reflect.DeepEqual(got[0], st) {
		t.Errorf("second Store lists %+v, want %+v", got, st)
	}
	// Deactivate: still acquired, since the same time; then again.
	time.Sleep(2 * time.Millisecond)
	st = step("deactivate", activate, "pdf", false, true)
	wantHold(t, "deactivate", st, "alice", "pdf", true, false)
	if !st.AcquiredAt.Equal(acquired) || !st.UpdatedAt.After(acquired) {
		t.Errorf("deactivate: %+v (acquired at %v)", st, acquired)
	}
	if again := step("deactivate again", activate, "pdf", false, false); !reflect.DeepEqual(again, st) {
		t.Errorf("deactivate again: %+v, want %+v", again, st)
	}
	// Drop an active skill: Active goes too, and the row.
	step("reactivate", activate, "pdf", true, true)
	if st := step("drop", acquire, "pdf", false, true); st != nil {
		t.Errorf("drop: state %+v, want none", st)
	}
	if got := skillStates(t, s2, "", 0); len(got) != 0 {
		t.Errorf("after drop: %v", holdNames(got))
	}
	if st := step("drop again", acquire, "pdf", false, false); st != nil {
		t.Errorf("drop again: %+v", st)
	}
	if st := step("deactivate unknown", activate, "pdf", false, false); st != nil {
		t.Errorf("deactivate unknown: %+v", st)
	}
	// Activate without acquiring: instructions only; acquiring later keeps
	// ActivatedAt, deactivating keeps the acquired row.
	st = step("activate unacquired", activate, "sql", true, true)
	wantHold(t, "activate unacquired", st, "alice", "sql", false, true)
	activated := st.ActivatedAt
	if st := step("acquire active", acquire, "sql", true, true); !st.ActivatedAt.Equal(activated) || !st.Acquired {
		t.Errorf("acquire active: %+v (activated at %v)", st, activated)
	}
	st = step("deactivate acquired", activate, "sql", false, true)
	wantHold(t, "deactivate acquired", st, "alice", "sql", true, false)
	// Deactivating an unacquired skill deletes its row; so does dropping it.
	step("activate c", activate, "c", true, true)
	if st := step("deactivate c", activate, "c", false, true); st != nil {
		t.Errorf("deactivate unacquired: %+v, want none", st)
	}
	step("activate d", activate, "d", true, true)
	if st := step("drop d", acquire, "d", false, true); st != nil {
		t.Errorf("drop unacquired: %+v, want none", st)
	}
	if got := holdNames(skillStates(t, s2, "", 0)); !slices.Equal(got, []string{"alice/sql"}) {
		t.Errorf("holds %v, want [alice/sql]", got)
	}
	// A change through the second Store is seen by the first.
	if _, changed, err := s2.SetSkillAcquired(ctx, "alice", "sql", false); err != nil || !changed {
		t.Errorf("drop through the second Store: %v, %v", changed, err)
	}
	if got := skillStates(t, s1, "alice", 0); len(got) != 0 {
		t.Errorf("after a drop through the second Store: %v", holdNames(got))
	}

	// Invalid names: nothing is written.
	long := strings.Repeat("x", store.MaxName+1)
	for _, c := range []struct{ what, agent, skill string }{
		{"empty agent", "", "pdf"},
		{"empty skill", "alice", ""},
		{"long agent", long, "pdf"},
		{"long skill", "alice", long},
		{"agent not UTF-8", "al\xffice", "pdf"},
		{"skill with NUL", "alice", "p\x00df"},
	} {
		for _, on := range []bool{true, false} {
			_, _, err := s1.SetSkillAcquired(ctx, c.agent, c.skill, on)
			wantErr(t, fmt.Sprintf("acquire (%v), %s", on, c.what), err, store.ErrInvalid)
			_, _, err = s1.SetSkillActive(ctx, c.agent, c.skill, on)
			wantErr(t, fmt.Sprintf("activate (%v), %s", on, c.what), err, store.ErrInvalid)
		}
	}
	// The longest names are fine.
	longest := strings.Repeat("m", store.MaxName)
	st, _, err := s1.SetSkillAcquired(ctx, longest, longest, true)
	must(t, err)
	wantHold(t, "longest names", st, longest, longest, true, false)
	if got := skillStates(t, s1, "", 0); len(got) != 1 || !reflect.DeepEqual(got[0], st) {
		t.Errorf("after invalid calls: %v", holdNames(got))
	}
	_, _, err = s1.ListSkillStates(ctx, long, store.Page{})
	wantErr(t, "list a long agent", err, store.ErrInvalid)
	_, err = s1.ForgetSkill(ctx, "")
	wantErr(t, "forget an empty skill", err, store.ErrInvalid)
	_, err = s1.ForgetSkill(ctx, long)
	wantErr(t, "forget a long skill", err, store.ErrInvalid)
}

// testSkillsList: pages of one agent's holds and of every agent's, in
// byte order, and malformed cursors.
func testSkillsList(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	holds := map[string][]string{
		"bob":   {"web", "Zip", "pdf", "b"},
		"alice": {"sql", "a"},
		"Carol": {"pdf"},
		"dave":  {"x"},
	}
	for agent, skills := range holds {
		for i, skill := range skills {
			var err error
			if i%2 == 0 {
				_, _, err = s.SetSkillAcquired(ctx, agent, skill, true)
			} else {
				_, _, err = s.SetSkillActive(ctx, agent, skill, true)
			}
			must(t, err)
		}
	}
	want := []string{"Carol/pdf", "alice/a", "alice/sql", "bob/Zip", "bob/b", "bob/pdf", "bob/web", "dave/x"}
	for _, n := range []int{1, 2, 3, 100} {
		if got := holdNames(skillStates(t, s, "", n)); !slices.Equal(got, want) {
			t.Errorf("every hold, pages of %d: %v, want %v", n, got, want)
		}
		if got := holdNames(skillStates(t, s, "bob", n)); !slices.Equal(got, want[3:7]) {
			t.Errorf("bob's holds, pages of %d: %v, want %v", n, got, want[3:7])
		}
	}
	all, pages := allPages(t, 3, func(p store.Page) ([]*store.SkillState, string, error) { return s.ListSkillStates(ctx, "", p) })
	if len(all) != len(want) || pages != 3 {
		t.Errorf("%d holds in %d pages of 3, want %d in 3", len(all), pages, len(want))
	}
	for _, st := range all {
		if st.Acquired == st.Active {
			t.Errorf("hold %+v: only one part was set", st)
		}
	}
	got, next, err := s.ListSkillStates(ctx, "nobody", store.Page{})
	if err != nil || len(got) != 0 || next != "" {
		t.Errorf("an agent without holds: %v, %q, %v", holdNames(got), next, err)
	}
	got, next, err = s.ListSkillStates(ctx, "", store.Page{Limit: len(want)})
	if err != nil || len(got) != len(want) || next != "" {
		t.Errorf("one full page: %d holds, next %q, %v", len(got), next, err)
	}
	for _, cur := range []string{"!not base64!", base64.RawURLEncoding.EncodeToString([]byte("no separator")),
		base64.RawURLEncoding.EncodeToString([]byte("\x00skill"))} {
		for _, agent := range []string{"", "bob"} {
			_, _, err := s.ListSkillStates(ctx, agent, store.Page{Cursor: cur})
			wantErr(t, fmt.Sprintf("list %q with cursor %q", agent, cur), err, store.ErrInvalid)
		}
	}
}

// testSkillsBound: an agent holds at most MaxSkillHolds skills; a new hold
// beyond that is ErrConflict and writes nothing, while changes to held
// skills and other agents' holds go on.
func testSkillsBound(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	for i := range store.MaxSkillHolds {
		var err error
		if i%3 == 0 {
			_, _, err = s.SetSkillActive(ctx, "alice", fmt.Sprintf("s%04d", i), true)
		} else {
			_, _, err = s.SetSkillAcquired(ctx, "alice", fmt.Sprintf("s%04d", i), true)
		}
		must(t, err)
	}
	_, _, err := s.SetSkillAcquired(ctx, "alice", "one-more", true)
	wantErr(t, "acquire past the bound", err, store.ErrConflict)
	if err != nil && !strings.Contains(err.Error(), fmt.Sprint(store.MaxSkillHolds)) {
		t.Errorf("the conflict does not name the bound: %v", err)
	}
	_, _, err = s.SetSkillActive(ctx, "alice", "one-more", true)
	wantErr(t, "activate past the bound", err, store.ErrConflict)
	// Clearing what is not held is no new hold.
	if st, changed, err := s.SetSkillAcquired(ctx, "alice", "one-more", false); err != nil || changed || st != nil {
		t.Errorf("drop an unheld skill at the bound: %+v, %v, %v", st, changed, err)
	}
	// Changes to held skills are no new holds.
	if _, changed, err := s.SetSkillActive(ctx, "alice", "s0001", true); err != nil || !changed {
		t.Errorf("activate a held skill at the bound: %v, %v", changed, err)
	}
	if _, changed, err := s.SetSkillAcquired(ctx, "alice", "s0000", true); err != nil || !changed {
		t.Errorf("acquire an active skill at the bound: %v, %v", changed, err)
	}
	if _, changed, err := s.SetSkillAcquired(ctx, "alice", "s0002", true); err != nil || changed {
		t.Errorf("acquire a held skill again at the bound: %v, %v", changed, err)
	}
	_, _, err = s.SetSkillAcquired(ctx, "bob", "one-more", true)
	must(t, err)
	if got := skillStates(t, s, "alice", store.MaxPage); len(got) != store.MaxSkillHolds || slices.Contains(holdNames(got), "alice/one-more") {
		t.Errorf("alice holds %d skills, want %d without one-more", len(got), store.MaxSkillHolds)
	}
	// A drop makes room.
	_, _, err = s.SetSkillAcquired(ctx, "alice", "s0005", false)
	must(t, err)
	_, _, err = s.SetSkillActive(ctx, "alice", "one-more", true)
	must(t, err)
	_, _, err = s.SetSkillAcquired(ctx, "alice", "two-more", true)
	wantErr(t, "acquire past the bound again", err, store.ErrConflict)
}

// testForgetSkill: ForgetSkill deletes every agent's hold on one skill,
// acquired or active only, and names those agents, sorted.
func testForgetSkill(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	for _, agent := range []string{"carol", "alice", "bob"} {
		_, _, err := s1.SetSkillAcquired(ctx, agent, "x", true)
		must(t, err)
	}
	_, _, err := s1.SetSkillActive(ctx, "alice", "x", true)
	must(t, err)
	_, _, err = s1.SetSkillActive(ctx, "dave", "x", true) // active only
	must(t, err)
	_, _, err = s1.SetSkillAcquired(ctx, "alice", "y", true)
	must(t, err)
	_, _, err = s1.SetSkillAcquired(ctx, "erin", "x-y", true)
	must(t, err)
	agents, err := s2.ForgetSkill(ctx, "x")
	must(t, err)
	if !slices.Equal(agents, []string{"alice", "bob", "carol", "dave"}) {
		t.Errorf("forgot x for %v", agents)
	}
	if got := holdNames(skillStates(t, s1, "", 0)); !slices.Equal(got, []string{"alice/y", "erin/x-y"}) {
		t.Errorf("after forgetting x: %v", got)
	}
	agents, err = s1.ForgetSkill(ctx, "x")
	if err != nil || len(agents) != 0 {
		t.Errorf("forget x again: %v, %v", agents, err)
	}
	// A forgotten skill can be acquired anew.
	st, changed, err := s1.SetSkillAcquired(ctx, "bob", "x", true)
	must(t, err)
	if !changed || st.Active {
		t.Errorf("acquire after forget: %+v, changed %v", st, changed)
	}
}

// testSkillsConcurrent: goroutines on two Stores acquire different skills
// for one agent: exactly MaxSkillHolds of them get one, the rest
// ErrConflict; then goroutines on two Stores make one change to one hold:
// exactly one reports it changed, and all return the same state.
func testSkillsConcurrent(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	const racers = store.MaxSkillHolds + 44
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		holds, conflicts int
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[i%2]
			var err error
			if i%4 == 0 {
				_, _, err = s.SetSkillActive(ctx, "alice", fmt.Sprintf("s%04d", i), true)
			} else {
				_, _, err = s.SetSkillAcquired(ctx, "alice", fmt.Sprintf("s%04d", i), true)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				holds++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if holds != store.MaxSkillHolds || conflicts != racers-store.MaxSkillHolds {
		t.Errorf("%d holds and %d conflicts of %d racers, want %d holds", holds, conflicts, racers, store.MaxSkillHolds)
	}
	if got := skillStates(t, stores[1], "alice", store.MaxPage); len(got) != store.MaxSkillHolds {
		t.Errorf("alice holds %d skills, the limit is %d", len(got), store.MaxSkillHolds)
	}

	for _, c := range []struct {
		what string
		set  func(s store.Store) (*store.SkillState, bool, error)
	}{
		{"acquire", func(s store.Store) (*store.SkillState, bool, error) {
			return s.SetSkillAcquired(ctx, "bob", "pdf", true)
		}},
		{"activate", func(s store.Store) (*store.SkillState, bool, error) { return s.SetSkillActive(ctx, "bob", "pdf", true) }},
		{"deactivate", func(s store.Store) (*store.SkillState, bool, error) {
			return s.SetSkillActive(ctx, "bob", "pdf", false)
		}},
		{"drop", func(s store.Store) (*store.SkillState, bool, error) {
			return s.SetSkillAcquired(ctx, "bob", "pdf", false)
		}},
	} {
		const n = 16
		states := make([]*store.SkillState, n)
		changed := make([]bool, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				states[i], changed[i], err = c.set(stores[i%2])
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if k := len(slices.DeleteFunc(slices.Clone(changed), func(b bool) bool { return !b })); k != 1 {
			t.Errorf("%s from %d goroutines: %d changed it, want 1", c.what, n, k)
		}
		for i := range states {
			if !reflect.DeepEqual(states[i], states[0]) {
				t.Errorf("%s: goroutine %d got %+v, goroutine 0 %+v", c.what, i, states[i], states[0])
			}
		}
	}
	if got := skillStates(t, stores[0], "bob", 0); len(got) != 0 {
		t.Errorf("bob holds %v after the drop", holdNames(got))
	}
}
