// Package pipeline is Armory's one enforcement path. Every tool call, from
// every surface (library, CLI, MCP, REST), goes through Pipeline.Execute,
// whose stages run in this order, each returning a decision with reasons:
//
//	lookup (and the gates: a stopped agent) → validate → caps and loop detection → screen (terminal tools)
//	→ veto and bias patterns → permission level and approval → run → audit
//
// A refusal at any stage is a Result a model can read (what stopped the call
// and what to do next), and it is audited like any call. A call that runs
// has an audit entry written before it runs (fail closed: no entry, no run)
// and one after; its outcome is returned only once that entry is durable.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/access"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// Options configure a Pipeline. The zero value of every field has a sane
// default.
type Options struct {
	// Store keeps the audit trail, approvals and session counters. Required.
	Store Store
	// AfterAudit, when set, is called with each audit record the store
	// committed, sealed (the JSONL trail's follower copies it then, off the
	// call's path; see audit/trail). It must not block nor modify rec; it
	// may keep it.
	AfterAudit func(rec *audit.Record)
	// AuditFailOpen lets calls run when their audit entry cannot be written.
	// The default (false) is fail closed: no entry, no run.
	AuditFailOpen bool
	// Now is the clock (default time.Now); tests fix it.
	Now func() time.Time
	// OnEvent, when set, receives events for humans (approval requested or
	// decided, limit reached, call finished). It must not block.
	OnEvent func(Event)
	// PollInterval bounds how often waits re-check state another process
	// may change (default 100ms).
	PollInterval time.Duration
	// RunLease is the lease of the claim on running an approved call
	// (default 15s; see store.RunClaims). The process running the tool
	// renews it every RunLease/3; when it lapses (that process died), a
	// caller waiting for the result resolves the call as interrupted
	// instead of waiting forever, and never runs the tool again.
	RunLease time.Duration
	// ResultWait bounds how long a call waits for the result of an
	// approved call that another caller runs (default 2×RunLease, so that
	// one wait outlasts a dead runner's lease); a longer Call.Wait extends
	// it. After it the outcome is pending, to be resumed again.
	ResultWait time.Duration
	// Holder names this process in run claims (default host/pid/random).
	Holder string
	// Gates decide, right after lookup finds the agent, whether the agent
	// may make calls at all (a stopped agent; see Gate). Every call and
	// every resumed call passes them, in order.
	Gates []Gate
}

// Pipeline runs calls for the agents of one roster. Safe for concurrent use.
type Pipeline struct {
	h    *roster.Roster
	st   Store
	opts Options

	schemas  sync.Map     // tool value → *compiledSchema (stages.go schema)
	nSchemas atomic.Int64 // entries added to schemas since it was last emptied
	unnamed  sync.Map     // agent → defaultGen (sessions.go)
	// pipeTools implement the roster's pipeline tools (roster.PipelineTool),
	// by name.
	pipeTools map[string]armory.Tool
	// capped is the sessions whose last effect-free call admitted after it
	// ran was refused (run): their next calls are admitted before they run.
	capped cappedSessions
}

// maxCapped bounds cappedSessions; when full it is cleared (a session
// forgotten only runs one more effect-free call before its admission).
const maxCapped = 4096

// cappedSessions is the sessions in which a cap or loop detection refused
// an effect-free call after it ran. Such a session's calls go back to being
// admitted before they run, until one of them is admitted again, so a model
// that keeps calling past a cap does not keep running tools whose results
// are discarded: at most the calls in flight when the cap is reached run in
// vain.
type cappedSessions struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (c *cappedSessions) has(sess string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[sess]
	return ok
}

func (c *cappedSessions) set(sess string, capped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !capped:
		delete(c.m, sess)
	case c.m == nil || len(c.m) >= maxCapped:
		c.m = map[string]struct{}{sess: {}}
	default:
		c.m[sess] = struct{}{}
	}
}

// New builds the pipeline for h. It implements the tools the roster declares
// as pipeline tools (roster.PipelineTools: approval.list and approval.decide
// of approval agents).
func New(h *roster.Roster, opts Options) (*Pipeline, error) {
	if opts.Store == nil {
		return nil, armory.E("pipeline.New", armory.KindInvalid, "a store is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 100 * time.Millisecond
	}
	if opts.RunLease <= 0 {
		opts.RunLease = DefaultRunLease
	}
	if opts.ResultWait <= 0 {
		opts.ResultWait = 2 * opts.RunLease
	}
	if opts.Holder == "" {
		opts.Holder = defaultHolder()
	}
	p := &Pipeline{h: h, st: opts.Store, opts: opts}
	p.pipeTools = map[string]armory.Tool{}
	for _, t := range []armory.Tool{&approvalList{p: p}, &approvalDecide{p: p}} {
		p.pipeTools[t.Spec().Name] = t
	}
	return p, nil
}

// Roster returns the world and agents the pipeline runs calls for.
func (p *Pipeline) Roster() *roster.Roster { return p.h }

// Store returns the pipeline's store.
func (p *Pipeline) Store() Store { return p.st }

// Call is one request to run a tool.
type Call struct {
	Agent string          `json:"agent"`
	Tool  string          `json:"tool"`
	Args  json.RawMessage `json:"args,omitempty"`
	// Session names the session whose caps the call counts against. Empty
	// (or DefaultSession(Agent)) is the agent's unnamed session, which ends
	// after the world's idle timeout (see Unnamed).
	Session string `json:"session,omitempty"`
	Task    string `json:"task,omitempty"`
	// Channel names the conversation the call is made in (its channel
	// context; see armory.Invocation.Channel), "" for none. At most
	// MaxChannelBytes of UTF-8 without control characters. A tool that
	// needs one (armory.Manifest.NeedsChannel) is refused at lookup
	// without it, and a call that names one passes the gates that keep
	// conversations (ChannelGate: the agent must hold it).
	Channel string `json:"channel,omitempty"`
	// Justification lets a call past loop detection; it is audited.
	Justification string `json:"justification,omitempty"`
	// Wait bounds how long Execute waits for an approval; after it the
	// outcome is pending with the approval id. 0 returns pending at once.
	Wait time.Duration `json:"-"`
	// Resume continues the call an approval was created for: it returns
	// the stored result if the tool already ran, waits (up to Wait) if the
	// approval is still open, and runs the tool at most once when approved.
	// Agent, Tool and Args must match the approval's (Args may be empty).
	Resume string `json:"resume,omitempty"`
	// Progress receives progress messages ("waiting for approval <id>",
	// tool output) as the call goes on. Optional.
	Progress func(msg string) `json:"-"`
}

// DefaultSession is the session of an agent's calls that name none.
func DefaultSession(agent string) string { return agent + ":default" }

// Outcome is what a call came to. It is what `armory call` prints.
type Outcome struct {
	CallID string `json:"call_id"`
	// Session is the session the call counted against (for an unnamed call,
	// the generation it went to).
	Session string       `json:"session,omitempty"`
	Status  audit.Status `json:"status"`
	// Result is for the model: what came of the call and what it can do.
	Result string `json:"result"`
	// Human, when set, says what a human can do (CLI and REST commands);
	// surfaces that serve a model (MCP) leave it out.
	Human      string            `json:"human,omitempty"`
	Value      any               `json:"value,omitempty"`
	Reasons    []string          `json:"reasons"`
	ApprovalID string            `json:"approval_id,omitempty"`
	DecidedBy  string            `json:"decided_by,omitempty"`
	Permission string            `json:"permission,omitempty"`
	Stages     []audit.Stage     `json:"stages,omitempty"`
	Artifacts  []armory.Artifact `json:"artifacts,omitempty"`
	// Kind classifies every outcome but a success (KindPending, KindBlocked,
	// KindDenied, KindTimeout, …; KindOther for a tool failure the tool did
	// not classify). The surfaces map it: the HTTP status in server, the
	// exit code in the armory command.
	Kind armory.Kind `json:"-"`
}

// state is one call as it moves through the stages.
type state struct {
	c         Call
	id        string
	start     time.Time
	ag        *roster.Agent
	tool      armory.Tool
	man       armory.Manifest
	stages    []audit.Stage
	level     armory.Permission
	hasLvl    bool
	approval  *store.Approval
	argsLower string
	terminal  access.Terminal
	bias      []string
	// admit is the admission the caps stage computed, taken with the start
	// record (nil once taken, or for a resumed call); capsStage is the index
	// of the caps stage in stages.
	admit     *store.AdmitRequest
	capsStage int
	// argsSum is the digest of the tool and its canonical arguments that
	// loop detection compares (set by validate).
	argsSum int64
	// unnamed: the call named no session; the caps stage resolves which
	// generation of the agent's unnamed session it goes to.
	unnamed bool
	// redacted is audit.Redact(c.Args), computed once for both records.
	redacted json.RawMessage
}

// redactedArgs returns the call's arguments as the audit trail keeps them
// (shared by the start and finish records, which only read them).
func (s *state) redactedArgs() json.RawMessage {
	if s.redacted == nil {
		s.redacted = audit.Redact(s.c.Args)
	}
	return s.redacted
}

func (s *state) stage(name, decision string, reasons ...string) {
	s.stages = append(s.stages, audit.Stage{Name: name, Decision: decision, Reasons: reasons})
}

// Execute runs c through every stage. It never panics on bad input and
// always returns an Outcome; refusals are outcomes, not errors.
func (p *Pipeline) Execute(ctx context.Context, c Call) Outcome {
	s := &state{c: c, id: audit.NewID(), start: p.opts.Now()}
	if c.Agent != "" && Unnamed(c.Agent, s.c.Session) {
		// (A resume that names no agent takes its session from the approval.)
		s.c.Session = DefaultSession(c.Agent)
		s.unnamed = c.Resume == ""
	}
	o := p.execute(ctx, s)
	if o.Session == "" {
		o.Session = s.c.Session
	}
	p.emit(Event{Kind: EventCallFinished, Agent: c.Agent, Session: o.Session, Tool: c.Tool,
		ApprovalID: o.ApprovalID, Status: string(o.Status), Message: "call " + o.CallID})
	return o
}

func (p *Pipeline) execute(ctx context.Context, s *state) Outcome {
	c := s.c
	if c.Resume != "" {
		return p.resume(ctx, s)
	}
	if o, done := p.admit(ctx, s); done {
		return o
	}
	if s.level == armory.PermConfirm || s.level == armory.PermAlwaysConfirm {
		if id := p.openApprovalFor(ctx, s); id != "" {
			// Called again while its approval is open (or approved and not
			// yet run): the same call, not a second request.
			s.c.Resume = id
			return p.resume(ctx, s)
		}
		return p.requestApproval(ctx, s)
	}
	return p.run(ctx, s, "")
}

// admit runs every stage before the permission decision. done means the
// call was refused and o says why (already audited).
func (p *Pipeline) admit(ctx context.Context, s *state) (o Outcome, done bool) {
	for _, st := range []func(context.Context, *state) *refusal{p.lookup, p.validate, p.caps, p.screen, p.patterns, p.permission} {
		if r := st(ctx, s); r != nil {
			return p.refuse(ctx, s, r), true
		}
	}
	return Outcome{}, false
}

// refusal is why a stage stopped a call.
type refusal struct {
	status audit.Status
	kind   armory.Kind
	text   string // for the model: what stopped the call and what to do next
	human  string // for a human: what they can do (Outcome.Human)
}

func refuse(status audit.Status, kind armory.Kind, format string, args ...any) *refusal {
	return &refusal{status: status, kind: kind, text: fmt.Sprintf(format, args...)}
}

// refuse audits a refused call (one finish entry) and returns its outcome.
func (p *Pipeline) refuse(ctx context.Context, s *state, r *refusal) Outcome {
	o := Outcome{CallID: s.id, Status: r.status, Result: r.text, Human: r.human, Kind: r.kind, Stages: s.stages, Reasons: reasonsOf(s.stages)}
	if s.hasLvl {
		o.Permission = s.level.String()
	}
	if s.approval != nil {
		o.ApprovalID, o.DecidedBy = s.approval.ID, s.approval.DecidedBy
	}
	rec := p.record(s, audit.PhaseFinish, r.status, r.text)
	if err := p.appendAudit(ctx, rec); err != nil {
		o.Reasons = append(o.Reasons, "audit entry could not be written: "+err.Error())
	}
	return o
}

func reasonsOf(stages []audit.Stage) []string {
	n := 0
	for _, st := range stages {
		n += len(st.Reasons)
	}
	out := make([]string, 0, n)
	for _, st := range stages {
		for _, r := range st.Reasons {
			out = append(out, st.Name+": "+r)
		}
	}
	return out
}

// run writes the start entry, runs the tool, writes the finish entry and
// returns the outcome once that entry is durable.
//
// A call whose tool cannot change anything (effectFree) and that streams
// nothing is admitted after it ran instead: every stage has passed (the caps
// stage computed its admission), the tool runs, and its admission, start and
// finish entries commit in one transaction (store.AdmitRequest.Finish), where
// the store decides the caps and loop detection as for any admission. If the admission is refused then
// (a concurrent call took the last unit of a cap), the result is discarded
// and the call is refused exactly as it would have been before running; the
// trail holds only what an admission before the run would have left.
func (p *Pipeline) run(ctx context.Context, s *state, decidedBy string) Outcome {
	startRec := p.record(s, audit.PhaseStart, audit.StatusRunning, "")
	eligible := s.admit != nil && effectFree(s.man) && s.c.Progress == nil && p.shipped(s)
	capped := eligible && p.capped.has(s.c.Session)
	late := eligible && !capped
	if !late {
		if s.admit != nil {
			s.admit.NoSync = effectFree(s.man)
		}
		r, err := p.admitStart(ctx, s, startRec)
		if r != nil {
			return p.refuse(ctx, s, r)
		}
		if capped && err == nil {
			p.capped.set(s.c.Session, false)
		}
		// Fail open only past the audit: a call whose caps could not be taken
		// (its admission failed) does not run.
		if err != nil && (!p.opts.AuditFailOpen || s.admit != nil) {
			return p.auditFailed(s, err)
		}
	}
	tctx, meter, progress := p.meter(ctx, s)
	inv := armory.Invocation{Args: s.c.Args, Agent: s.ag.Env, Channel: s.c.Channel, Progress: progress}
	began := p.opts.Now()
	res := safeExecute(tctx, s.tool, inv)
	status := audit.StatusSuccess
	stopped := meter.done()
	switch {
	case stopped != "":
		status = audit.StatusBlocked
		s.stage("caps", "block", stopped)
		res = armory.Result{Kind: armory.KindBlocked, Text: stopped + ". Finish your current step cleanly and report back; a human can extend or reset session " + s.c.Session + ", or give you a new session.\n" + res.Text}
	case res.Success:
	case res.Kind == armory.KindTimeout || errors.Is(ctx.Err(), context.DeadlineExceeded):
		status = audit.StatusTimeout
		res.Kind = armory.KindTimeout
	default:
		status = audit.StatusError
	}
	s.stage("run", string(status), fmt.Sprintf("ran in %s", p.opts.Now().Sub(began).Round(time.Microsecond)))
	o := Outcome{CallID: s.id, Status: status, Result: res.Text, Value: res.Value, Artifacts: res.Artifacts, Kind: res.Kind,
		Stages: s.stages, Reasons: reasonsOf(s.stages), Permission: s.level.String(), DecidedBy: decidedBy}
	if s.approval != nil {
		o.ApprovalID = s.approval.ID
	}
	if stopped != "" {
		o.Human = p.capHuman(s, world.LimitStreamEvents)
	}
	fin := p.record(s, audit.PhaseFinish, status, res.Text)
	fin.DecidedBy = decidedBy
	if late {
		// Admission, start and finish in one durable commit, even when the
		// caller has gone away (the tool has run; the trail says so).
		r, err := p.admitRun(context.WithoutCancel(ctx), s, startRec, fin)
		if r != nil {
			p.capped.set(s.c.Session, true)
			return p.refuse(ctx, s, r)
		}
		if err != nil {
			return p.auditFailed(s, err)
		}
		return o
	}
	// The finish entry must be durable before the result is returned, even
	// when the caller has gone away.
	if err := p.appendAudit(context.WithoutCancel(ctx), fin); err != nil {
		o.Reasons = append(o.Reasons, "audit: the finish entry could not be written: "+err.Error())
	}
	return o
}

// shipped reports whether the call's tool is one Armory implements (a
// built-in or a pipeline tool), whose manifest its code keeps. A world
// toolbox tool runs a program and a tool registered at run time is someone
// else's code: their manifests are declarations Armory cannot hold them to
// (as an upstream MCP tool's), so even declared effect-free they are
// admitted before they run, and a refused call runs nothing.
func (p *Pipeline) shipped(s *state) bool {
	if s.ag.Registry.RunTime(s.c.Tool) {
		return false
	}
	switch p.h.Source(s.ag, s.c.Tool) {
	case roster.SourceBuiltin, roster.SourcePipeline:
		return true
	}
	return false
}

// auditFailed is the outcome of a call whose admission could not be
// committed: it did not run, or (an effect-free call admitted after it ran)
// its result is not returned.
func (p *Pipeline) auditFailed(s *state, err error) Outcome {
	s.stage("audit", "block", "the audit entry could not be written, so the call did not run: "+err.Error())
	return Outcome{CallID: s.id, Status: audit.StatusError, Kind: armory.KindUnavailable, Stages: s.stages, Reasons: reasonsOf(s.stages),
		Result: "The call did not run: its audit entry could not be written. Try again later."}
}

// safeExecute turns a panicking tool into a failed result.
func safeExecute(ctx context.Context, t armory.Tool, inv armory.Invocation) (res armory.Result) {
	defer func() {
		if r := recover(); r != nil {
			res = armory.Failf(armory.KindInternal, "the tool failed unexpectedly (%v); this is a bug in the tool", r)
		}
	}()
	return t.Execute(ctx, inv)
}

// record builds an audit record for the call in its current state.
func (p *Pipeline) record(s *state, phase audit.Phase, status audit.Status, result string) *audit.Record {
	rec := &audit.Record{
		ID: s.id, Time: p.opts.Now(), Phase: phase, Agent: s.c.Agent, Session: s.c.Session, Task: s.c.Task,
		Tool: s.c.Tool, Args: s.redactedArgs(), Stages: cloneStages(s.stages), Status: status,
		Result: audit.Summary(result), Justification: audit.RedactText(s.c.Justification),
	}
	if s.hasLvl {
		rec.Permission = s.level.String()
	}
	if s.approval != nil {
		rec.ApprovalID = s.approval.ID
		rec.DecidedBy = s.approval.DecidedBy
	}
	if phase == audit.PhaseFinish {
		rec.DurationMS = p.opts.Now().Sub(s.start).Milliseconds()
	}
	return rec
}

func cloneStages(st []audit.Stage) []audit.Stage {
	out := make([]audit.Stage, len(st))
	copy(out, st)
	return out
}

// appendAudit writes rec to the store, the one durable trail; the JSONL
// trail is a copy made after the commit (AfterAudit), never on the call's
// path.
func (p *Pipeline) appendAudit(ctx context.Context, rec *audit.Record) error {
	err := p.st.AppendAudit(ctx, rec)
	if err == nil && p.opts.AfterAudit != nil {
		p.opts.AfterAudit(rec)
	}
	return err
}
