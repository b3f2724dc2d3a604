package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/daemon"
)

// fleet doctor fits 100 columns, whatever the length of the paths it
// reports: the fleet home, the CLIs found in PATH, a broken config.json.
func TestDoctorFits100Columns(t *testing.T) {
	deep := t.TempDir()
	for range 6 {
		deep = filepath.Join(deep, strings.Repeat("d", 30))
	}
	home := filepath.Join(deep, "fleet-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTS_FLEET_HOME", home)
	t.Setenv("AGENTS_FLEET_REGISTRY_DIR", "")
	bin := filepath.Join(deep, "bin")
	os.MkdirAll(bin, 0o700)
	for _, name := range []string{"claude", "codex", "copilot"} {
		script := "#!/bin/sh\necho '9.9.9 (" + name + ", a version nobody verified, with a long description of itself)'\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A bad key makes a problem line with the long config path in it.
	os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"wrokers": 3, "providers": {"claude": {"pth": "x"}}}`), 0o600)

	out, _, code := runExecute(t, "doctor")
	if code != 1 {
		t.Errorf("exit %d with a broken config.json, want 1", code)
	}
	// Wrapped lines joined again, without their indentation.
	joined := strings.Join(strings.Fields(out), "")
	for _, want := range []string{bin + "/claude", `didyoumean"workers"?`, "versionnotverified"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	checkWidth(t, out)
}

func TestWriteDoctorWraps(t *testing.T) {
	long := "/" + strings.Repeat("segment/", 30) + "claude"
	var b strings.Builder
	err := writeDoctor(&b, daemon.Report{
		Home:    daemon.HomeReport{Path: long, Config: "ok", Problems: []string{strings.Repeat("a problem that goes on ", 12)}},
		Default: "claude",
		Providers: []daemon.ProviderReport{{Name: "claude", Path: long, Version: "1", Endpoint: strings.Repeat("x", 250),
			Credentials: "ANTHROPIC_API_KEY", Problem: "cannot run " + long}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkWidth(t, b.String())
	// Nothing is lost: the path is all there, broken after a slash.
	joined := strings.Join(strings.Fields(b.String()), "")
	if !strings.Contains(joined, long) || !strings.Contains(joined, strings.Repeat("x", 250)) {
		t.Fatalf("wrapping lost text:\n%s", b.String())
	}
}

func checkWidth(t *testing.T, out string) {
	t.Helper()
	for i, line := range strings.Split(out, "\n") {
		if w := ansi.StringWidth(line); w > 100 {
			t.Errorf("line %d is %d columns: %q", i+1, w, line)
		}
	}
}
