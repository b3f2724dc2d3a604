package agentcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

func TestVersion(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("#!/bin/sh\necho '1.2.3 (Fake)'\n"), 0o755)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("#!/bin/sh\necho 'no licence' >&2\nexit 3\n"), 0o755)
	hang := filepath.Join(dir, "hang")
	os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755)
	if v, err := Version(context.Background(), ok, nil, 30*time.Second); err != nil || v != "1.2.3 (Fake)" {
		t.Fatalf("%q %v", v, err)
	}
	if _, err := Version(context.Background(), bad, nil, 30*time.Second); err == nil || !strings.Contains(err.Error(), "no licence") {
		t.Fatalf("failing CLI: %v", err)
	}
	if _, err := Version(context.Background(), hang, nil, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("hanging CLI: %v", err)
	}
}
