package commit

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

// memState is a real, in-memory Loader that counts its reads.
type memState struct {
	starts    map[string]int64
	overrides map[string]map[string]int64
	counters  map[Key]int64
	reads     int
}

func (m *memState) SessionStart(s string) (int64, bool, error) {
	m.reads++
	us, ok := m.starts[s]
	return us, ok, nil
}
func (m *memState) Overrides(s string) (map[string]int64, error) {
	m.reads++
	return m.overrides[s], nil
}
func (m *memState) Counter(k Key) (int64, error) { m.reads++; return m.counters[k], nil }

func TestLedgerDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hourAgo := now.Add(-time.Hour).UnixMicro()
	acq := func(c string, n, max int64) store.Acquisition { return store.Acquisition{Counter: c, N: n, Max: max} }
	tests := []struct {
		name      string
		start     int64 // 0: no session yet
		overrides map[string]int64
		counters  map[string]int64
		adm       Admission
		want      *store.LimitHit
	}{
		{"fits", hourAgo, nil, map[string]int64{"a": 1}, Admission{Acquire: []store.Acquisition{acq("a", 1, 2)}, MaxRuntime: 2 * time.Hour}, nil},
		{"at the limit", 0, nil, map[string]int64{"a": 2}, Admission{Acquire: []store.Acquisition{acq("a", 1, 2)}}, &store.LimitHit{Counter: "a", Current: 2, Max: 2}},
		{"override raises", 0, map[string]int64{"a": 3}, map[string]int64{"a": 2}, Admission{Acquire: []store.Acquisition{acq("a", 1, 2)}}, nil},
		{"override lowers", 0, map[string]int64{"a": 1}, map[string]int64{"a": 1}, Admission{Acquire: []store.Acquisition{acq("a", 1, 5)}}, &store.LimitHit{Counter: "a", Current: 1, Max: 1}},
		{"runtime over", hourAgo, nil, nil, Admission{MaxRuntime: 30 * time.Minute}, &store.LimitHit{Counter: store.LimitSessionRuntime, Current: 3600, Max: 1800}},
		{"runtime exactly", hourAgo, nil, nil, Admission{MaxRuntime: time.Hour}, nil},
		{"runtime override", hourAgo, map[string]int64{store.LimitSessionRuntime: 7200}, nil, Admission{MaxRuntime: time.Minute}, nil},
		{"runtime override huge", hourAgo, map[string]int64{store.LimitSessionRuntime: math.MaxInt64}, nil, Admission{MaxRuntime: time.Minute}, nil},
		{"runtime override zero", hourAgo, map[string]int64{store.LimitSessionRuntime: 0}, nil, Admission{MaxRuntime: time.Hour}, &store.LimitHit{Counter: store.LimitSessionRuntime, Current: 3600, Max: 0}},
		{"no runtime cap", hourAgo, map[string]int64{store.LimitSessionRuntime: 0}, nil, Admission{}, nil},
		{"new session", 0, nil, nil, Admission{MaxRuntime: time.Second}, nil},
		{"runtime before counters", hourAgo, nil, map[string]int64{"a": 9}, Admission{Acquire: []store.Acquisition{acq("a", 1, 2)}, MaxRuntime: time.Second}, &store.LimitHit{Counter: store.LimitSessionRuntime, Current: 3600, Max: 1}},
		{"first hit reported", 0, nil, map[string]int64{"a": 2, "b": 2}, Admission{Acquire: []store.Acquisition{acq("a", 1, 2), acq("b", 1, 2)}}, &store.LimitHit{Counter: "a", Current: 2, Max: 2}},
		{"same counter twice", 0, nil, nil, Admission{Acquire: []store.Acquisition{acq("a", 2, 3), acq("a", 2, 3)}}, &store.LimitHit{Counter: "a", Current: 2, Max: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &memState{starts: map[string]int64{}, overrides: map[string]map[string]int64{"s": tc.overrides}, counters: map[Key]int64{}}
			if tc.start != 0 {
				m.starts["s"] = tc.start
			}
			for k, v := range tc.counters {
				m.counters[Key{"s", k}] = v
			}
			l := NewCache(0).Ledger(m, now)
			a := tc.adm
			a.Session = "s"
			if err := l.Decide(&a); err != nil {
				t.Fatal(err)
			}
			if (a.Result.Hit == nil) != (tc.want == nil) || (tc.want != nil && *a.Result.Hit != *tc.want) || a.Result.Admitted != (tc.want == nil) {
				t.Fatalf("result %+v hit %+v, want hit %+v", a.Result, a.Result.Hit, tc.want)
			}
			keys, values := l.Dirty()
			if tc.want != nil && len(keys) != 0 {
				t.Fatalf("a refusal changed counters: %v %v", keys, values)
			}
			started, _ := l.Started()
			if (tc.start == 0) != (len(started) == 1) {
				t.Fatalf("started %v with recorded start %d", started, tc.start)
			}
			wantStart := tc.start
			if wantStart == 0 {
				wantStart = now.UnixMicro()
			}
			if a.Result.SessionStart.UnixMicro() != wantStart {
				t.Fatalf("session start %v", a.Result.SessionStart)
			}
		})
	}
}

// Within a batch, later admissions see earlier ones, and each key is read
// once.
func TestLedgerBatch(t *testing.T) {
	m := &memState{starts: map[string]int64{}, overrides: map[string]map[string]int64{}, counters: map[Key]int64{{"s", "a"}: 1}}
	l := NewCache(0).Ledger(m, time.Now())
	admitted := 0
	for range 5 {
		a := &Admission{Session: "s", Acquire: []store.Acquisition{{Counter: "a", N: 1, Max: 3}, {Counter: "b", N: 2, Max: 100}}}
		if err := l.Decide(a); err != nil {
			t.Fatal(err)
		}
		if a.Result.Admitted {
			admitted++
		}
	}
	keys, values := caps(l.Dirty())
	if admitted != 2 || len(keys) != 2 || keys[0].Name != "a" || values[0] != 3 || values[1] != 4 {
		t.Fatalf("admitted %d, dirty %v %v", admitted, keys, values)
	}
	if m.reads != 4 { // start, overrides, a, b
		t.Fatalf("%d reads, want 4", m.reads)
	}
}

// A Cache carries what one batch read and decided into the next: the second
// batch reads nothing, starts no session again, and continues the counts;
// after Clear everything is read again; past its bound it starts empty.
func TestCacheAcrossBatches(t *testing.T) {
	m := &memState{starts: map[string]int64{}, overrides: map[string]map[string]int64{"s": {"a": 3}}, counters: map[Key]int64{}}
	decide := func(l *Ledger, n int) (admitted int) {
		t.Helper()
		for range n {
			a := &Admission{Session: "s", Acquire: []store.Acquisition{{Counter: "a", N: 1, Max: 100}}}
			if err := l.Decide(a); err != nil {
				t.Fatal(err)
			}
			if a.Result.Admitted {
				admitted++
			}
		}
		return admitted
	}
	c := NewCache(0)
	l := c.Ledger(m, time.Now())
	if c.HasSession("s") || c.HasCounter(Key{"s", "a"}) {
		t.Fatal("empty cache reports a key")
	}
	if got := decide(l, 2); got != 2 {
		t.Fatalf("batch 1 admitted %d", got)
	}
	if !c.HasSession("s") || !c.HasCounter(Key{"s", "a"}) || c.HasCounter(Key{"s", "b"}) || c.HasSession("t") {
		t.Fatal("HasSession/HasCounter disagree with what batch 1 read")
	}
	if started, _ := l.Started(); len(started) != 1 || m.reads != 3 {
		t.Fatalf("batch 1: started %v, %d reads", started, m.reads)
	}
	// The flush committed batch 1; the backing state now holds its writes.
	m.starts["s"] = 1
	m.counters[Key{"s", "a"}] = 2

	l = c.Ledger(m, time.Now())
	if got := decide(l, 2); got != 1 { // override 3: one more fits
		t.Fatalf("batch 2 admitted %d, want 1", got)
	}
	if started, _ := l.Started(); len(started) != 0 || m.reads != 3 {
		t.Fatalf("batch 2: started %v, %d reads (want none new)", started, m.reads)
	}
	if keys, values := caps(l.Dirty()); len(keys) != 1 || values[0] != 3 {
		t.Fatalf("batch 2 dirty %v %v", keys, values)
	}

	// Another writer raised the override: the flush must Clear.
	m.counters[Key{"s", "a"}] = 3
	m.overrides["s"]["a"] = 4
	c.Clear()
	if c.Len() != 0 || c.HasSession("s") || c.HasCounter(Key{"s", "a"}) {
		t.Fatalf("Len after Clear = %d", c.Len())
	}
	l = c.Ledger(m, time.Now())
	if got := decide(l, 2); got != 1 || m.reads != 6 {
		t.Fatalf("after Clear: admitted %d, %d reads; want 1, 6", got, m.reads)
	}

	// The bound: a cache over it starts the next batch empty.
	small := NewCache(3)
	for i := range 5 {
		l := small.Ledger(m, time.Now())
		a := &Admission{Session: fmt.Sprintf("x%d", i), Acquire: []store.Acquisition{{Counter: "a", N: 1, Max: 1}}}
		if err := l.Decide(a); err != nil || !a.Result.Admitted {
			t.Fatalf("session %d: %v %+v", i, err, a.Result)
		}
		if small.Len() > 3+3 { // the bound plus one batch's keys (start, a, last activity)
			t.Fatalf("cache holds %d entries, bound 3", small.Len())
		}
	}
}

// caps drops the bookkeeping counters ("~…") from Dirty's result.
func caps(keys []Key, values []int64) ([]Key, []int64) {
	var k []Key
	var v []int64
	for i, key := range keys {
		if !strings.HasPrefix(key.Name, "~") {
			k, v = append(k, key), append(v, values[i])
		}
	}
	return k, v
}

// Repetition: the Max-th identical admission in a row is refused (and takes
// nothing), a justified one passes and still counts, another digest starts
// a new run; the state lives in the session's counters.
func TestLedgerRepeat(t *testing.T) {
	m := &memState{starts: map[string]int64{}, overrides: map[string]map[string]int64{}, counters: map[Key]int64{}}
	l := NewCache(0).Ledger(m, time.Now())
	try := func(sum int64, justified bool) *store.AdmitResult {
		t.Helper()
		a := &Admission{Session: "s", Acquire: []store.Acquisition{{Counter: "calls", N: 1, Max: 100}},
			Repeat: &store.Repeat{Sum: sum, Max: 3, Justified: justified}}
		if err := l.Decide(a); err != nil {
			t.Fatal(err)
		}
		return &a.Result
	}
	for i := range 2 {
		if r := try(7, false); !r.Admitted {
			t.Fatalf("call %d refused: %+v", i+1, r.Hit)
		}
	}
	r := try(7, false)
	if r.Admitted || *r.Hit != (store.LimitHit{Counter: store.RepetitionCounter, Current: 2, Max: 3}) {
		t.Fatalf("third identical call: %+v %+v", r.Admitted, r.Hit)
	}
	if !try(7, true).Admitted {
		t.Fatal("a justified call was refused")
	}
	if try(7, false).Admitted {
		t.Fatal("the call after a justified one was admitted")
	}
	if !try(8, false).Admitted || !try(7, false).Admitted {
		t.Fatal("a different call did not start a new run")
	}
	keys, values := l.Dirty()
	got := map[string]int64{}
	for i, k := range keys {
		got[k.Name] = values[i]
	}
	if got["calls"] != 5 || got[store.RepeatSumCounter] != 7 || got[store.RepeatCountCounter] != 1 || got[store.ActivityCounter] == 0 {
		t.Fatalf("dirty %v", got)
	}
}
