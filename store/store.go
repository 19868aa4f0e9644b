// Package store declares the persistence Armory's guarded pipeline needs:
// the audit trail (hash-chained, group-committed), the approval queue, and
// per-session counters for safety caps; and the persistence of the world's
// services (agents, inboxes, chats, tasks, knowledge, memory, state, timers
// and leases: services.go, messages.go, timers.go, leases.go) and of skill
// state (skills.go). Backends live in sub-packages (sqlite, the embedded
// default; postgres) and all pass one conformance suite (storetest).
//
// Every Store is safe for concurrent use by many goroutines, and several
// Stores (in one process or in several) may share one database: the audit
// chain stays exact, counters stay exact, and a decision made through one
// Store wakes WaitApproval in another.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/armory-dev/armory/audit"
)

// Sentinel errors. Backends wrap them with context; test with errors.Is.
var (
	// ErrNotFound: no approval (agent, task, timer, …) with that ID.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: the state does not allow the change (an approval already
	// decided, an approval ID reused, a result already stored, a stale
	// version, a lease held by another).
	ErrConflict = errors.New("store: conflict")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid: a bad argument (unknown decision, negative amount, …).
	ErrInvalid = errors.New("store: invalid argument")
)

// Store is every role of a backend in one value: what opening a store
// returns (both backends implement every role; see each backend's
// compile-time checks) and what the code that opens it hands out. Code that
// uses a store declares the small interface it needs in its own package
// (pipeline.Store, server.Store, trail.Store, upstream.Pins) instead of
// depending on Store; the roles below are the contracts, one conformance
// suite (storetest) checks each of them on every backend.
type Store interface {
	AuditLog
	Approvals
	Sessions
	Admission
	RunClaims
	Tokens
	Pins
	Events
	// The world's services (services.go, messages.go, timers.go,
	// leases.go).
	Agents
	Inboxes
	Chats
	Channels
	Tasks
	Knowledge
	Memory
	State
	Timers
	Leases
	// Which agent holds which skill pack (skills.go).
	Skills
	// Close waits for queued audit appends to commit, then releases the
	// database. Later calls return ErrClosed. Close is idempotent.
	Close() error
}

// AuditLog is the hash-chained audit trail.
type AuditLog interface {
	// AppendAudit appends rec to the audit trail. It normalizes rec and
	// assigns its Seq, PrevHash and Hash (see audit.Record.Seal) atomically
	// with respect to every other appender, in this process or another one
	// sharing the database; when it returns nil the record is durable (see
	// the backend for what durable means). Concurrent calls are group
	// committed: they share one transaction. If ctx ends first AppendAudit
	// returns ctx.Err() and rec is left unchanged, but the record may still
	// be committed. Errors: ErrClosed, or the database error of the batch.
	AppendAudit(ctx context.Context, rec *audit.Record) error
	// ListAudit returns the records that match f, newest (highest Seq)
	// first unless f.Oldest is set.
	ListAudit(ctx context.Context, f AuditFilter) ([]*audit.Record, error)
	// IterAudit calls fn for every record in Seq order from Seq 1, streaming
	// from one consistent snapshot. It stops at the first error fn returns
	// and returns it.
	IterAudit(ctx context.Context, fn func(*audit.Record) error) error
	// AuditHead returns the head of the trail (last Seq and Hash), kept in
	// the database alongside the records.
	AuditHead(ctx context.Context) (audit.Head, error)
	// VerifyAudit verifies the whole trail (audit.Verifier) against the
	// stored head, from one consistent snapshot. It returns nil or a
	// *audit.ChainError naming the first broken seq, or a database error.
	VerifyAudit(ctx context.Context) error
	// CommitCounts reports how many group commits this Store's committer
	// has made (AppendAudit's and Admit's), by durability.
	CommitCounts() CommitCounts
}

// Approvals is the approval queue.
type Approvals interface {
	// CreateApproval stores a new approval. An empty ID gets a fresh one, a
	// zero CreatedAt the current time, an empty Status StatusPending and an
	// empty Route "human"; a is updated accordingly. Errors: ErrConflict
	// when the ID exists, ErrInvalid for a bad status.
	CreateApproval(ctx context.Context, a *Approval) error
	// GetApproval returns the approval with id, or ErrNotFound.
	GetApproval(ctx context.Context, id string) (*Approval, error)
	// ListApprovals returns the approvals that match f, oldest first (queue
	// order).
	ListApprovals(ctx context.Context, f ApprovalFilter) ([]*Approval, error)
	// DecideApproval records a decision (approved, denied, escalated or
	// expired) by by, for reason. It is allowed only from pending, or from
	// escalated to a final decision; escalating also sets Route to "human".
	// Errors: ErrNotFound; ErrConflict when the approval was already decided
	// (a second decision loses, whichever process makes it); ErrInvalid for
	// another decision value.
	DecideApproval(ctx context.Context, id string, decision ApprovalStatus, by, reason string) error
	// SetApprovalResult stores the result of the call an approval allowed,
	// so that a resumed call returns it instead of running twice. It is
	// allowed once, on an approved approval. Errors: ErrNotFound;
	// ErrConflict when not approved or a result is already stored.
	SetApprovalResult(ctx context.Context, id string, result json.RawMessage) error
	// WaitApproval blocks until the approval is final (approved, denied or
	// expired) and returns it. Escalation does not end the wait. It notices
	// decisions made by other Stores and other processes. Errors:
	// ErrNotFound, ctx.Err(), ErrClosed.
	WaitApproval(ctx context.Context, id string) (*Approval, error)
}

// Sessions are the per-session counters, limits and clocks behind the
// safety caps.
type Sessions interface {
	// Acquire adds n (≥ 0) to the session's counter iff the result stays
	// ≤ the limit, atomically with respect to every other Store on the
	// database. The limit is the session's override for counter when one is
	// set (SetLimitOverride), else max. It returns the counter's value after
	// the call and whether n was added. Errors: ErrInvalid for n < 0.
	Acquire(ctx context.Context, session, counter string, n, max int64) (current int64, ok bool, err error)
	// Release subtracts n (≥ 0) from the session's counter, not below 0,
	// atomically with respect to every other Store on the database, and
	// returns the value after the call (0 for a counter without a value).
	// It gives back what an Acquire reserved and did not use. Errors:
	// ErrInvalid for n < 0.
	Release(ctx context.Context, session, counter string, n int64) (current int64, err error)
	// Counters returns the session's counters (empty map when none).
	Counters(ctx context.Context, session string) (map[string]int64, error)
	// SetLimitOverride sets the session's limit for counter (used by
	// `armory session extend`); max < 0 removes the override.
	SetLimitOverride(ctx context.Context, session, counter string, max int64) error
	// LimitOverrides returns the session's overrides (empty map when none).
	LimitOverrides(ctx context.Context, session string) (map[string]int64, error)
	// ResetSession zeroes the session's counters and forgets its start time
	// (the next SessionStart starts it anew). Limit overrides are kept.
	ResetSession(ctx context.Context, session string) error
	// SessionStart returns when the session started, recording now on first
	// use (the first caller wins across processes).
	SessionStart(ctx context.Context, session string) (time.Time, error)

	// GetSession returns what the store knows of the session (a session
	// without a recorded start has a zero Started; that is not an error).
	// It changes nothing.
	GetSession(ctx context.Context, session string) (SessionInfo, error)
	// SessionGenerations returns the sessions named base, or base followed
	// by "#" and anything, that have a recorded start, longest then greatest
	// name first (base#10 before base#9 before base), at most limit (at most
	// MaxSessionGenerations; ≤ 0 means that).
	SessionGenerations(ctx context.Context, base string, limit int) ([]SessionInfo, error)
}

// Admission is the atomic admission of a call (caps, loop detection and
// its start record in one group commit).
type Admission interface {
	// Admit is the atomic, group-committed admission of one call: with
	// respect to every other Store on the database, in any process, it
	// starts the session clock on first use (as SessionStart does), checks
	// the runtime cap, applies every acquisition iff all of them stay within
	// their limits, and appends req.Record — or, when a limit would be
	// exceeded, applies no acquisition, appends nothing and reports the
	// first limit hit (runtime first, then the acquisitions in order). The
	// session clock is started either way. Admit shares AppendAudit's group
	// commit (concurrent calls share one transaction) and its result is
	// durable when it returns. Admit also decides req.Repeat (loop
	// detection across processes: before the acquisitions, refused with
	// Hit.Counter RepetitionCounter) and, on admission, records the
	// session's last activity (counter ActivityCounter, Unix µs of the
	// batch). On admission req.Record (and req.Finish, appended right
	// after it in the same transaction) receives its committed form, as
	// with AppendAudit. If ctx ends first Admit returns
	// ctx.Err(), and the admission may still be committed. Errors:
	// ErrInvalid (nil Record, an acquisition with N < 0 or no counter, a
	// negative MaxRuntime), ErrClosed, or the database error of the batch.
	Admit(ctx context.Context, req *AdmitRequest) (AdmitResult, error)
}

// Tokens are the server's API tokens.
type Tokens interface {
	// CreateToken stores a new API token. Only its SHA-256 hash is stored
	// (Token.Hash, 64 lower-case hex digits); the secret never reaches the
	// store. An empty ID gets a fresh one and a zero CreatedAt the current
	// time; t is updated accordingly. Errors: ErrInvalid (a malformed hash,
	// or not exactly one of Admin and Agent set), ErrConflict (the ID or
	// the hash exists).
	CreateToken(ctx context.Context, t *Token) error
	// ListTokens returns every token, revoked ones included, oldest first.
	ListTokens(ctx context.Context) ([]*Token, error)
	// RevokeToken revokes the token with id; it is never valid again.
	// Errors: ErrNotFound; ErrConflict when it is already revoked.
	RevokeToken(ctx context.Context, id string) error
	// LookupToken returns the unrevoked token whose hash is hash, or
	// ErrNotFound (for an unknown and for a revoked token alike).
	LookupToken(ctx context.Context, hash string) (*Token, error)
	// TokenEpoch returns a value that changes whenever a token of this
	// database is revoked, by any process, and that is cheap to read, so
	// that a server may keep a checked token while the epoch is unchanged;
	// "" when the backend has no such value (then nothing may be cached
	// by epoch: every request reads the store).
	TokenEpoch() (string, error)
}

// Pins are the pinned definitions of upstream MCP tools.
type Pins interface {
	// ObservePin records that upstream MCP server's tool was seen with the
	// definition whose hex SHA-256 is hash (def is the definition itself,
	// kept for humans to compare). At first sight the definition is pinned;
	// when a pin exists with another hash, hash and def are recorded as
	// its pending change (replacing an earlier pending change) and the pin
	// is kept. It returns the pin after the call: the caller compares
	// Hash with hash. Atomic with respect to every other Store on the
	// database (the first observer pins). Errors: ErrInvalid (empty server
	// or tool, a malformed hash, a definition over MaxPinDefinition).
	ObservePin(ctx context.Context, server, tool, hash string, def json.RawMessage) (*ToolPin, error)
	// ListPins returns the pins of server ("" for every server), ordered by
	// server and tool.
	ListPins(ctx context.Context, server string) ([]*ToolPin, error)
	// AcceptPin makes the pending definition of server's tool the pinned
	// one. When hash is not empty it must equal the pending hash (so that a
	// human accepts exactly what they looked at). Errors: ErrNotFound (no
	// such pin), ErrConflict (nothing pending, or another pending hash).
	AcceptPin(ctx context.Context, server, tool, hash string) (*ToolPin, error)
}

// Events passes events for humans (what /api/events streams) between the
// processes sharing the database, so that every replica shows every
// replica's events. Delivery is best effort: the records are the truth.
type Events interface {
	// PublishEvent sends payload to every process subscribed on the
	// database, without waiting; false when it is not sent (dropped, too
	// large, closed, or no other process listens or can be reached).
	PublishEvent(payload []byte) bool
	// SubscribeEvents calls fn with every event payload published on the
	// database by any process, until cancel is called. fn must not block.
	SubscribeEvents(fn func(payload []byte)) (cancel func())
	// EventsDropped is how many events PublishEvent dropped because its
	// bounded queue was full.
	EventsDropped() int64
}

// Token is an API token of the server: an admin token reaches everything,
// an agent token only that agent's tools, calls and MCP endpoint. The
// secret itself is never stored, only Hash (hex SHA-256 of the secret).
type Token struct {
	ID        string    `json:"id"`
	Hash      string    `json:"-"`
	Admin     bool      `json:"admin"`
	Agent     string    `json:"agent,omitempty"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// CheckToken validates a token about to be created; backends call it. It
// returns an error wrapping ErrInvalid.
func CheckToken(t *Token) error {
	if t == nil {
		return fmt.Errorf("%w: nil token", ErrInvalid)
	}
	if len(t.Hash) != 64 {
		return fmt.Errorf("%w: token hash must be 64 hex digits", ErrInvalid)
	}
	for _, c := range t.Hash {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: token hash must be 64 lower-case hex digits", ErrInvalid)
		}
	}
	if t.Admin == (t.Agent != "") {
		return fmt.Errorf("%w: a token is either an admin token or an agent's (admin=%v, agent=%q)", ErrInvalid, t.Admin, t.Agent)
	}
	return nil
}

// ToolPin is the pinned definition of one upstream MCP tool (see package
// upstream): a changed definition is withheld until a human accepts it.
type ToolPin struct {
	Server string `json:"server"`
	Tool   string `json:"tool"` // the upstream's own tool name
	// Hash is the hex SHA-256 of the pinned definition (name, description,
	// input and output schema).
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition,omitempty"`
	PinnedAt   time.Time       `json:"pinned_at"`
	// PendingHash is the hash of a changed definition seen since, "" when
	// none; PendingDefinition is that definition.
	PendingHash       string          `json:"pending_hash,omitempty"`
	PendingDefinition json.RawMessage `json:"pending_definition,omitempty"`
	PendingAt         time.Time       `json:"pending_at,omitzero"`
}

// MaxPinDefinition is the largest tool definition a pin keeps.
const MaxPinDefinition = 256 << 10

// CheckPin validates ObservePin's arguments; backends call it. It returns an
// error wrapping ErrInvalid.
func CheckPin(server, tool, hash string, def json.RawMessage) error {
	if server == "" || tool == "" {
		return fmt.Errorf("%w: a pin needs a server and a tool", ErrInvalid)
	}
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: pin hash must be 64 lower-case hex digits", ErrInvalid)
	}
	if len(def) > MaxPinDefinition {
		return fmt.Errorf("%w: tool definition is %d bytes; the limit is %d", ErrInvalid, len(def), MaxPinDefinition)
	}
	return nil
}

// CheckAccept validates accepting pin p's pending definition, expecting
// hash when not empty; backends call it. It returns an error wrapping
// ErrConflict.
func CheckAccept(p *ToolPin, hash string) error {
	if p.PendingHash == "" {
		return fmt.Errorf("%w: no changed definition is pending", ErrConflict)
	}
	if hash != "" && hash != p.PendingHash {
		return fmt.Errorf("%w: the pending definition is %s, not %s", ErrConflict, p.PendingHash, hash)
	}
	return nil
}

// Acquisition is one counter increment a call needs; Max is the default
// limit, replaced by the session's override for Counter when one is set
// (exactly as Acquire does).
type Acquisition struct {
	Counter string
	N, Max  int64
}

// LimitSessionRuntime is the counter name under which Admit reports the
// runtime cap (LimitHit.Current and Max in seconds) and under which a limit
// override replaces AdmitRequest.MaxRuntime (in seconds).
const LimitSessionRuntime = "session_runtime"

// AdmitRequest is one call's admission (see Store.Admit).
type AdmitRequest struct {
	Session string
	// Record is the call's start record, sealed and appended on admission.
	Record *audit.Record
	// Finish, when set, is the call's finish record, appended right after
	// Record in the same transaction, and only on admission: a call whose
	// tool cannot change anything runs before it is admitted and commits
	// its admission, start and finish at once (one commit instead of two).
	// Refused, neither record is appended. On admission Finish receives its
	// committed form too. The commit is durable unless NoSync (which then
	// covers both records).
	Finish  *audit.Record
	Acquire []Acquisition
	// MaxRuntime is the session's runtime limit; 0 means no runtime cap.
	// The session's override "session_runtime" (seconds) replaces it.
	MaxRuntime time.Duration
	// NoSync lets the backend commit this admission without waiting for
	// stable storage (no fsync of its own): when Admit returns, the record
	// and the counters are committed all the same (every reader and
	// process sees them; caps stay exact), but a power loss or an
	// operating-system crash, not a process crash, may lose them until the
	// store's next durable commit, which makes them durable too (the
	// backends' logs are sequential). A batch is relaxed only when every
	// entry in it allows it. The pipeline sets it only for the start record
	// of a call whose tool cannot change anything (its finish record, always
	// durable, then covers it): see docs/storage.md, "Durability".
	NoSync bool
	// Repeat, when set, is the call's repetition check: the session keeps
	// the digest of its last admitted call and how many admitted calls in a
	// row had it (counters RepeatSumCounter and RepeatCountCounter); a call
	// with the same digest that would make the run reach Max is refused
	// unless Justified.
	Repeat *Repeat
}

// Repeat is an admission's repetition check (AdmitRequest.Repeat).
type Repeat struct {
	// Sum is a digest of the tool and its arguments (any 64 bits of a
	// cryptographic hash).
	Sum int64
	// Max is the run length that is refused: the Max-th identical call in a
	// row. Max ≤ 1 disables the check.
	Max int64
	// Justified lets the call through (its run still counts).
	Justified bool
}

// Reserved counter names, kept with the session's other counters (so that
// they are exact across processes and reset with them). Counters whose name
// starts with "~" are bookkeeping, not caps: surfaces do not list them.
const (
	// RepetitionCounter is LimitHit.Counter for a refused repetition
	// (Current: identical admitted calls in a row, Max: Repeat.Max).
	RepetitionCounter = "repetition"
	// ActivityCounter is the session's last admission (Unix µs).
	ActivityCounter = "~last_activity_us"
	// RepeatSumCounter and RepeatCountCounter are the repetition state.
	RepeatSumCounter   = "~repeat_sum"
	RepeatCountCounter = "~repeat_count"
)

// CommitCounts is how many group commits a backend's committer has made,
// by durability: Durable ones waited for stable storage, Relaxed ones
// (batches of AdmitRequest.NoSync admissions only, or every batch of a
// Batched store) did not. Syncs counts the background syncs of a Batched
// store, each making every commit before it durable; DurableSeq is the
// highest audit Seq this Store committed that is known durable (its last
// durable commit's or, Batched, the last sync's); Mode is the Store's
// durability mode.
type CommitCounts struct {
	Durable, Relaxed  int64
	Syncs, DurableSeq int64
	Mode              Durability
}

// LimitHit is the limit that refused an admission. For the runtime cap
// Counter is "session_runtime" and Current and Max are in seconds.
type LimitHit struct {
	Counter      string
	Current, Max int64
}

// AdmitResult is the outcome of Admit: Admitted, or refused with Hit set.
// SessionStart is when the session started.
type AdmitResult struct {
	Admitted     bool
	Hit          *LimitHit
	SessionStart time.Time
}

// CheckAdmit validates req; backends call it before queueing. It returns an
// error wrapping ErrInvalid.
func CheckAdmit(req *AdmitRequest) error {
	if req == nil || req.Record == nil {
		return fmt.Errorf("%w: admit needs a start record", ErrInvalid)
	}
	if req.MaxRuntime < 0 {
		return fmt.Errorf("%w: negative MaxRuntime", ErrInvalid)
	}
	for _, a := range req.Acquire {
		if a.N < 0 || a.Counter == "" {
			return fmt.Errorf("%w: acquisition %q of %d", ErrInvalid, a.Counter, a.N)
		}
	}
	return nil
}

// AuditFilter selects audit records. Zero fields do not filter.
type AuditFilter struct {
	Agent   string
	Tool    string
	Session string
	Status  audit.Status
	CallID  string    // the record ID shared by a call's start and finish entries
	Since   time.Time // records with Time ≥ Since
	// AfterSeq and BeforeSeq bound Seq exclusively (page with them).
	AfterSeq  int64
	BeforeSeq int64
	// Oldest orders by ascending Seq; the default is newest first.
	Oldest bool
	// Limit caps the number of records (default 100, at most 10,000).
	Limit int
}

// Limits of ListAudit and ListApprovals.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// EffectiveLimit returns the limit a backend applies for a requested one.
func EffectiveLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// ApprovalStatus is the state of an approval.
type ApprovalStatus string

// Approval states. Pending and escalated are open; the others are final.
const (
	StatusPending   ApprovalStatus = "pending"
	StatusApproved  ApprovalStatus = "approved"
	StatusDenied    ApprovalStatus = "denied"
	StatusEscalated ApprovalStatus = "escalated"
	StatusExpired   ApprovalStatus = "expired"
)

// Final reports whether s ends an approval's life.
func (s ApprovalStatus) Final() bool {
	return s == StatusApproved || s == StatusDenied || s == StatusExpired
}

// Valid reports whether s is a known status.
func (s ApprovalStatus) Valid() bool {
	return s == StatusPending || s == StatusEscalated || s.Final()
}

// RouteHuman is the route of an approval decided by a human (the default,
// and the route after an escalation); an approval routed to an approver
// agent has the route "agent:<id>" (see RouteAgent).
const RouteHuman = "human"

// RouteAgent returns the route of an approval routed to agent id.
func RouteAgent(id string) string { return "agent:" + id }

// Approval is a call waiting for (or having received) a human or agent
// decision.
type Approval struct {
	ID      string          `json:"id"`
	Agent   string          `json:"agent"`
	Session string          `json:"session,omitempty"`
	Task    string          `json:"task,omitempty"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"` // redacted (audit.Redact)
	// ArgsHash is a digest of the unredacted arguments, computed by the
	// caller, so that a resumed call can prove it carries the arguments that
	// were approved without the store keeping secrets.
	ArgsHash string `json:"args_hash,omitempty"`
	Reason   string `json:"reason"`
	// Level is the permission level that asked for approval (confirm,
	// always_confirm, …).
	Level          string         `json:"level"`
	CreatedAt      time.Time      `json:"created_at"`
	Status         ApprovalStatus `json:"status"`
	DecidedBy      string         `json:"decided_by,omitempty"`
	DecisionReason string         `json:"decision_reason,omitempty"`
	DecidedAt      time.Time      `json:"decided_at,omitzero"`
	Route          string         `json:"route"`
	// Result is the stored result of the allowed call (SetApprovalResult);
	// nil until then.
	Result json.RawMessage `json:"result,omitempty"`
}

// ApprovalFilter selects approvals. Zero fields do not filter.
type ApprovalFilter struct {
	Status  ApprovalStatus
	Agent   string
	Session string
	Route   string
	Limit   int // default 100, at most 10,000
}

// CheckDecision validates a decision and the transition from the current
// status; backends call it so that every backend enforces the same rules.
// It returns an error wrapping ErrInvalid or ErrConflict.
func CheckDecision(current, decision ApprovalStatus) error {
	switch decision {
	case StatusApproved, StatusDenied, StatusExpired, StatusEscalated:
	default:
		return &DecisionError{Decision: decision, invalid: true}
	}
	if current == StatusPending || (current == StatusEscalated && decision != StatusEscalated) {
		return nil
	}
	return &DecisionError{Current: current, Decision: decision}
}

// DecisionError is a refused decision.
type DecisionError struct {
	Current, Decision ApprovalStatus
	invalid           bool
}

func (e *DecisionError) Error() string {
	if e.invalid {
		return "store: invalid decision " + string(e.Decision)
	}
	return "store: approval already " + string(e.Current) + ", cannot become " + string(e.Decision)
}

// Is makes DecisionError match ErrInvalid or ErrConflict.
func (e *DecisionError) Is(target error) bool {
	if e.invalid {
		return target == ErrInvalid
	}
	return target == ErrConflict
}

// NewApproval returns the approval a backend stores for a: a fresh ID when
// a has none, CreatedAt now (UTC, microseconds) when zero, status pending
// and route human when empty, and null Args when none. It returns an error
// wrapping ErrInvalid for an unknown status. Every backend calls it, so the
// defaults are the same everywhere.
func NewApproval(a *Approval, now time.Time) (Approval, error) {
	c := *a
	if c.ID == "" {
		c.ID = audit.NewID()
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.UTC().Truncate(time.Microsecond)
	if c.Status == "" {
		c.Status = StatusPending
	}
	if !c.Status.Valid() {
		return c, fmt.Errorf("%w: status %q", ErrInvalid, c.Status)
	}
	if c.Route == "" {
		c.Route = RouteHuman
	}
	if len(c.Args) == 0 {
		c.Args = json.RawMessage("null")
	}
	return c, nil
}
