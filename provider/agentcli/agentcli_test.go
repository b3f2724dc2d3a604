package agentcli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agents-fleet/fleet/provider"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecli")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "notexec"), []byte("x"), 0o644)
	env := []string{"PATH=/nonexistent" + string(filepath.ListSeparator) + dir}
	miss := provider.MissingCLIError{Provider: "fake", Package: "@x/fake", ConfigKey: "providers.fake.path"}

	if got, err := Find("", "fakecli", env, miss); err != nil || got != bin {
		t.Fatalf("by name in the env's PATH: %q %v", got, err)
	}
	if got, err := Find(bin, "other", nil, miss); err != nil || got != bin {
		t.Fatalf("by path: %q %v", got, err)
	}
	for _, c := range []struct{ path, command string }{{"", "nothere"}, {filepath.Join(dir, "notexec"), ""}, {"", "notexec"}, {dir, ""}} {
		_, err := Find(c.path, c.command, env, miss)
		var m *provider.MissingCLIError
		if !errors.As(err, &m) || m.Package != "@x/fake" || m.Command == "" {
			t.Fatalf("%+v: %v", c, err)
		}
	}
}

func TestEnv(t *testing.T) {
	env := []string{"A=1", "B=2", "A=3"}
	if v, ok := LookupEnv(env, "A"); !ok || v != "3" {
		t.Fatal("the last entry wins", v, ok)
	}
	got := WithDefaults(env, "A=9", "C=4")
	if v, _ := LookupEnv(got, "A"); v != "3" {
		t.Fatal("a default overrode the user's value")
	}
	if v, _ := LookupEnv(got, "C"); v != "4" {
		t.Fatal("a default was not added")
	}
}
