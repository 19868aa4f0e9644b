package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/store"
)

// A human raises a cap only to a known limit, between 1 and its maximum;
// a refused raise changes nothing and leaves no record of a change.
func TestExtendSessionChecked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    int64
		want string // "" for ok
	}{
		{"tool_invocations", 900, ""},
		{"tool_invocations", MaxLimit("tool_invocations") + 1, "can be raised to at most"},
		{"tool_invocations", 0, "at least 1"},
		{"tool_invocatons", 5, "unknown limit"},
	} {
		err := f.p.ExtendSession(ctx, "dev:s", tc.name, tc.n, ViaCLI)
		if tc.want == "" && err != nil || tc.want != "" && (armory.KindOf(err) != armory.KindInvalid || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s=%d: %v, want %q", tc.name, tc.n, err, tc.want)
		}
	}
	o, err := f.st.LimitOverrides(ctx, "dev:s")
	if err != nil || len(o) != 1 || o["tool_invocations"] != 900 {
		t.Fatalf("overrides %v %v", o, err)
	}
	recs, err := f.st.ListAudit(ctx, store.AuditFilter{Tool: "session.extend"})
	if err != nil || len(recs) != 1 || recs[0].Agent != Human || recs[0].Session != "dev:s" {
		t.Fatalf("records %+v %v", recs, err)
	}
}
