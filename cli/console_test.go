package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/console/tui"
)

// --notify wins over config.json's console.notify, which wins over the
// default; a bad value names the flag or the file and key it came from.
func TestConsoleNotifySources(t *testing.T) {
	home := testHome(t)
	got, err := consoleNotify(home, false, defaultNotify)
	if want, _ := tui.ParseNotify("bell,osc9"); err != nil || got != want {
		t.Fatalf("default: %v, %v; want %v", got, err, want)
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"console": {"notify": "osc777"}}`)
	got, err = consoleNotify(home, false, defaultNotify)
	if want, _ := tui.ParseNotify("osc777"); err != nil || got != want {
		t.Fatalf("from config.json: %v, %v; want %v", got, err, want)
	}
	got, err = consoleNotify(home, true, "off")
	if want, _ := tui.ParseNotify("off"); err != nil || got != want {
		t.Fatalf("the flag over config.json: %v, %v; want %v", got, err, want)
	}
	write(`{"console": {"notify": "siren"}}`)
	_, err = consoleNotify(home, false, defaultNotify)
	if err == nil || !strings.Contains(err.Error(), `field "console.notify"`) || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("bad config value: %v", err)
	}
	// The command refuses it before looking for fleets.
	_, _, err = runCmd(t, newConsoleCmd(), nil)
	if err == nil || !strings.Contains(err.Error(), `"siren"`) {
		t.Fatalf("fleet console with a bad console.notify: %v", err)
	}
	_, _, err = runCmd(t, newConsoleCmd(), nil, "--notify", "siren")
	if err == nil || !strings.HasPrefix(err.Error(), "--notify: ") {
		t.Fatalf("fleet console --notify siren: %v", err)
	}
}
