package access

import (
	"strings"
	"testing"

	"github.com/armory-dev/armory"
)

// A manifest's MinPermission is a floor under every source of the level
// — the agent's rule, its profile, the world's rule, the manifest's
// default — raised with the reason; a level above the floor stays, and
// terminal screening and bias patterns raise from the floor on.
func TestMinPermissionFloor(t *testing.T) {
	const tool = "syscall.skill.install"
	floor := armory.Manifest{Category: armory.CatSystem, Permission: armory.PermConfirm, MinPermission: armory.PermConfirm}
	auto := func(lvl armory.Permission) []Rule { return []Rule{{Tool: tool, Level: lvl, Src: "x:1"}} }
	for _, tc := range []struct {
		name string
		in   LevelInput
		want armory.Permission
		why  []string
	}{
		{"manifest default", LevelInput{Manifest: floor}, armory.PermConfirm, []string{"confirm by the tool's manifest default"}},
		{"agent rule auto", LevelInput{Manifest: floor, AgentRules: auto(armory.PermAuto)}, armory.PermConfirm,
			[]string{`auto by the agent's permission rule "syscall.skill.install" (x:1)`, "raised to confirm: the tool's manifest allows no lower level"}},
		{"world rule auto", LevelInput{Manifest: floor, WorldRules: auto(armory.PermAuto)}, armory.PermConfirm, []string{"by the world's permission rule", "raised to confirm"}},
		{"family rule auto", LevelInput{Manifest: floor, WorldRules: []Rule{{Tool: "syscall", Level: armory.PermAuto}}}, armory.PermConfirm, []string{"raised to confirm"}},
		{"trusted profile, file_read category", LevelInput{Manifest: armory.Manifest{Category: armory.CatFileRead, MinPermission: armory.PermConfirm}, Profile: ProfileTrusted}, armory.PermConfirm,
			[]string{"auto by profile trusted", "raised to confirm"}},
		{"manifest default below its own floor", LevelInput{Manifest: armory.Manifest{Permission: armory.PermAuto, MinPermission: armory.PermAlwaysConfirm}}, armory.PermAlwaysConfirm, []string{"raised to always_confirm"}},
		{"always_confirm rule above the floor", LevelInput{Manifest: floor, AgentRules: auto(armory.PermAlwaysConfirm)}, armory.PermAlwaysConfirm, nil},
		{"deny stays deny", LevelInput{Manifest: floor, AgentRules: auto(armory.PermDeny)}, armory.PermDeny, nil},
		{"bias raises from the floor", LevelInput{Manifest: floor, AgentRules: auto(armory.PermAuto), Bias: []string{"careful"}}, armory.PermAlwaysConfirm,
			[]string{"raised to confirm", `raised to always_confirm by bias pattern "careful"`}},
		{"no floor", LevelInput{Manifest: armory.Manifest{Permission: armory.PermConfirm}, AgentRules: auto(armory.PermAuto)}, armory.PermAuto, nil},
	} {
		tc.in.Tool = tool
		got, why := EffectiveLevel(tc.in)
		all := strings.Join(why, "\n")
		if got != tc.want {
			t.Errorf("%s: level %s, want %s:\n%s", tc.name, got, tc.want, all)
		}
		for _, w := range tc.why {
			if !strings.Contains(all, w) {
				t.Errorf("%s: reasons lack %q:\n%s", tc.name, w, all)
			}
		}
		if tc.want == got && len(tc.why) == 0 && strings.Contains(all, "raised to") && !strings.Contains(all, "bias") {
			t.Errorf("%s: raised although at or above the floor:\n%s", tc.name, all)
		}
		// The reasons shown to a model, without rule positions, agree.
		if plain, _ := EffectiveLevel(tc.in.WithoutSources()); plain != got {
			t.Errorf("%s: without sources %s, with %s", tc.name, plain, got)
		}
	}
}
