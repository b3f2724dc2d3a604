package cli

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/intel"
)

// TestIntelWithoutAStore: on a fleet home no fleet has run in, fleet
// intel --json prints the snapshots of an empty store and exits 0 (a
// script asked for JSON), the same JSON as once the store exists but for
// the times, and makes no store; the human form says there is none yet.
func TestIntelWithoutAStore(t *testing.T) {
	home := t.TempDir()
	t.Setenv("AGENTS_FLEET_HOME", home)
	intelJSON := func() map[string]any {
		t.Helper()
		stdout, stderr, code := fleetCmd(t, "intel", "--json")
		if code != 0 {
			t.Fatalf("fleet intel --json: exit %d, stderr %q", code, stderr)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("fleet intel --json: %v\n%s", err, stdout)
		}
		for _, k := range []string{"fleetIntel", "fleetEvolution", "fleetStore", "fleetExperiment"} {
			snap, ok := got[k].(map[string]any)
			if !ok {
				t.Fatalf("fleet intel --json: %s is %v\n%s", k, got[k], stdout)
			}
			delete(snap, "ts")
		}
		return got
	}

	none := intelJSON()
	if _, err := os.Stat(intel.DefaultPath(home)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fleet intel --json made a store (stat: %v)", err)
	}
	if sum := none["fleetIntel"].(map[string]any)["summary"].(map[string]any); sum["sessionCount"] != 0.0 || sum["totalAgentRuns"] != 0.0 {
		t.Errorf("summary without a store: %v", sum)
	}
	if s, ok := none["suggestions"].([]any); !ok || len(s) != 0 {
		t.Errorf("suggestions without a store: %v, want []", none["suggestions"])
	}
	_, stderr, code := fleetCmd(t, "intel")
	if code == 0 || !strings.Contains(stderr, "no intel store yet") {
		t.Errorf("fleet intel without a store: exit %d, stderr %q; want the hint and a failure", code, stderr)
	}

	st, err := intel.Open(intel.DefaultPath(home))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if empty := intelJSON(); !reflect.DeepEqual(none, empty) {
		t.Errorf("without a store:\n%v\nwith an empty one:\n%v", none, empty)
	}
}
