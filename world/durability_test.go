package world

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDurabilitySetting(t *testing.T) {
	files := goodFiles()
	w, err := Load(writeWorld(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if w.Durability != "" || w.DurabilityWindow != 0 {
		t.Fatalf("default durability %q %v, want unset", w.Durability, w.DurabilityWindow)
	}
	files["world-config.yaml"] = goodConfig + "durability: batched\ndurability_window: 25ms\n"
	if w, err = Load(writeWorld(t, files)); err != nil {
		t.Fatal(err)
	}
	if w.Durability != DurabilityBatched || w.DurabilityWindow != 25*time.Millisecond {
		t.Fatalf("durability %q %v", w.Durability, w.DurabilityWindow)
	}
	lines := strings.Count(goodConfig, "\n")
	for _, tc := range []struct{ yaml, want string }{
		{"durability: batchd\n", fmt.Sprintf(`world-config.yaml:%d: durability must be strict or batched, got "batchd" (did you mean "batched"?)`, lines+1)},
		{"durability: fsync\n", fmt.Sprintf(`world-config.yaml:%d: durability must be strict or batched, got "fsync"`, lines+1)},
		{"durability: [strict]\n", fmt.Sprintf(`world-config.yaml:%d: durability must be`, lines+1)},
		{"durability: batched\ndurability_window: 1h\n", fmt.Sprintf(`world-config.yaml:%d: durability_window must be more than 0 and at most 10s, got 1h0m0s`, lines+2)},
		{"durability: batched\ndurability_window: 0s\n", fmt.Sprintf(`world-config.yaml:%d: durability_window must be more than 0`, lines+2)},
		{"durability: batched\ndurability_window: soon\n", fmt.Sprintf(`world-config.yaml:%d: durability_window must be a duration`, lines+2)},
		{"durabilty: batched\n", fmt.Sprintf(`world-config.yaml:%d: world-config.yaml: unknown key "durabilty" (did you mean "durability"?)`, lines+1)},
	} {
		files["world-config.yaml"] = goodConfig + tc.yaml
		_, err := Load(writeWorld(t, files))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// A window without the batched mode is a warning, with its line.
	files["world-config.yaml"] = goodConfig + "durability_window: 5ms\n"
	if w, err = Load(writeWorld(t, files)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(w.Diagnostics); !strings.Contains(got, fmt.Sprintf("world-config.yaml:%d: warning: durability_window applies only to durability: batched", lines+1)) {
		t.Fatalf("diagnostics %q", got)
	}
}
