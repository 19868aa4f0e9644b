package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/access"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/screen"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// MaxArgsBytes bounds a call's JSON arguments.
const MaxArgsBytes = 1 << 20

// MaxSessionBytes bounds a session name, however it came (MCP session,
// X-Armory-Session, _meta, the REST session field, --session).
const MaxSessionBytes = 256

// recordableSession is a refused session name as its audit record keeps
// it: valid UTF-8 without control characters (each replaced by U+FFFD),
// cut to MaxSessionBytes.
func recordableSession(name string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(name, "\uFFFD"))
	return audit.Cut(name, MaxSessionBytes)
}

// lookup: the agent exists and its registry holds the tool.
func (p *Pipeline) lookup(ctx context.Context, s *state) *refusal {
	if n := len(s.c.Session); n > MaxSessionBytes || !utf8.ValidString(s.c.Session) {
		// Recorded cut (the audit record must not carry what the limit
		// refuses), refused before it reaches counters or approvals.
		s.c.Session = recordableSession(s.c.Session)
		msg := fmt.Sprintf("the session name is %d bytes; the limit is %d bytes of UTF-8", n, MaxSessionBytes)
		s.stage("lookup", "error", msg)
		return refuse(audit.StatusError, armory.KindInvalid, "Invalid session: %s. Use a shorter session name.", msg)
	}
	if i := strings.IndexFunc(s.c.Session, unicode.IsControl); i >= 0 {
		// A control character (an escape sequence) would reach terminals
		// that show the session (armory audit, session show) as it is.
		r, _ := utf8.DecodeRuneInString(s.c.Session[i:])
		s.c.Session = recordableSession(s.c.Session)
		msg := fmt.Sprintf("the session name holds the control character U+%04X", r)
		s.stage("lookup", "error", msg)
		return refuse(audit.StatusError, armory.KindInvalid, "Invalid session: %s. Use letters, digits and punctuation.", msg)
	}
	if r := checkChannelName(s); r != nil {
		return r
	}
	ag, err := p.h.Agent(s.c.Agent)
	if err != nil {
		s.stage("lookup", "error", armory.Message(err))
		return refuse(audit.StatusError, armory.KindNotFound, "%s", armory.Message(err))
	}
	s.ag = ag
	if r := p.gate(ctx, s); r != nil {
		return r
	}
	t, real, err := ag.Registry.Find(s.c.Tool)
	if err != nil {
		s.stage("lookup", "error", armory.Message(err))
		return refuse(audit.StatusError, armory.KindNotFound, "Unknown tool: %s. Use one of the tools listed in your <tools> briefing.", s.c.Tool)
	}
	why := []string{"found in the agent's registry"}
	if real != s.c.Tool {
		// The name a provider rendering gave the tool (devtools__word-count):
		// the call, its audit record and any approval carry the real name.
		why = append(why, fmt.Sprintf("%q is the provider name of %s", s.c.Tool, real))
		s.c.Tool = real
	}
	if pt, ok := t.(*roster.PipelineTool); ok {
		impl := p.pipeTools[pt.Spec().Name]
		if impl == nil {
			s.stage("lookup", "error", "no implementation of pipeline tool "+pt.Spec().Name)
			return refuse(audit.StatusError, armory.KindUnavailable, "%s is not available in this pipeline.", pt.Spec().Name)
		}
		t = impl
	}
	s.tool, s.man = t, t.Manifest()
	if s.man.NeedsChannel && s.c.Channel == "" {
		msg := fmt.Sprintf("%s is registered only for a call that names its conversation (a channel context), and this call names none", s.c.Tool)
		s.stage("lookup", "error", msg)
		return refuse(audit.StatusError, armory.KindNotFound, "%s: %s. A REST caller names it with the %s header or the \"channel\" field, an MCP client with that header or _meta %q; or use another tool.",
			s.c.Tool, "registered only for a call that names its conversation: this call names none", ChannelHeader, MetaChannel)
	}
	s.stage("lookup", "ok", why...)
	return p.channel(ctx, s)
}

type compiledSchema struct {
	rs  *jsonschema.Resolved
	err error
	// ownJustification: the tool declares a "justification" property itself
	// (registry.JustificationProperty), so the argument is the tool's.
	ownJustification bool
}

// validate: the arguments are one JSON object that satisfies the tool's
// input schema.
func (p *Pipeline) validate(ctx context.Context, s *state) *refusal {
	fail := func(msg string) *refusal {
		s.stage("validate", "error", msg)
		return refuse(audit.StatusError, armory.KindInvalid, "Invalid arguments for %s: %s. Fix the arguments and call again.", s.c.Tool, msg)
	}
	if len(s.c.Args) > MaxArgsBytes {
		return fail(fmt.Sprintf("arguments are %d bytes; the limit is %d", len(s.c.Args), MaxArgsBytes))
	}
	raw := bytes.TrimSpace(s.c.Args)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	// jsonschema-go validates values as encoding/json decodes them
	// (float64 numbers), so decode that way, once.
	var inst any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&inst); err != nil {
		return fail("arguments are not valid JSON: " + err.Error())
	}
	if dec.More() {
		return fail("arguments must be one JSON object")
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return fail("arguments must be a JSON object")
	}
	cs := p.schema(s.tool)
	if v, has := obj[registry.JustificationProperty]; has && !cs.ownJustification {
		// Armory's own argument (registry.WithJustification): taken out
		// before validation, so the tool never sees it.
		j, isStr := v.(string)
		if !isStr {
			return fail(fmt.Sprintf("%q must be a string", registry.JustificationProperty))
		}
		delete(obj, registry.JustificationProperty)
		if s.c.Justification == "" {
			s.c.Justification = j
		}
		re, err := json.Marshal(obj)
		if err != nil {
			return fail("arguments could not be re-encoded: " + err.Error())
		}
		raw = re
	}
	if n := len(s.c.Justification); n > registry.MaxJustificationBytes {
		return fail(fmt.Sprintf("the justification is %d bytes; the limit is %d", n, registry.MaxJustificationBytes))
	}
	s.c.Args = raw
	s.argsLower = decodedText(inst)
	// Loop detection compares calls by tool and argument values (json.Marshal
	// sorts keys), not by how the arguments were spelled.
	canon, err := json.Marshal(obj)
	if err != nil {
		canon = raw
	}
	sum := sha256.Sum256(append([]byte(s.c.Tool+"\x00"), canon...))
	s.argsSum = int64(binary.BigEndian.Uint64(sum[:8]))
	if cs.err != nil {
		s.stage("validate", "error", "the tool's input schema is invalid: "+cs.err.Error())
		return refuse(audit.StatusError, armory.KindInternal, "The tool %s has an invalid input schema (%v); report this to the world's owner.", s.c.Tool, cs.err)
	}
	if err := cs.rs.Validate(inst); err != nil {
		return fail(strings.TrimPrefix(err.Error(), "validating root: "))
	}
	s.stage("validate", "ok", "arguments match the input schema")
	return nil
}

// schema returns t's compiled input schema. The cache is keyed by the
// tool value itself, not its name: two agents may hold different tools of
// one name (skills of one name in two archetypes), and a tool dropped and
// registered again at run time may have a new schema. A tool whose value
// is not comparable (a struct value holding a slice, map or func, also
// behind an interface field of a comparable type: hashing it would panic)
// is compiled on every call; the cache is bounded (maxSchemas: past it,
// it is emptied and filled again).
func (p *Pipeline) schema(t armory.Tool) *compiledSchema {
	key, cacheable := any(nil), reflect.ValueOf(t).Comparable()
	if cacheable {
		key = t
		if v, ok := p.schemas.Load(key); ok {
			return v.(*compiledSchema)
		}
	}
	cs := &compiledSchema{ownJustification: registry.DeclaresJustification(t.Spec().InputSchema)}
	var sch jsonschema.Schema
	raw := t.Spec().InputSchema
	if len(raw) == 0 {
		raw = armory.EmptyObjectSchema
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		cs.err = err
	} else {
		cs.rs, cs.err = sch.Resolve(nil)
	}
	if !cacheable {
		return cs
	}
	if p.nSchemas.Add(1) > maxSchemas {
		p.schemas.Clear()
		p.nSchemas.Store(1)
	}
	v, _ := p.schemas.LoadOrStore(key, cs)
	return v.(*compiledSchema)
}

// maxSchemas bounds the compiled schemas the pipeline keeps.
const maxSchemas = 8192

// Default session caps (Agenthood): default and maximum. A maximum of 0
// means none (a world or agent may set any value).
var capDefaults = map[string][2]int64{
	world.LimitStreamEvents:     {2000, 10000},
	world.LimitToolInvocations:  {400, 2000},
	world.LimitSessionRuntime:   {600, 3600}, // seconds
	world.LimitEditsPerFile:     {8, 0},
	world.LimitTerminalCommands: {10, 0},
	world.LimitWebSearches:      {8, 0},
}

// Limit returns the cap for name that applies to agent: the agent's value,
// else the world's, else the default, clamped to the maximum.
func (p *Pipeline) Limit(ag *roster.Agent, name string) int64 {
	d := capDefaults[name]
	v := d[0]
	if l, ok := p.h.World.Policy.Limits[name]; ok {
		v = l.Value
	}
	if ag != nil && ag.Def.Config != nil {
		if l, ok := ag.Def.Config.Policy.Limits[name]; ok {
			v = l.Value
		}
	}
	if d[1] > 0 && v > d[1] {
		v = d[1]
	}
	return v
}

// MaxLimit returns the hard maximum of cap name (0: none).
func MaxLimit(name string) int64 { return capDefaults[name][1] }

// caps: loop detection, and the session caps this call needs (runtime,
// invocations, stream events, terminal commands, web searches, edits per
// file). Loop detection happens here; the caps are only computed: the
// counters are taken by store.Admit together with the call's start record
// (in run, or requestApproval for a call that waits for approval), so that
// taking them costs no transaction of its own and a call's counters and its
// start record commit together or not at all.
func (p *Pipeline) caps(ctx context.Context, s *state) *refusal {
	if s.unnamed {
		name, err := p.resolveUnnamed(ctx, s.c.Agent)
		if err != nil {
			return p.storeFailure(s, "caps", err)
		}
		s.c.Session = name
	}
	sess := s.c.Session
	// Loop detection before anything is counted, so a refused retry costs nothing.
	editPath := ""
	if s.man.Category == armory.CatFileWrite {
		editPath = argPath(s.c.Args)
	}
	if editPath != "" && s.c.Justification == "" {
		counters, err := p.st.Counters(ctx, sess)
		if err != nil {
			return p.storeFailure(s, "caps", err)
		}
		if n := counters["edits:"+editPath]; n >= 3 {
			msg := fmt.Sprintf("Loop detected: %q edited %d times in this session. Justify continued editing or stop.", editPath, n)
			s.stage("caps", "block", msg)
			return refuse(audit.StatusBlocked, armory.KindBlocked, "%s %s", msg, justifyHint)
		}
	}
	req := &store.AdmitRequest{Session: sess, MaxRuntime: time.Duration(p.Limit(s.ag, world.LimitSessionRuntime)) * time.Second,
		Acquire: make([]store.Acquisition, 0, 5)}
	if s.unnamed {
		req.MaxRuntime = 0 // an unnamed session ends by idling instead
	}
	add := func(name string) {
		req.Acquire = append(req.Acquire, store.Acquisition{Counter: name, N: 1, Max: p.Limit(s.ag, name)})
	}
	// Repetition (the same tool with identical arguments, RepeatLimit times
	// in a row) is decided by store.Admit, with the session's counters, so
	// that it is exact across processes and replicas.
	req.Repeat = &store.Repeat{Sum: s.argsSum, Max: RepeatLimit, Justified: s.c.Justification != ""}
	add(world.LimitToolInvocations)
	add(world.LimitStreamEvents)
	if s.man.Category == armory.CatTerminal {
		add(world.LimitTerminalCommands)
	}
	if isWebSearch(s.c.Tool) {
		add(world.LimitWebSearches)
	}
	if editPath != "" {
		req.Acquire = append(req.Acquire, store.Acquisition{Counter: "edits:" + editPath, N: 1, Max: p.Limit(s.ag, world.LimitEditsPerFile)})
	}
	s.admit = req
	why := "within the session's caps"
	if s.c.Justification != "" {
		why += "; justification given: " + audit.RedactText(s.c.Justification)
	}
	s.capsStage = len(s.stages)
	s.stage("caps", "ok", why)
	return nil
}

// effectFree reports whether a tool's manifest says it cannot change
// anything: danger at most cautious, no capability but read_fs and
// read_state, and none of the categories that write, delete, run commands,
// use git, reach the web or an upstream MCP server (whose manifest Armory
// cannot hold it to). Such a call of a tool Armory implements (shipped)
// that streams nothing runs before it is admitted and commits its admission, start and finish records in one
// transaction (store.AdmitRequest.Finish), its result thrown away if the
// admission is refused; one that is admitted first (a streaming call, a
// session just refused) has its start record committed without an fsync of
// its own (store.AdmitRequest.NoSync): until its finish record, which is
// durable and makes it durable too, only a power loss or an OS crash can
// lose it, and then nothing was changed that it would explain.
func effectFree(m armory.Manifest) bool {
	if m.Danger > armory.DangerCautious {
		return false
	}
	switch m.Category {
	case armory.CatFileWrite, armory.CatFileDelete, armory.CatTerminal, armory.CatGit, armory.CatWeb, armory.CatMCP:
		return false
	}
	for _, c := range m.Capabilities {
		if c != armory.CapReadFS && c != armory.CapReadState {
			return false
		}
	}
	return true
}

// capName is the name of the cap a counter counts, as a refusal shows it.
func capName(counter string) string {
	if path, ok := strings.CutPrefix(counter, "edits:"); ok {
		return world.LimitEditsPerFile + " for " + path
	}
	return counter
}

// admitStart writes rec, the call's start record, together with taking the
// session caps the caps stage computed (store.Admit). A call without a pending admission (a resumed call, whose
// caps were taken when it asked for approval) only appends rec. It returns
// a refusal when a cap is reached (the caps stage then says so, as if it had
// refused the call itself), or the store's error.
func (p *Pipeline) admitStart(ctx context.Context, s *state, rec *audit.Record) (*refusal, error) {
	if s.admit == nil {
		return nil, p.appendAudit(ctx, rec)
	}
	return p.admitRun(ctx, s, rec, nil)
}

// admitRun takes the session caps the caps stage computed with the call's
// start record rec and, when fin is not nil, its finish record in the same
// commit (an effect-free call admitted after it ran). It returns a refusal
// when a cap is reached, as admitStart does, or the store's error.
func (p *Pipeline) admitRun(ctx context.Context, s *state, rec, fin *audit.Record) (*refusal, error) {
	req := s.admit
	req.Record, req.Finish = rec, fin
	res, err := p.st.Admit(ctx, req)
	req.Record, req.Finish = nil, nil
	if err != nil {
		return nil, err
	}
	if !res.Admitted {
		// The same refusal as a caps stage that found the limit reached:
		// the stages after caps did not let the call through after all.
		s.stages = s.stages[:s.capsStage]
		s.approval = nil
		h := res.Hit
		if h.Counter == store.RepetitionCounter {
			return p.loopDetected(s, h.Current), nil
		}
		return p.limitReached(ctx, s, capName(h.Counter), h.Current, h.Max), nil
	}
	s.admit = nil
	if s.unnamed {
		p.touchUnnamed(s.c.Agent, s.c.Session)
	}
	if p.opts.AfterAudit != nil {
		p.opts.AfterAudit(rec)
		if fin != nil {
			p.opts.AfterAudit(fin)
		}
	}
	return nil, nil
}

func isWebSearch(tool string) bool {
	return tool == "web.search" || armory.InFamily(tool, "search") || strings.HasSuffix(tool, "_search") || strings.HasSuffix(tool, ".search") && !strings.HasPrefix(tool, "workspace.")
}

// argPath returns the cleaned "path" argument of a file tool, if any.
func argPath(args json.RawMessage) string {
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return ""
	}
	p := strings.TrimPrefix(a.Path, "@me/")
	return path.Clean("/" + p)[1:]
}

// justifyHint tells a refused model how to continue past loop detection:
// the "justification" argument is in every tool's rendered input schema.
const justifyHint = `To continue anyway, call again with the same arguments plus a "justification" argument (a string: why repeating is right; it is audited). Otherwise change your approach.`

// RepeatLimit is the run of identical calls (same tool, same arguments, in a
// row, in one session) that loop detection refuses: the fifth.
const RepeatLimit = 5

// loopDetected is the refusal of a call that would repeat the session's
// last call for the n+1-th time in a row.
func (p *Pipeline) loopDetected(s *state, n int64) *refusal {
	msg := fmt.Sprintf("Loop detected: %s called %d times in a row with identical arguments.", s.c.Tool, n+1)
	s.stage("caps", "block", msg)
	return refuse(audit.StatusBlocked, armory.KindBlocked, "%s %s", msg, justifyHint)
}

func (p *Pipeline) limitReached(ctx context.Context, s *state, name string, cur, max int64) *refusal {
	msg := fmt.Sprintf("Safety limit reached: %s (%d/%d)", name, cur, max)
	s.stage("caps", "block", msg)
	budget := p.remaining(ctx, s)
	p.emit(Event{Kind: EventLimitReached, Agent: s.c.Agent, Session: s.c.Session, Tool: s.c.Tool, Message: msg})
	r := refuse(audit.StatusBlocked, armory.KindBlocked,
		"%s. Remaining budget: %s. You cannot raise this limit yourself: finish your current step cleanly, do not retry this call, and report back what you did and what is left. %s",
		msg, budget, p.capAdvice(s))
	r.human = p.capHuman(s, strings.Fields(name)[0])
	return r
}

// capAdvice tells the model what will change a cap refusal.
func (p *Pipeline) capAdvice(s *state) string {
	if s.unnamed {
		return fmt.Sprintf("This is your unnamed session %s: after %s without calls the next call opens a new session, or a human can extend or reset this one.", s.c.Session, p.IdleTimeout())
	}
	return fmt.Sprintf("A human can extend or reset session %s, or you can be given a new session.", s.c.Session)
}

// capHuman is what a human can do about a cap refusal.
func (p *Pipeline) capHuman(s *state, limit string) string {
	t := fmt.Sprintf("Raise the limit: armory session extend %s %s N. Start the session over: armory session reset %s. Or give the agent a new session (armory call --session NAME, REST \"session\", the %s header or MCP _meta session).",
		s.c.Session, limit, s.c.Session, "X-Armory-Session")
	if s.unnamed {
		t += fmt.Sprintf(" Unnamed calls open a new session by themselves after %s idle.", p.IdleTimeout())
	}
	return t
}

// remaining describes what is left of each cap in the session.
func (p *Pipeline) remaining(ctx context.Context, s *state) string {
	counters, err := p.st.Counters(ctx, s.c.Session)
	if err != nil {
		return "unknown"
	}
	overrides, _ := p.st.LimitOverrides(ctx, s.c.Session)
	var parts []string
	for _, name := range []string{world.LimitToolInvocations, world.LimitStreamEvents, world.LimitTerminalCommands, world.LimitWebSearches} {
		max := p.Limit(s.ag, name)
		if v, ok := overrides[name]; ok {
			max = v
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d left", name, max-counters[name], max))
	}
	if started, err := p.st.SessionStart(ctx, s.c.Session); err == nil && !s.unnamed { // unnamed: no runtime cap
		max := time.Duration(p.Limit(s.ag, world.LimitSessionRuntime)) * time.Second
		if v, ok := overrides[world.LimitSessionRuntime]; ok {
			max = time.Duration(v) * time.Second
		}
		left := max - p.opts.Now().Sub(started)
		if left < 0 {
			left = 0
		}
		parts = append(parts, fmt.Sprintf("session_runtime %s left", left.Round(time.Second)))
	}
	return strings.Join(parts, ", ")
}

func (p *Pipeline) storeFailure(s *state, stage string, err error) *refusal {
	s.stage(stage, "error", "store: "+err.Error())
	return refuse(audit.StatusError, armory.KindUnavailable, "The call did not run: Armory could not check its safety caps (%v). Try again later.", err)
}

// screen: terminal commands are parsed and classified (package screen).
func (p *Pipeline) screen(ctx context.Context, s *state) *refusal {
	if s.man.Category != armory.CatTerminal {
		return nil
	}
	var a struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(s.c.Args, &a) != nil || a.Command == nil {
		s.stage("screen", "confirm", "a terminal tool without a command argument: not known safe")
		s.terminal = access.TerminalDangerous
		return nil
	}
	r := screen.Check(*a.Command)
	switch r.Verdict {
	case screen.Block:
		s.stage("screen", "block", r.Reasons...)
		return refuse(audit.StatusBlocked, armory.KindBlocked, "%s\nThis command is refused in every profile and cannot be approved. Do something else.", r.Message(*a.Command))
	case screen.Confirm:
		s.terminal = access.TerminalDangerous
		s.stage("screen", "confirm", append([]string{"not known to be safe"}, r.Reasons...)...)
	default:
		s.terminal = access.TerminalSafe
		s.stage("screen", "allow", "every command is known safe and read-only")
	}
	return nil
}

// patterns: veto patterns block; bias patterns raise the level.
func (p *Pipeline) patterns(ctx context.Context, s *state) *refusal {
	pats := p.h.World.Policy.Patterns
	if len(pats) == 0 {
		return nil
	}
	var reasons []string
	for _, wp := range pats {
		ap := access.Pattern{Name: wp.Name, Veto: wp.Kind == world.PatternVeto, Capabilities: wp.Capabilities, DangerAtLeast: wp.DangerAtLeast, Triggers: wp.Triggers, Explanation: wp.Explanation}
		ok, why := ap.Match(s.man, s.argsLower)
		if !ok {
			continue
		}
		if ap.Veto {
			msg := fmt.Sprintf("VETOED by pattern '%s': %s", ap.Name, ap.Explanation)
			s.stage("patterns", "veto", msg+" ("+why+")")
			return refuse(audit.StatusBlocked, armory.KindBlocked, "%s", msg)
		}
		s.bias = append(s.bias, ap.Name)
		reasons = append(reasons, fmt.Sprintf("bias pattern %q matched (%s): %s", ap.Name, why, ap.Explanation))
	}
	if len(reasons) > 0 {
		s.stage("patterns", "bias", reasons...)
	} else {
		s.stage("patterns", "ok", "no veto or bias pattern matched")
	}
	return nil
}

// permission: the effective level decides; deny refuses.
func (p *Pipeline) permission(ctx context.Context, s *state) *refusal {
	in := p.h.LevelInput(s.ag, s.c.Tool, s.man)
	in.Terminal, in.Bias = s.terminal, s.bias
	lvl, reasons := access.EffectiveLevel(in)
	s.level, s.hasLvl = lvl, true
	s.stage("permission", lvl.String(), reasons...)
	if lvl == armory.PermDeny {
		// The audit record and the outcome's reasons name the deciding
		// rule's file and line; the model's text does not (config.md is
		// never sent to a model).
		_, plain := access.EffectiveLevel(in.WithoutSources())
		return refuse(audit.StatusDenied, armory.KindDenied, "Denied: %s may not be used by this agent (%s). Do not retry; if the task needs it, say so to a human.", s.c.Tool, strings.Join(plain, "; "))
	}
	return nil
}

// decodedText is every key and value of decoded JSON arguments, as text,
// lower-cased, one per line. Patterns match trigger words against it rather
// than against the raw JSON, so that escapes ("\u0070roduction") cannot
// hide a word. Depth is bounded by the size limit of the arguments.
func decodedText(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				b.WriteString(k)
				b.WriteByte('\n')
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
		case nil:
		default:
			fmt.Fprintf(&b, "%v\n", x)
		}
	}
	walk(v)
	return strings.ToLower(b.String())
}
