package config

import (
	"fmt"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// TestResolveBoolPrecedence runs every combination of flag, environment and
// file for each boolean switch on its own.
func TestResolveBoolPrecedence(t *testing.T) {
	flags := []*bool{nil, ptr(true), ptr(false)}
	envs := []string{"", "1", "0"}
	files := []*bool{nil, ptr(true), ptr(false)}
	for _, flag := range flags {
		for _, ev := range envs {
			for _, fv := range files {
				want := false
				switch {
				case flag != nil:
					want = *flag
				case ev != "":
					want = ev == "1"
				case fv != nil:
					want = *fv
				}
				name := fmt.Sprintf("flag=%s/env=%q/file=%s", show(flag), ev, show(fv))

				t.Run("controlSocket/"+name, func(t *testing.T) {
					s, err := Resolve(Flags{ControlSocket: flag}, File{ControlSocket: fv},
						env(map[string]string{EnvControlSocket: ev}))
					if err != nil {
						t.Fatal(err)
					}
					if s.ControlSocket != want || s.HubAttach {
						t.Errorf("got %+v, want ControlSocket=%v HubAttach=false", s, want)
					}
				})

				t.Run("hub/"+name, func(t *testing.T) {
					s, err := Resolve(Flags{Hub: flag}, File{TelegramHub: &TelegramHub{Attach: fv}},
						env(map[string]string{EnvHubAttach: ev}))
					if err != nil {
						t.Fatal(err)
					}
					// Hub attach implies the socket; nothing else set it here.
					if s.HubAttach != want || s.ControlSocket != want {
						t.Errorf("got %+v, want HubAttach=ControlSocket=%v", s, want)
					}
				})
			}
		}
	}
}

func TestResolveWorkersAndNamePrecedence(t *testing.T) {
	for _, flag := range []*int{nil, ptr(2)} {
		for _, ev := range []string{"", "3"} {
			for _, fv := range []*int{nil, ptr(5)} {
				want := DefaultWorkers
				switch {
				case flag != nil:
					want = *flag
				case ev != "":
					want = 3
				case fv != nil:
					want = *fv
				}
				t.Run(fmt.Sprintf("workers/flag=%s/env=%q/file=%s", show(flag), ev, show(fv)), func(t *testing.T) {
					s, err := Resolve(Flags{Workers: flag}, File{Workers: fv}, env(map[string]string{EnvWorkers: ev}))
					if err != nil || s.Workers != want {
						t.Errorf("Workers = %d, %v; want %d", s.Workers, err, want)
					}
				})
			}
		}
	}
	for _, flag := range []*string{nil, ptr("from-flag"), ptr("")} {
		for _, ev := range []string{"", "from-env"} {
			for _, fv := range []string{"", "from-file"} {
				want := fv
				switch {
				case flag != nil:
					want = *flag
				case ev != "":
					want = ev
				}
				t.Run(fmt.Sprintf("name/flag=%s/env=%q/file=%q", show(flag), ev, fv), func(t *testing.T) {
					s, err := Resolve(Flags{Name: flag}, File{Name: fv}, env(map[string]string{EnvName: ev}))
					if err != nil || s.Name != want {
						t.Errorf("Name = %q, %v; want %q", s.Name, err, want)
					}
				})
			}
		}
	}
}

func TestResolveHubImpliesSocket(t *testing.T) {
	tests := []struct {
		name    string
		flags   Flags
		env     map[string]string
		file    File
		wantErr string // empty: success with hub and socket both on
	}{
		{name: "hub flag", flags: Flags{Hub: ptr(true)}},
		{name: "hub env", env: map[string]string{EnvHubAttach: "yes"}},
		{name: "hub file", file: File{TelegramHub: &TelegramHub{Attach: ptr(true)}}},
		{name: "hub flag beats socket env off", flags: Flags{Hub: ptr(true)}, env: map[string]string{EnvControlSocket: "off"}},
		{name: "hub env beats socket file off", env: map[string]string{EnvHubAttach: "on"}, file: File{ControlSocket: ptr(false)}},
		{name: "hub file beats socket env off", env: map[string]string{EnvControlSocket: "0"},
			file: File{TelegramHub: &TelegramHub{Attach: ptr(true)}}},
		{name: "socket flag true with hub", flags: Flags{ControlSocket: ptr(true), Hub: ptr(true)}},
		{name: "socket flag false with hub flag", flags: Flags{ControlSocket: ptr(false), Hub: ptr(true)},
			wantErr: "--control-socket=false conflicts with Telegram hub attach (set by --hub)"},
		{name: "socket flag false with hub env", flags: Flags{ControlSocket: ptr(false)},
			env: map[string]string{EnvHubAttach: "1"}, wantErr: "(set by AGENTS_FLEET_TELEGRAM_HUB_ATTACH=1)"},
		{name: "socket flag false with hub file", flags: Flags{ControlSocket: ptr(false)},
			file: File{TelegramHub: &TelegramHub{Attach: ptr(true)}}, wantErr: `(set by "telegramHub.attach" in config.json)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(tt.flags, tt.file, env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !s.HubAttach || !s.ControlSocket {
				t.Fatalf("Resolve = %+v, %v; want hub and socket on", s, err)
			}
		})
	}
}

func TestResolveEnvParsing(t *testing.T) {
	for _, v := range []string{"1", "true", "TRUE", "Yes", "on", " on "} {
		s, err := Resolve(Flags{}, File{}, env(map[string]string{EnvControlSocket: v}))
		if err != nil || !s.ControlSocket {
			t.Errorf("%s=%q: %+v, %v", EnvControlSocket, v, s, err)
		}
	}
	for _, v := range []string{"0", "false", "No", "OFF"} {
		s, err := Resolve(Flags{}, File{ControlSocket: ptr(true)}, env(map[string]string{EnvControlSocket: v}))
		if err != nil || s.ControlSocket {
			t.Errorf("%s=%q: %+v, %v", EnvControlSocket, v, s, err)
		}
	}
	for _, v := range []string{"1", "256", " 7 "} {
		if _, err := Resolve(Flags{}, File{}, env(map[string]string{EnvWorkers: v})); err != nil {
			t.Errorf("%s=%q: %v", EnvWorkers, v, err)
		}
	}

	bad := []struct {
		env     map[string]string
		flags   Flags
		file    File
		wantErr string
	}{
		{env: map[string]string{EnvControlSocket: "2"}, wantErr: `AGENTS_FLEET_CONTROL_SOCKET must be one of 1/true/yes/on or 0/false/no/off, got "2"`},
		{env: map[string]string{EnvControlSocket: "enabled"}, wantErr: `AGENTS_FLEET_CONTROL_SOCKET must be one of`},
		{env: map[string]string{EnvHubAttach: "y"}, wantErr: `AGENTS_FLEET_TELEGRAM_HUB_ATTACH must be one of 1/true/yes/on or 0/false/no/off, got "y"`},
		{env: map[string]string{EnvWorkers: "four"}, wantErr: `AGENTS_FLEET_WORKERS must be an integer between 1 and 256, got "four"`},
		{env: map[string]string{EnvWorkers: "0"}, wantErr: `AGENTS_FLEET_WORKERS must be an integer between 1 and 256, got "0"`},
		{env: map[string]string{EnvWorkers: "257"}, wantErr: `AGENTS_FLEET_WORKERS must be an integer`},
		{env: map[string]string{EnvWorkers: "2.5"}, wantErr: `AGENTS_FLEET_WORKERS must be an integer`},
		{env: map[string]string{EnvName: "a\tb"}, wantErr: `AGENTS_FLEET_NAME must not contain control characters`},
		{flags: Flags{Workers: ptr(0)}, wantErr: "--workers must be between 1 and 256, got 0"},
		{flags: Flags{Workers: ptr(1000)}, wantErr: "--workers must be between 1 and 256, got 1000"},
		{flags: Flags{Name: ptr(strings.Repeat("n", MaxNameLen+1))}, wantErr: "--name must be at most 128 bytes, got 129"},
		{file: File{Workers: ptr(-1)}, wantErr: `config.json: field "workers" must be between 1 and 256, got -1`},
	}
	for _, tt := range bad {
		_, err := Resolve(tt.flags, tt.file, env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Resolve(%+v, %+v, %v) error = %v, want %q", tt.flags, tt.file, tt.env, err, tt.wantErr)
		}
	}

	// A flag shadows a malformed variable of the same switch: the variable is never read.
	if s, err := Resolve(Flags{ControlSocket: ptr(true)}, File{}, env(map[string]string{EnvControlSocket: "bogus"})); err != nil || !s.ControlSocket {
		t.Errorf("flag over bad env: %+v, %v", s, err)
	}
}

func TestResolveDefaults(t *testing.T) {
	s, err := Resolve(Flags{}, File{}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s != (Switches{Workers: DefaultWorkers}) {
		t.Errorf("defaults = %+v", s)
	}
	// nil getenv reads the process environment.
	t.Setenv(EnvWorkers, "9")
	if s, err := Resolve(Flags{}, File{}, nil); err != nil || s.Workers != 9 {
		t.Errorf("nil getenv: %+v, %v", s, err)
	}
}

func TestResolveHostsListen(t *testing.T) {
	file := File{Hosts: Hosts{Listen: "10.0.0.1:7422"}}
	for _, c := range []struct {
		flag *string
		file File
		want string
		err  string
	}{
		{nil, File{}, "", ""},
		{nil, file, "10.0.0.1:7422", ""},
		{ptr("127.0.0.1:9000"), file, "127.0.0.1:9000", ""},
		{ptr(""), file, "", ""}, // the flag turns config.json's off
		{ptr("9000"), File{}, "", `--hosts-listen "9000" is not host:port`},
	} {
		s, err := Resolve(Flags{HostsListen: c.flag}, c.file, env(nil))
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("flag %s: %v, want %q", show(c.flag), err, c.err)
			}
			continue
		}
		if err != nil || s.HostsListen != c.want {
			t.Errorf("flag %s, file %q: %q %v, want %q", show(c.flag), c.file.Hosts.Listen, s.HostsListen, err, c.want)
		}
	}
}
