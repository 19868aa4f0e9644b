package armory

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidToolName(t *testing.T) {
	for name, want := range map[string]bool{
		"workspace.read": true, "syscall.task.create": true, "devtools.repo-git": true, "tool.google_search": true, "think": true,
		"": false, "Workspace.read": false, "a..b": false, ".a": false, "a.": false, "a.-b": false, "a._b": false,
		"a b": false, "a/b": false, "a.b\x00": false, strings.Repeat("a", 129): false, strings.Repeat("a", 128): true,
	} {
		if got := ValidToolName(name); got != want {
			t.Errorf("ValidToolName(%q) = %v, want %v", name, got, want)
		}
	}
	if !ValidAgentID("architect-2") || ValidAgentID("a.b") || ValidAgentID("-a") || ValidAgentID(strings.Repeat("a", 65)) {
		t.Error("ValidAgentID")
	}
}

func TestInFamily(t *testing.T) {
	for _, tc := range []struct {
		name, family string
		want         bool
	}{
		{"channel", "channel", true}, {"channel.send", "channel", true}, {"channel.a.b", "channel.a", true},
		{"channelx.send", "channel", false}, {"channel_send", "channel", false}, {"chan", "channel", false}, {"channel", "channel.send", false},
	} {
		if got := InFamily(tc.name, tc.family); got != tc.want {
			t.Errorf("InFamily(%q, %q) = %v", tc.name, tc.family, got)
		}
	}
}

func TestParsers(t *testing.T) {
	for _, s := range []string{"safe", "cautious", "dangerous", "critical"} {
		d, err := ParseDanger(s)
		if err != nil || d.String() != s {
			t.Errorf("ParseDanger(%q) = %v, %v", s, d, err)
		}
	}
	if d, _ := ParseDanger(" Caution "); d != DangerCautious {
		t.Error("aliases and case")
	}
	for _, s := range []string{"auto", "confirm", "always_confirm", "deny"} {
		p, err := ParsePermission(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePermission(%q) = %v, %v", s, p, err)
		}
	}
	if !(PermAuto < PermConfirm && PermConfirm < PermAlwaysConfirm && PermAlwaysConfirm < PermDeny) {
		t.Error("permission order is the order of strictness")
	}
	for _, bad := range []func() error{
		func() error { _, err := ParseDanger("spicy"); return err },
		func() error { _, err := ParsePermission("maybe"); return err },
		func() error { _, err := ParseCapability("telepathy"); return err },
		func() error { _, err := ParseCategory("misc"); return err },
	} {
		if err := bad(); err == nil || !strings.Contains(err.Error(), "want one of") {
			t.Errorf("unknown value: %v", err)
		}
	}
	var m struct {
		D Danger
		P Permission
	}
	if err := json.Unmarshal([]byte(`{"D":"critical","P":"always_confirm"}`), &m); err != nil || m.D != DangerCritical || m.P != PermAlwaysConfirm {
		t.Errorf("text unmarshal: %+v %v", m, err)
	}
}

// MCP annotations are derived from the manifest, never declared apart.
func TestAnnotations(t *testing.T) {
	tests := []struct {
		m    Manifest
		want Annotations
	}{
		{Manifest{Category: CatFileRead, Capabilities: []Capability{CapReadFS}}, Annotations{ReadOnly: true, Idempotent: true}},
		{Manifest{Category: CatFileWrite, Danger: DangerDangerous, Capabilities: []Capability{CapWriteFS}}, Annotations{Destructive: true}},
		{Manifest{Category: CatFileDelete, Danger: DangerCautious, Capabilities: []Capability{CapWriteFS}}, Annotations{Destructive: true}},
		{Manifest{Category: CatWeb, Capabilities: []Capability{CapNetwork}}, Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}},
		{Manifest{Category: CatTerminal, Danger: DangerDangerous, Capabilities: []Capability{CapProcessExec}}, Annotations{Destructive: true}},
		{Manifest{Category: CatMCP}, Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}},
		{Manifest{Category: CatGit, Danger: DangerCautious}, Annotations{}},
	}
	for _, tc := range tests {
		if got := tc.m.Annotations(); got != tc.want {
			t.Errorf("%+v: annotations %+v, want %+v", tc.m, got, tc.want)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	base := E("registry.Lookup", KindNotFound, "Unknown tool: x")
	wrapped := fmt.Errorf("while calling: %w", base)
	if KindOf(wrapped) != KindNotFound || Message(base) != "Unknown tool: x" || base.Error() != "registry.Lookup: Unknown tool: x" {
		t.Errorf("kind %v message %q error %q", KindOf(wrapped), Message(base), base.Error())
	}
	outer := E("guard", KindOther, "", base)
	if KindOf(outer) != KindNotFound {
		t.Error("an unset kind defers to the cause")
	}
	if KindOf(errors.New("plain")) != KindInternal || KindOf(nil) != KindOther {
		t.Error("plain errors are internal")
	}
	cause := E("store", KindUnavailable, "cannot open", errors.New("disk full"))
	if Message(cause) != "cannot open: disk full" {
		t.Errorf("Message = %q", Message(cause))
	}
	// Kinds lists every kind once, each with its own name (the surfaces'
	// tables are tested against it).
	names := map[string]bool{}
	for i, k := range Kinds() {
		var back Kind
		b, _ := k.MarshalText()
		if back.UnmarshalText(b); back != k || int(k) != i || names[k.String()] {
			t.Errorf("%s does not round-trip as text, or is listed twice", k)
		}
		names[k.String()] = true
	}
	if last := Kinds()[len(Kinds())-1]; last != KindTooLarge || (last+1).String() != "other" {
		t.Errorf("Kinds ends at %s", last)
	}
}

func TestResults(t *testing.T) {
	r := FailErr(E("x", KindTimeout, "too slow"))
	if r.Success || r.Kind != KindTimeout || r.Text != "too slow" {
		t.Errorf("FailErr = %+v", r)
	}
	if r := Failf(KindInvalid, "bad %s", "path"); r.Success || r.Text != "bad path" {
		t.Errorf("Failf = %+v", r)
	}
	var got []string
	Invocation{Progress: func(m string) { got = append(got, m) }}.Report("step %d", 1)
	Invocation{}.Report("nobody listens")
	if len(got) != 1 || got[0] != "step 1" {
		t.Errorf("Report = %v", got)
	}
}
