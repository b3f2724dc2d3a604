package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHome(t *testing.T) {
	t.Run("env absolute", func(t *testing.T) {
		t.Setenv(EnvHome, "/srv/fleet")
		got, err := Home()
		if err != nil || got != "/srv/fleet" {
			t.Fatalf("Home() = %q, %v", got, err)
		}
	})
	t.Run("env relative is made absolute", func(t *testing.T) {
		t.Setenv(EnvHome, "rel/fleet")
		wd, _ := os.Getwd()
		got, err := Home()
		if err != nil || got != filepath.Join(wd, "rel/fleet") {
			t.Fatalf("Home() = %q, %v", got, err)
		}
	})
	t.Run("default", func(t *testing.T) {
		t.Setenv(EnvHome, "")
		t.Setenv("HOME", "/home/op")
		got, err := Home()
		if err != nil || got != "/home/op/.fleet" {
			t.Fatalf("Home() = %q, %v", got, err)
		}
	})
}

func TestRegistryDir(t *testing.T) {
	t.Setenv(EnvRegistryDir, "")
	if got := RegistryDir("/h"); got != "/h/sockets" {
		t.Errorf("default RegistryDir = %q", got)
	}
	t.Setenv(EnvRegistryDir, "/var/reg")
	if got := RegistryDir("/h"); got != "/var/reg" {
		t.Errorf("env RegistryDir = %q", got)
	}
	t.Setenv(EnvRegistryDir, "reg")
	wd, _ := os.Getwd()
	if got := RegistryDir("/h"); got != filepath.Join(wd, "reg") {
		t.Errorf("relative env RegistryDir = %q", got)
	}
}

func TestLoadMissing(t *testing.T) {
	f, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, File{}) {
		t.Errorf("missing file: got %+v, want zero File", f)
	}
	// A missing fleetHome is the same as a missing file.
	if _, err := Load(filepath.Join(t.TempDir(), "nope")); err != nil {
		t.Fatal(err)
	}
}

func TestLoadValid(t *testing.T) {
	home := t.TempDir()
	write(t, home, "\xef\xbb\xbf"+`{
  "controlSocket": true,
  "telegramHub": {"attach": false},
  "Workers": 8,
  "name": "alpha"
}`)
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	if f.ControlSocket == nil || !*f.ControlSocket || f.TelegramHub == nil || f.TelegramHub.Attach == nil ||
		*f.TelegramHub.Attach || f.Workers == nil || *f.Workers != 8 || f.Name != "alpha" {
		t.Errorf("Load = %+v", f)
	}

	write(t, home, `{}`)
	if f, err := Load(home); err != nil || !reflect.DeepEqual(f, File{}) {
		t.Errorf("Load({}) = %+v, %v", f, err)
	}
	write(t, home, `{"controlSocket": null, "telegramHub": null}`)
	if f, err := Load(home); err != nil || !reflect.DeepEqual(f, File{}) {
		t.Errorf("Load(nulls) = %+v, %v", f, err)
	}
}

func TestLoadMalformed(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // substring of the error after "<path>: "
	}{
		{"syntax trailing comma", "{\n  \"workers\": 3,\n}", "invalid JSON at line 3, column 1: invalid character '}'"},
		{"syntax missing colon", "{\n  \"workers\" 3\n}", "invalid JSON at line 2, column 13:"},
		{"syntax column counts characters", "{\"name\": \"é\" x}", "invalid JSON at line 1, column 14:"},
		{"truncated", "{\n  \"workers\": 3", "invalid JSON at line 2, column 15: unexpected end of JSON input"},
		{"trailing garbage", "{} {}", "invalid JSON at line 1, column 4"},
		{"empty", "  \n", "file is empty"},
		{"not an object", "[1]", "must be a JSON object, got array"},
		{"hub attach string", `{"telegramHub": {"attach": "yes"}}`, `field "telegramHub.attach" must be a boolean, got string`},
		{"hub not an object", `{"telegramHub": true}`, `field "telegramHub" must be an object, got boolean`},
		{"control socket number", `{"controlSocket": 1}`, `field "controlSocket" must be a boolean, got number`},
		{"workers string", `{"workers": "4"}`, `field "workers" must be an integer, got string`},
		{"workers fraction", `{"workers": 1.5}`, `field "workers" must be an integer, got number 1.5`},
		{"workers zero", `{"workers": 0}`, `field "workers" must be between 1 and 256, got 0`},
		{"workers too many", `{"workers": 257}`, `field "workers" must be between 1 and 256, got 257`},
		{"name number", `{"name": 5}`, `field "name" must be a string, got number`},
		{"name control char", `{"name": "a\nb"}`, `field "name" must not contain control characters`},
		{"unknown key", `{"wrokers": 3}`, `unknown key "wrokers" (did you mean "workers"?)`},
		{"unknown nested key", `{"providers": {"claude": {"pth": "/x"}}}`, `unknown key "providers.claude.pth" (did you mean "providers.claude.path"?)`},
		{"unknown key far from any", `{"telegramHub": {"zzzzzz": 1}}`, `unknown key "telegramHub.zzzzzz"`},
		{"unknown keys all named", `{"limits": {"maxClient": 5}, "budgets": {"workerToken": 1}}`,
			`unknown key "budgets.workerToken" (did you mean "budgets.workerTokens"?); unknown key "limits.maxClient" (did you mean "limits.maxClients"?)`},
		{"unknown key in a price", `{"prices": {"m": {"input": 1}}}`, `unknown key "prices.m.input" (did you mean "prices.m.inputPerMTok"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			path := write(t, home, tt.content)
			_, err := Load(home)
			if err == nil {
				t.Fatalf("Load accepted %q", tt.content)
			}
			if !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %q\nwant prefix %q and substring %q", err, path+": ", tt.want)
			}
			if fe, ok := errors.AsType[*FileError](err); !ok || fe.Path != path {
				t.Errorf("Load error %T is not a *FileError for %s", err, path)
			}
		})
	}
}

func TestLoadTooLarge(t *testing.T) {
	home := t.TempDir()
	path := write(t, home, `{"name":"x"}`+strings.Repeat(" ", MaxFileSize))
	_, err := Load(home)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "limit is 1048576 bytes") {
		t.Fatalf("Load(huge) error = %v", err)
	}
	// Exactly at the limit is fine.
	write(t, home, `{"name":"x"}`+strings.Repeat(" ", MaxFileSize-12))
	if _, err := Load(home); err != nil {
		t.Fatalf("Load(at limit) = %v", err)
	}
}

func TestLoadUnreadable(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		home := t.TempDir()
		if err := os.Mkdir(Path(home), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := Load(home)
		if err == nil || !strings.Contains(err.Error(), Path(home)) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load(dir) error = %v", err)
		}
	})
	t.Run("permission denied", func(t *testing.T) {
		if os.Getuid() == 0 {
			t.Skip("root reads any file")
		}
		home := t.TempDir()
		path := write(t, home, `{}`)
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		_, err := Load(home)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("Load(0000) error = %v", err)
		}
	})
	t.Run("symlink to file is followed", func(t *testing.T) {
		home := t.TempDir()
		target := filepath.Join(t.TempDir(), "real.json")
		if err := os.WriteFile(target, []byte(`{"workers": 2}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, Path(home)); err != nil {
			t.Fatal(err)
		}
		f, err := Load(home)
		if err != nil || f.Workers == nil || *f.Workers != 2 {
			t.Fatalf("Load(symlink) = %+v, %v", f, err)
		}
	})
}

func write(t *testing.T, home, content string) string {
	t.Helper()
	path := Path(home)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfirmPatterns(t *testing.T) {
	home := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"confirmPatterns": ["^make deploy", "\\bterraform apply\\b"]}`)
	f, err := Load(home)
	if err != nil || f.ConfirmPatterns == nil || len(*f.ConfirmPatterns) != 2 {
		t.Fatalf("%+v %v", f, err)
	}
	write(`{"confirmPatterns": []}`)
	if f, err := Load(home); err != nil || f.ConfirmPatterns == nil || len(*f.ConfirmPatterns) != 0 {
		t.Fatalf("empty list must be kept (turns the policy off): %+v %v", f, err)
	}
	write(`{"confirmPatterns": ["("]}`)
	if _, err := Load(home); err == nil || !strings.Contains(err.Error(), "confirmPatterns") || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("bad regexp: %v", err)
	}
	write(`{"confirmPatterns": "git push"}`)
	if _, err := Load(home); err == nil || !strings.Contains(err.Error(), "confirmPatterns") {
		t.Fatalf("wrong type: %v", err)
	}
}

func TestLimits(t *testing.T) {
	home := t.TempDir()
	write := func(s string) { os.WriteFile(filepath.Join(home, "config.json"), []byte(s), 0o600) }
	write(`{"limits": {"maxClients": 10, "queueBytes": 1048576, "softQueueBytes": 65536, "helloTimeoutMs": 500, "sendBufferBytes": 0}}`)
	f, err := Load(home)
	if err != nil || *f.Limits.MaxClients != 10 || *f.Limits.HelloTimeoutMs != 500 || f.Limits.MaxInflight != nil ||
		f.Limits.SendBufferBytes == nil || *f.Limits.SendBufferBytes != 0 {
		t.Fatalf("%+v %v", f.Limits, err)
	}
	for cfg, want := range map[string]string{
		`{"limits": {"maxClients": 0}}`:                                  `"limits.maxClients" must be between 1 and 65536, got 0`,
		`{"limits": {"queueBytes": 1024}}`:                               `"limits.queueBytes" must be between`,
		`{"limits": {"softQueueBytes": 2097152, "queueBytes": 1048576}}`: "must not be larger than limits.queueBytes",
		`{"limits": {"writeTimeoutMs": "5s"}}`:                           "writeTimeoutMs",
		`{"limits": {"sendBufferBytes": -1}}`:                            `"limits.sendBufferBytes" must be between 0 and 16777216, got -1`,
		`{"limits": {"sendBufferBytes": 16777217}}`:                      `"limits.sendBufferBytes" must be between`,
		`{"limits": {"stallGraceMs": 5}}`:                                `"limits.stallGraceMs" must be between 10 and 60000, got 5`,
	} {
		write(cfg)
		if _, err := Load(home); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}

func TestProvidersConfig(t *testing.T) {
	home := t.TempDir()
	write(t, home, `{"provider": "claude", "model": "m1", "providers": {"claude": {"path": "/opt/claude", "args": ["--max-turns", "3"],
		"env": {"A": "1"}, "model": "m2", "permissionMode": "acceptEdits"}, "codex": {"env": ["B=2", "C=x=y"]}},
		"limits": {"agentStallTimeoutMs": 5000}}`)
	f, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Providers["claude"]
	if f.Provider != "claude" || f.Model != "m1" || c.Path != "/opt/claude" || len(c.Args) != 2 || c.Env["A"] != "1" ||
		c.Model != "m2" || c.PermissionMode != "acceptEdits" || *f.Limits.AgentStallTimeoutMs != 5000 {
		t.Fatalf("%+v", f)
	}
	if e := f.Providers["codex"].Env; e["B"] != "2" || e["C"] != "x=y" {
		t.Fatalf("list env: %v", e)
	}
	for _, bad := range []string{`{"provider": "gpt"}`, `{"providers": {"gemini": {}}}`, `{"providers": {"local": {"path": "/bin/sh"}}}`,
		`{"providers": {"claude": {"env": ["NOEQUALS"]}}}`, `{"providers": {"claude": {"env": 3}}}`, `{"limits": {"agentStallTimeoutMs": 5}}`} {
		write(t, home, bad)
		if _, err := Load(home); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// providers.local takes a shell, one the local provider knows, and nothing
// else; no other provider takes one.
func TestLocalShellConfig(t *testing.T) {
	home := t.TempDir()
	for _, shell := range append([]string{""}, LocalShells...) {
		write(t, home, `{"providers": {"local": {"shell": "`+shell+`"}}}`)
		if f, err := Load(home); err != nil || f.Providers["local"].Shell != shell {
			t.Errorf("shell %q: %+v %v", shell, f.Providers, err)
		}
	}
	write(t, home, `{"providers": {"local": {}}}`)
	if _, err := Load(home); err != nil {
		t.Errorf("empty local settings: %v", err)
	}
	for cfg, want := range map[string]string{
		`{"providers": {"local": {"shell": "bash"}}}`:        `field "providers.local.shell" must be "sh", "cmd" or "powershell" (absent: sh, or cmd on Windows), got "bash"`,
		`{"providers": {"local": {"shell": "CMD"}}}`:         `field "providers.local.shell" must be "sh", "cmd" or "powershell" (absent: sh, or cmd on Windows), got "CMD"`,
		`{"providers": {"local": {"shel": "cmd"}}}`:          `unknown key "providers.local.shel" (did you mean "providers.local.shell"?)`,
		`{"providers": {"local": {"model": "m"}}}`:           `field "providers.local.model": the local provider takes only "shell"`,
		`{"providers": {"local": {"env": {"A": "1"}}}}`:      `field "providers.local.env": the local provider takes only "shell"`,
		`{"providers": {"claude": {"shell": "powershell"}}}`: `field "providers.claude.shell": only the local provider runs a shell`,
	} {
		write(t, home, cfg)
		if _, err := Load(home); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}

// Names under maps keyed by a name (providers, prices, env) are names, not
// keys: any is accepted; only their values' keys are checked.
func TestKnownKeysAndNames(t *testing.T) {
	home := t.TempDir()
	write(t, home, `{
  "controlSocket": true,
  "telegramHub": {"attach": true, "botTokenFile": "/t", "allowedChatIds": [1], "allowedUserIds": [2], "apiBaseUrl": "http://x", "verbosity": "quiet"},
  "workers": 2, "name": "n", "confirmPatterns": ["x"],
  "limits": {"maxClients": 5, "maxInflight": 2, "helloTimeoutMs": 1000, "writeTimeoutMs": 1000, "queueBytes": 70000, "softQueueBytes": 20000, "sendBufferBytes": 0, "stallGraceMs": 100, "agentStallTimeoutMs": 5000},
  "provider": "claude", "model": "m",
  "providers": {"claude": {"path": "/c", "args": ["-v"], "env": {"ANY_NAME": "1"}, "model": "m", "permissionMode": "default"},
                "codex": {"env": ["OTHER=2"]}, "local": {"shell": "cmd"}},
  "landing": {"commitOnSettle": true, "prCommand": "true", "remote": "origin"},
  "intel": {"retentionDays": 3},
  "budgets": {"workerTokens": 1, "sessionTokens": 2},
  "prices": {"any-model-name": {"inputPerMTok": 1, "outputPerMTok": 2, "cacheReadPerMTok": 3, "cacheWritePerMTok": 4}},
  "console": {"notify": "bell"},
  "hosts": {"listen": "0.0.0.0:7422", "advertise": "fleet.example:7422", "leaseMs": 15000, "placement": "spread"}
}`)
	if _, err := Load(home); err != nil {
		t.Fatalf("every documented key: %v", err)
	}
}

func TestHostsConfig(t *testing.T) {
	home := t.TempDir()
	write(t, home, `{"hosts": {"listen": ":7422", "advertise": "10.0.0.1:7422", "leaseMs": 5000, "placement": "hosts-only"}}`)
	f, err := Load(home)
	if err != nil || f.Hosts.Listen != ":7422" || f.Hosts.Advertise != "10.0.0.1:7422" || f.HostsLease() != 5*time.Second ||
		f.Hosts.Placement != "hosts-only" {
		t.Fatalf("%+v %v", f.Hosts, err)
	}
	if (File{}).HostsLease() != 15*time.Second {
		t.Fatal("default lease")
	}
	for cfg, want := range map[string]string{
		`{"hosts": {"listen": "7422"}}`:            `field "hosts.listen": "7422" is not host:port`,
		`{"hosts": {"listen": "0.0.0.0:0"}}`:       `field "hosts.listen": "0.0.0.0:0": the port must be 1-65535`,
		`{"hosts": {"advertise": "0.0.0.0:7422"}}`: `field "hosts.advertise": "0.0.0.0:7422": hosts need an address they can dial`,
		`{"hosts": {"advertise": ":7422"}}`:        `field "hosts.advertise"`,
		`{"hosts": {"leaseMs": 999}}`:              `field "hosts.leaseMs" must be between 1000 and 600000, got 999`,
		`{"hosts": {"lease": 5000}}`:               `unknown key "hosts.lease" (did you mean "hosts.leaseMs"?)`,
		`{"hosts": {"listen": 7422}}`:              `field "hosts.listen" must be a string, got number`,
		`{"hosts": {"placement": "random"}}`:       `field "hosts.placement" must be one of local-first, spread, hosts-only, got "random"`,
	} {
		write(t, home, cfg)
		if _, err := Load(home); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}
