package commit

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/armory-dev/armory/store"
)

// Admission is what store.Store.Admit adds to a queued record. The flush
// sets Result (every attempt sets it anew).
type Admission struct {
	Session    string
	Acquire    []store.Acquisition
	MaxRuntime time.Duration
	Repeat     *store.Repeat
	Result     store.AdmitResult
}

// Keys returns the counters a's decision reads or writes (its acquisitions
// and the bookkeeping counters), possibly with repeats.
func (a *Admission) Keys() []Key {
	keys := make([]Key, 0, len(a.Acquire)+3)
	for _, acq := range a.Acquire {
		keys = append(keys, Key{a.Session, acq.Counter})
	}
	keys = append(keys, Key{a.Session, store.ActivityCounter})
	if a.Repeat != nil {
		keys = append(keys, Key{a.Session, store.RepeatSumCounter}, Key{a.Session, store.RepeatCountCounter})
	}
	return keys
}

// Key names one session counter.
type Key struct{ Session, Name string }

// Loader reads, inside the flush's write transaction (which must keep what
// it reads from changing until commit), the state that admissions need.
type Loader interface {
	// SessionStart returns the session's recorded start (Unix µs), or
	// ok false when the session has none.
	SessionStart(session string) (us int64, ok bool, err error)
	// Overrides returns the session's limit overrides (nil when none).
	Overrides(session string) (map[string]int64, error)
	// Counter returns the counter's value (0 when it has no row).
	Counter(k Key) (int64, error)
}

// Ledger decides the admissions of one batch in order, against the state a
// Loader reads (each key once) and the effects of the admissions before
// them, and collects what the flush must write: counters changed and
// sessions started. It is used by one goroutine.
type Ledger struct {
	load    Loader
	nowUS   int64
	c       *Cache
	dirty   map[Key]bool
	started []string // sessions whose clock this batch starts
}

// Cache is admission state (session starts, limit overrides, counter
// values) that a flush carries from one committed batch to the next, so
// that a batch reads from the database only the keys the cache lacks.
//
// The flush owns the rule that makes this exact: it may pass a Cache to the
// next batch only if that batch committed and nothing else can have written
// sessions, overrides or counters since (another process, or another write
// path of the same store); otherwise it must Clear it first. A Ledger from
// Cache.Ledger writes its decisions into the cache as it goes, so a batch
// that does not commit must Clear it too. A Cache is used by one goroutine.
type Cache struct {
	max       int
	starts    map[string]int64
	overrides map[string]map[string]int64
	values    map[Key]int64
}

// DefaultCacheEntries bounds a Cache when NewCache is given no bound.
const DefaultCacheEntries = 1 << 16

// NewCache returns an empty Cache holding at most about maxEntries session
// starts plus counter values (zero means DefaultCacheEntries): a Ledger
// started on a fuller cache clears it first, so it may exceed the bound by
// one batch's keys.
func NewCache(maxEntries int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	return &Cache{max: maxEntries, starts: map[string]int64{},
		overrides: map[string]map[string]int64{}, values: map[Key]int64{}}
}

// Clear forgets everything: the next batch reads every key again.
func (c *Cache) Clear() {
	clear(c.starts)
	clear(c.overrides)
	clear(c.values)
}

// Len returns the number of session starts and counter values held.
func (c *Cache) Len() int { return len(c.starts) + len(c.values) }

// HasSession reports whether the cache holds the session's start and its
// overrides, so that a Ledger on it will not load either. A backend that
// must issue its reads before deciding (a pipelined round trip) uses it to
// read only what the cache lacks; call it after Cache.Ledger, which may
// clear the cache.
func (c *Cache) HasSession(session string) bool {
	_, a := c.starts[session]
	_, b := c.overrides[session]
	return a && b
}

// HasCounter reports whether the cache holds k's value (see HasSession).
func (c *Cache) HasCounter(k Key) bool {
	_, ok := c.values[k]
	return ok
}

// Ledger returns a Ledger for a batch committed at now that reads through
// the cache: only keys it lacks are read with load, and what the batch
// reads and decides is kept in it (see Cache for when that may be reused).
// When the cache holds more than its bound it is cleared first.
func (c *Cache) Ledger(load Loader, now time.Time) *Ledger {
	if c.Len() > c.max {
		c.Clear()
	}
	return &Ledger{load: load, nowUS: now.UnixMicro(), c: c, dirty: map[Key]bool{}}
}

func (l *Ledger) start(session string) (int64, error) {
	if us, ok := l.c.starts[session]; ok {
		return us, nil
	}
	us, ok, err := l.load.SessionStart(session)
	if err != nil {
		return 0, err
	}
	if !ok {
		us = l.nowUS
		l.started = append(l.started, session)
	}
	l.c.starts[session] = us
	return us, nil
}

func (l *Ledger) limits(session string) (map[string]int64, error) {
	if m, ok := l.c.overrides[session]; ok {
		return m, nil
	}
	m, err := l.load.Overrides(session)
	if err != nil {
		return nil, err
	}
	l.c.overrides[session] = m
	return m, nil
}

func (l *Ledger) value(k Key) (int64, error) {
	if v, ok := l.c.values[k]; ok {
		return v, nil
	}
	v, err := l.load.Counter(k)
	if err != nil {
		return 0, err
	}
	l.c.values[k] = v
	return v, nil
}

// Decide decides a, sets a.Result and, when admitted, applies its
// acquisitions to the ledger. The runtime cap is checked first, then every
// acquisition in order (an acquisition's limit is the session's override
// for its counter, else its Max); a counter named twice sees its first
// increment. Nothing is applied unless everything fits.
func (l *Ledger) Decide(a *Admission) error {
	a.Result = store.AdmitResult{}
	us, err := l.start(a.Session)
	if err != nil {
		return err
	}
	a.Result.SessionStart = time.UnixMicro(us).UTC()
	over, err := l.limits(a.Session)
	if err != nil {
		return err
	}
	if a.MaxRuntime > 0 {
		maxUS := a.MaxRuntime.Microseconds()
		if v, ok := over[store.LimitSessionRuntime]; ok {
			maxUS = math.MaxInt64 // an override too large for µs is no cap
			if v < math.MaxInt64/1_000_000 {
				maxUS = v * 1e6
			}
		}
		if ranUS := l.nowUS - us; ranUS > maxUS {
			a.Result.Hit = &store.LimitHit{Counter: store.LimitSessionRuntime, Current: ranUS / 1e6, Max: maxUS / 1e6}
			return nil
		}
	}
	var runLen int64
	if r := a.Repeat; r != nil {
		sum, err := l.value(Key{a.Session, store.RepeatSumCounter})
		if err != nil {
			return err
		}
		n, err := l.value(Key{a.Session, store.RepeatCountCounter})
		if err != nil {
			return err
		}
		runLen = 1
		if n > 0 && sum == r.Sum {
			runLen = n + 1
		}
		if r.Max > 1 && runLen >= r.Max && !r.Justified {
			a.Result.Hit = &store.LimitHit{Counter: store.RepetitionCounter, Current: runLen - 1, Max: r.Max}
			return nil
		}
	}
	next := make([]int64, len(a.Acquire))
	for i, acq := range a.Acquire {
		k := Key{a.Session, acq.Counter}
		cur, err := l.value(k)
		if err != nil {
			return err
		}
		// An earlier acquisition of the same counter in this request.
		for j := range i {
			if a.Acquire[j].Counter == acq.Counter {
				cur = next[j]
			}
		}
		max := acq.Max
		if v, ok := over[acq.Counter]; ok {
			max = v
		}
		if cur+acq.N > max {
			a.Result.Hit = &store.LimitHit{Counter: acq.Counter, Current: cur, Max: max}
			return nil
		}
		next[i] = cur + acq.N
	}
	for i, acq := range a.Acquire {
		k := Key{a.Session, acq.Counter}
		l.c.values[k] = next[i]
		l.dirty[k] = true
	}
	if r := a.Repeat; r != nil {
		l.set(Key{a.Session, store.RepeatSumCounter}, r.Sum)
		l.set(Key{a.Session, store.RepeatCountCounter}, runLen)
	}
	l.set(Key{a.Session, store.ActivityCounter}, l.nowUS)
	a.Result.Admitted = true
	return nil
}

func (l *Ledger) set(k Key, v int64) {
	l.c.values[k] = v
	l.dirty[k] = true
}

// Dirty returns the counters the batch changed, sorted, with their new
// values.
func (l *Ledger) Dirty() (keys []Key, values []int64) {
	for k := range l.dirty {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Session, b.Session), cmp.Compare(a.Name, b.Name))
	})
	for _, k := range keys {
		values = append(values, l.c.values[k])
	}
	return keys, values
}

// Started returns the sessions whose clock the batch starts, and the start
// (Unix µs).
func (l *Ledger) Started() ([]string, int64) { return l.started, l.nowUS }
