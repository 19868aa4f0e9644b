package auditrow

import (
	"encoding/json"
	"testing"

	"github.com/armory-dev/armory/audit"
)

func marshalStages(t testing.TB, st []audit.Stage) string {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEncodeStagesIsJSONMarshal(t *testing.T) {
	for _, st := range [][]audit.Stage{
		{{Name: "lookup", Decision: "allow"}},
		{{Name: "caps", Decision: "allow", Reasons: []string{"tool_invocations 1/400", ""}}, {Name: "screen", Decision: "block", Reasons: []string{`rm -rf "/" <&> \ tab	nl
 bell` + "\x07\x00\x1f\u2028\u2029é😀\xff\xfe"}}},
		{{}},
	} {
		got, err := EncodeStages(st)
		if err != nil || got != marshalStages(t, st) {
			t.Errorf("EncodeStages(%q)\n got %s\nwant %s", st, got, marshalStages(t, st))
		}
		back, err := DecodeStages(got)
		if err != nil || len(back) != len(st) {
			t.Errorf("round trip: %v %v", back, err)
		}
	}
	if s, _ := EncodeStages(nil); s != "" {
		t.Errorf("no stages: %q", s)
	}
}

func FuzzEncodeStages(f *testing.F) {
	f.Add("lookup", "allow", "a reason", "<x>&\"\\")
	f.Add("", "", "\xff\u2028", "\x00")
	f.Fuzz(func(t *testing.T, name, decision, r1, r2 string) {
		st := []audit.Stage{{Name: name, Decision: decision, Reasons: []string{r1, r2}}, {Name: r2, Decision: r1}}
		got, _ := EncodeStages(st)
		if want := marshalStages(t, st); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}
