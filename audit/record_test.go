package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sampleRecord(i int) *Record {
	return &Record{
		ID:      NewID(),
		Time:    time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 3600)).Add(time.Duration(i) * time.Second),
		Phase:   PhaseFinish,
		Agent:   "alice",
		Session: "s1",
		Task:    "t1",
		Tool:    "file.read",
		Args:    json.RawMessage(fmt.Sprintf(`{ "path" : "a<%d>.txt" }`, i)),
		Stages: []Stage{
			{Name: "access", Decision: "allow", Reasons: []string{"group dev"}},
			{Name: "caps", Decision: "allow"},
		},
		Permission:    "auto",
		Status:        StatusSuccess,
		Result:        "42 bytes",
		DurationMS:    int64(i),
		Justification: "needed",
	}
}

func sealChain(n int) []*Record {
	var head Head
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = sampleRecord(i)
		head = recs[i].Seal(head)
	}
	return recs
}

func TestSealLinksAndRoundTrips(t *testing.T) {
	recs := sealChain(3)
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("seq %d, want %d", r.Seq, i+1)
		}
		if i == 0 && r.PrevHash != "" || i > 0 && r.PrevHash != recs[i-1].Hash {
			t.Fatalf("record %d: bad prev hash", i)
		}
		if r.Time.Location() != time.UTC || r.Time.Nanosecond()%1000 != 0 {
			t.Fatalf("time not normalized: %v", r.Time)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := back.ComputeHash(); got != r.Hash {
			t.Fatalf("hash changed across JSON round trip: %s vs %s\n%s", got, r.Hash, b)
		}
	}
	if err := verifySlice(recs, Head{}); err != nil {
		t.Fatal(err)
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string
	}{
		{"empty", "", "null"},
		{"spaces", "  \n", "null"},
		{"compacted", `{ "a" : [1, 2] }`, `{"a":[1,2]}`},
		{"html escaped", `{"q":"<b>&"}`, `{"q":"\u003cb\u003e\u0026"}`},
		{"invalid json kept as string", `{"a":`, `"{\"a\":"`},
		{"invalid utf8 replaced", "{\"a\":\"x\xffy\"}", `{"a":"x` + "\uFFFD" + `y"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Record{Args: json.RawMessage(tc.args)}
			r.Normalize()
			if string(r.Args) != tc.want {
				t.Fatalf("args %q, want %q", r.Args, tc.want)
			}
			again := r.Clone()
			again.Normalize()
			if string(again.Args) != string(r.Args) {
				t.Fatalf("Normalize not idempotent: %q", again.Args)
			}
		})
	}
	r := &Record{Agent: "a\x00b", Result: "x\xffy", Stages: []Stage{{Name: "n\x00", Reasons: []string{"\xfe"}}}}
	orig := r.Stages
	r.Normalize()
	if r.Agent != "a\uFFFDb" || r.Result != "x\uFFFDy" || r.Stages[0].Name != "n\uFFFD" || r.Stages[0].Reasons[0] != "\uFFFD" {
		t.Fatalf("strings not cleaned: %+v", r)
	}
	if orig[0].Name != "n\x00" {
		t.Fatal("Normalize modified the caller's Stages slice")
	}
	if r.Time.IsZero() {
		t.Fatal("zero time not filled")
	}
}

// Clean stages are kept, not copied (the committer normalizes its own copy
// of every record); an empty Reasons still becomes nil, in a copy, and the
// hash is the same either way.
func TestNormalizeKeepsCleanStages(t *testing.T) {
	st := []Stage{{Name: "lookup", Decision: "ok", Reasons: []string{"found"}}, {Name: "caps", Decision: "ok"}}
	r := &Record{Time: time.Unix(1, 0), Args: json.RawMessage(`{"a":1}`), Stages: st}
	r.Normalize()
	if &r.Stages[0] != &st[0] {
		t.Fatal("clean stages were copied")
	}
	bare := &Record{Time: time.Unix(1, 0), Args: r.Args}
	if n, m := testing.AllocsPerRun(100, func() { r.Normalize() }), testing.AllocsPerRun(100, func() { bare.Normalize() }); n != m {
		t.Fatalf("Normalize allocates %v times with clean stages, %v without", n, m)
	}
	empty := []Stage{{Name: "caps", Decision: "ok", Reasons: []string{}}}
	e := &Record{Time: time.Unix(1, 0), Stages: empty}
	e.Normalize()
	if e.Stages[0].Reasons != nil || empty[0].Reasons == nil {
		t.Fatalf("empty reasons: %#v (caller's %#v)", e.Stages[0].Reasons, empty[0].Reasons)
	}
	n := &Record{Time: time.Unix(1, 0), Stages: []Stage{{Name: "caps", Decision: "ok"}}}
	n.Normalize()
	if e.ComputeHash() != n.ComputeHash() {
		t.Fatal("empty and nil reasons hash differently")
	}
}

func TestHashCoversEveryField(t *testing.T) {
	base := sampleRecord(1)
	base.ApprovalID, base.DecidedBy = "ap1", "bob"
	base.Seal(Head{Seq: 4, Hash: "abc"})
	mutations := map[string]func(r *Record){
		"ID":            func(r *Record) { r.ID += "x" },
		"Seq":           func(r *Record) { r.Seq++ },
		"Time":          func(r *Record) { r.Time = r.Time.Add(time.Microsecond) },
		"Phase":         func(r *Record) { r.Phase = PhaseStart },
		"Agent":         func(r *Record) { r.Agent = "mallory" },
		"Session":       func(r *Record) { r.Session = "s2" },
		"Task":          func(r *Record) { r.Task = "t2" },
		"Tool":          func(r *Record) { r.Tool = "file.write" },
		"Args":          func(r *Record) { r.Args = json.RawMessage(`{"path":"b"}`) },
		"StageName":     func(r *Record) { r.Stages[0].Name = "veto" },
		"StageDecision": func(r *Record) { r.Stages[0].Decision = "deny" },
		"StageReason":   func(r *Record) { r.Stages[0].Reasons[0] = "other" },
		"StageAdded":    func(r *Record) { r.Stages = append(r.Stages, Stage{}) },
		"Permission":    func(r *Record) { r.Permission = "confirm" },
		"ApprovalID":    func(r *Record) { r.ApprovalID = "ap2" },
		"DecidedBy":     func(r *Record) { r.DecidedBy = "eve" },
		"Status":        func(r *Record) { r.Status = StatusError },
		"Result":        func(r *Record) { r.Result = "0 bytes" },
		"DurationMS":    func(r *Record) { r.DurationMS++ },
		"Justification": func(r *Record) { r.Justification = "" },
		"PrevHash":      func(r *Record) { r.PrevHash = "abd" },
		// Moving bytes between adjacent fields must change the hash too.
		"FieldBoundary": func(r *Record) { r.Session, r.Task = r.Session+r.Task, "" },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			r := base.Clone()
			mutate(r)
			if r.ComputeHash() == base.Hash {
				t.Fatalf("hash does not cover %s", name)
			}
		})
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !re.MatchString(id) {
			t.Fatalf("bad id %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestCloneIsDeep(t *testing.T) {
	r := sampleRecord(1)
	c := r.Clone()
	c.Args[0] = 'X'
	c.Stages[0].Reasons[0] = "changed"
	if r.Args[0] == 'X' || r.Stages[0].Reasons[0] == "changed" {
		t.Fatal("Clone shares memory")
	}
}

func TestChainErrorFormat(t *testing.T) {
	err := error(&ChainError{Seq: 17, Reason: "hash mismatch"})
	if err.Error() != "audit: chain broken at seq 17: hash mismatch" {
		t.Fatalf("got %q", err)
	}
	if !errors.Is(err, ErrChain) {
		t.Fatal("not ErrChain")
	}
	if !strings.Contains(fmt.Sprintf("%v", fmt.Errorf("wrap: %w", err)), "seq 17") {
		t.Fatal("wrap lost seq")
	}
}

// canonicalJSON says "already canonical" only for what json.Marshal would
// write unchanged, and says it for everything json.Marshal writes.
func TestCanonicalJSON(t *testing.T) {
	inputs := []string{
		`{"a":1}`, `{"a": 1}`, `{"a":"x y"}`, `{"a":"x\ty"}`, `{"a":"<b>"}`, `{"a":"\u003cb\u003e"}`,
		`{"a":"&"}`, "{\"a\":\"\u2028\"}", "{\"a\":\"\u2029\"}", `{"a":"\u2028"}`, `{"a":"q\"uote"}`,
		`{"a":"back\\"}`, `{"a":"back\\", "b":2}`, `{"a":"back\\","b":2}`, `[1,2,3]`, `[1, 2]`, "[\n1]",
		`"str"`, `  "str"`, `"str"  `, `null`, `{"k":{"n":[true,false,null,1.5e3,-0]}}`, `{"a":"é"}`,
		`{"a":"\"}"}`, `{"a":"\\\"","b":"<"}`, `{"a":"\\\\"}`, `{"\u00e9":1}`,
	}
	values := []any{map[string]any{"a": "<&>", "b": []any{1, "x y", "\u2028"}}, "q\"\\", 3.25, []string{"a", "b c"}}
	for _, v := range values {
		b, _ := json.Marshal(v)
		inputs = append(inputs, string(b))
		if !canonicalJSON(b) {
			t.Errorf("json.Marshal output %s not seen as canonical", b)
		}
	}
	for _, in := range inputs {
		if !json.Valid([]byte(in)) {
			t.Fatalf("test input %q is not valid JSON", in)
		}
		m, _ := json.Marshal(json.RawMessage(in))
		if canonicalJSON([]byte(in)) && string(m) != in {
			t.Errorf("%q seen as canonical, but json.Marshal writes %q", in, m)
		}
		if got := normalizeArgs(json.RawMessage(in)); string(got) != string(m) {
			t.Errorf("normalizeArgs(%q) = %q, want %q", in, got, m)
		}
	}
}

// FuzzCanonicalJSON: whatever valid JSON canonicalJSON accepts, json.Marshal
// writes unchanged.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"x\\"}`, `["<",{"b":" "}]`, `"\u2028"`, "{\"a\":\"\u2029\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) || !canonicalJSON([]byte(in)) {
			return
		}
		if m, _ := json.Marshal(json.RawMessage(in)); string(m) != in {
			t.Fatalf("%q seen as canonical, but json.Marshal writes %q", in, m)
		}
	})
}
