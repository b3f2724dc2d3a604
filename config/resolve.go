package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Switches are the resolved settings after precedence flag > environment > config.json > default.
type Switches struct {
	ControlSocket bool
	HubAttach     bool
	Workers       int
	Name          string
	// HostsListen is where the fleet listens for worker hosts; "" not at
	// all (docs/hosts.md).
	HostsListen string
}

// Flags carries what the command line set; nil = not given on the command line.
type Flags struct {
	ControlSocket *bool
	Hub           *bool
	Workers       *int
	Name          *string
	HostsListen   *string
}

// Resolve applies precedence flag > environment > config.json > default to
// every switch. getenv is os.Getenv when nil.
//
// Boolean variables accept 1/true/yes/on and 0/false/no/off (any case); an
// empty variable counts as unset; anything else is an error naming the
// variable. Hub attach implies the control socket, whichever source set it;
// an explicit --control-socket=false together with hub attach is an error.
// Defaults: no socket, no hub, DefaultWorkers workers, Name "" (the caller
// derives one), no hosts listener.
func Resolve(f Flags, file File, getenv func(string) string) (Switches, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var s Switches
	var err error

	var fileHub *bool
	if file.TelegramHub != nil {
		fileHub = file.TelegramHub.Attach
	}
	if s.ControlSocket, _, err = resolveBool(f.ControlSocket, "--control-socket", EnvControlSocket, file.ControlSocket, "controlSocket", getenv); err != nil {
		return Switches{}, err
	}
	var hubFrom string
	if s.HubAttach, hubFrom, err = resolveBool(f.Hub, "--hub", EnvHubAttach, fileHub, "telegramHub.attach", getenv); err != nil {
		return Switches{}, err
	}
	if s.HubAttach {
		if f.ControlSocket != nil && !*f.ControlSocket {
			return Switches{}, fmt.Errorf("--control-socket=false conflicts with Telegram hub attach (set by %s): the hub needs the control socket; drop one of them", hubFrom)
		}
		s.ControlSocket = true
	}

	s.Workers = DefaultWorkers
	switch {
	case f.Workers != nil:
		if err := checkWorkers(*f.Workers); err != nil {
			return Switches{}, fmt.Errorf("--workers %w", err)
		}
		s.Workers = *f.Workers
	case getenv(EnvWorkers) != "":
		v := strings.TrimSpace(getenv(EnvWorkers))
		n, err := strconv.Atoi(v)
		if err != nil || n < MinWorkers || n > MaxWorkers {
			return Switches{}, fmt.Errorf("%s must be an integer between %d and %d, got %q", EnvWorkers, MinWorkers, MaxWorkers, getenv(EnvWorkers))
		}
		s.Workers = n
	case file.Workers != nil:
		if err := checkWorkers(*file.Workers); err != nil {
			return Switches{}, fmt.Errorf("%s: field \"workers\" %w", FileName, err)
		}
		s.Workers = *file.Workers
	}

	switch {
	case f.Name != nil:
		s.Name = *f.Name
		if err := checkName(s.Name); err != nil {
			return Switches{}, fmt.Errorf("--name %w", err)
		}
	case getenv(EnvName) != "":
		s.Name = getenv(EnvName)
		if err := checkName(s.Name); err != nil {
			return Switches{}, fmt.Errorf("%s %w", EnvName, err)
		}
	default:
		s.Name = file.Name
		if err := checkName(s.Name); err != nil {
			return Switches{}, fmt.Errorf("%s: field \"name\" %w", FileName, err)
		}
	}
	s.HostsListen = file.Hosts.Listen
	if f.HostsListen != nil { // "" turns config.json's off
		s.HostsListen = *f.HostsListen
		if s.HostsListen == "" {
			return s, nil
		}
		if err := CheckHostsListen(s.HostsListen); err != nil {
			return Switches{}, fmt.Errorf("--hosts-listen %w", err)
		}
	}
	return s, nil
}

// resolveBool resolves one boolean switch and reports which source decided
// it ("" for the default).
func resolveBool(flag *bool, flagName, env string, file *bool, key string, getenv func(string) string) (bool, string, error) {
	if flag != nil {
		return *flag, flagName, nil
	}
	if v := getenv(env); v != "" {
		b, ok := parseBool(v)
		if !ok {
			return false, "", fmt.Errorf("%s must be one of 1/true/yes/on or 0/false/no/off, got %q", env, v)
		}
		return b, env + "=" + v, nil
	}
	if file != nil {
		return *file, fmt.Sprintf("%q in %s", key, FileName), nil
	}
	return false, "", nil
}

// parseBool parses the boolean spellings accepted in the environment.
func parseBool(v string) (b, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}
