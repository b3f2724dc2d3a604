// Package config locates fleetHome and the registry directory, reads
// <fleetHome>/config.json and resolves the run switches with the precedence
// flag > environment > config.json > default (docs/configuration.md).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Environment variables read by this package.
const (
	EnvHome          = "AGENTS_FLEET_HOME"
	EnvRegistryDir   = "AGENTS_FLEET_REGISTRY_DIR"
	EnvControlSocket = "AGENTS_FLEET_CONTROL_SOCKET"
	EnvHubAttach     = "AGENTS_FLEET_TELEGRAM_HUB_ATTACH"
	EnvWorkers       = "AGENTS_FLEET_WORKERS"
	EnvName          = "AGENTS_FLEET_NAME"
)

const (
	// FileName is the name of the config file inside fleetHome.
	FileName = "config.json"
	// MaxFileSize is the largest config.json Load accepts.
	MaxFileSize = 1 << 20

	DefaultWorkers = 4
	MinWorkers     = 1
	MaxWorkers     = 256
	// MaxNameLen is the longest fleet name accepted, in bytes.
	MaxNameLen = 128
)

// Home returns fleetHome: $AGENTS_FLEET_HOME if set (made absolute), else ~/.fleet.
func Home() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w", EnvHome, h, err)
		}
		return abs, nil
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate fleet home (set %s): %w", EnvHome, err)
	}
	return filepath.Join(u, ".fleet"), nil
}

// RegistryDir returns $AGENTS_FLEET_REGISTRY_DIR if set (made absolute), else <home>/sockets.
func RegistryDir(home string) string {
	if d := os.Getenv(EnvRegistryDir); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		// Abs only fails when the working directory is gone; a cleaned
		// relative path is the best that can be done then.
		return filepath.Clean(d)
	}
	return filepath.Join(home, "sockets")
}

// Path returns the path of the config file in home.
func Path(home string) string { return filepath.Join(home, FileName) }

// File is the parsed <fleetHome>/config.json. Every field is optional; pointer fields are nil when absent.
// An unknown key is an error naming the closest known key (a misspelt key
// would otherwise silently change nothing).
type File struct {
	ControlSocket *bool        `json:"controlSocket,omitempty"`
	TelegramHub   *TelegramHub `json:"telegramHub,omitempty"`
	Web           *Web         `json:"web,omitempty"`
	Workers       *int         `json:"workers,omitempty"`
	Name          string       `json:"name,omitempty"`
	// ConfirmPatterns replaces the default confirm policy: commands
	// matching any of these Go regular expressions need an operator's
	// confirm before they start. An empty list turns the policy off; nil
	// (absent) keeps the defaults.
	ConfirmPatterns *[]string `json:"confirmPatterns,omitempty"`
	// Limits bound the control socket; absent fields keep the defaults.
	Limits Limits `json:"limits,omitzero"`
	// Provider is the default provider (local, claude, codex, copilot) and
	// Model its model; --provider and --model win.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Providers configure the agent CLIs, by provider name, and the local
	// provider's shell.
	Providers map[string]ProviderConfig `json:"providers,omitempty"`
	// Landing configures how workers' work is committed and handed on
	// (docs/landing-work.md).
	Landing Landing `json:"landing,omitzero"`
	// Intel configures the intelligence store (docs/intel.md).
	Intel Intel `json:"intel,omitzero"`
	// Budgets are the token budgets (docs/budgets.md); absent or 0: none.
	Budgets Budgets `json:"budgets,omitzero"`
	// Prices are what models cost, by model name, for the cost /budget
	// shows; there is no built-in price list.
	Prices map[string]Price `json:"prices,omitempty"`
	// Console configures fleet console (docs/console.md).
	Console Console `json:"console,omitzero"`
	// Hosts configures worker hosts (docs/hosts.md).
	Hosts Hosts `json:"hosts,omitzero"`
}

// Hosts is the "hosts" object of config.json (docs/hosts.md).
type Hosts struct {
	// Listen is the host:port the fleet listens on for hosts (its hub);
	// absent, it listens for none. --hosts-listen wins.
	Listen string `json:"listen,omitempty"`
	// Advertise is the host:port hosts dial, written into join files;
	// absent, Listen when it names one address.
	Advertise string `json:"advertise,omitempty"`
	// LeaseMs: a host not heard from for this long is lost; default 15000.
	LeaseMs *int `json:"leaseMs,omitempty"`
	// Placement says where workers go: "local-first" (the default: the
	// fleet's own slots, then hosts), "spread" (the least loaded of the
	// fleet and its hosts) or "hosts-only".
	Placement string `json:"placement,omitempty"`
}

// Placements are the values of hosts.placement.
var Placements = []string{"local-first", "spread", "hosts-only"}

// HostsLease is how long a host may go unheard before it is lost.
func (f File) HostsLease() time.Duration {
	ms := DefaultHostsLeaseMs
	if f.Hosts.LeaseMs != nil {
		ms = *f.Hosts.LeaseMs
	}
	return time.Duration(ms) * time.Millisecond
}

// DefaultHostsLeaseMs is hosts.leaseMs's default.
const DefaultHostsLeaseMs = 15000

// CheckHostsListen checks an address the fleet listens on for hosts:
// host:port with a port from 1 to 65535; the host may be empty or a
// wildcard (every address).
func CheckHostsListen(addr string) error {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port must be 1-65535", addr)
	}
	return nil
}

// CheckHostsAdvertise checks an address hosts dial: host:port, the host
// neither empty nor a wildcard.
func CheckHostsAdvertise(addr string) error {
	if err := CheckHostsListen(addr); err != nil {
		return err
	}
	h, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q: hosts need an address they can dial, not a wildcard", addr)
	}
	return nil
}

// Console is the "console" object of config.json.
type Console struct {
	// Notify is how a waiting request is signalled when the operator is
	// not looking (bell, osc9, osc777, comma-separated, or off); the
	// --notify flag wins. fleet console checks the value.
	Notify string `json:"notify,omitempty"`
}

// Intel is the "intel" object of config.json.
type Intel struct {
	// RetentionDays: a fleet prunes sessions older than this from the
	// intel store when it starts; absent 180, 0 keeps everything.
	RetentionDays *int `json:"retentionDays,omitempty"`
}

// IntelRetention is how long the intel store keeps sessions; 0 forever.
func (f File) IntelRetention() time.Duration {
	days := 180
	if f.Intel.RetentionDays != nil {
		days = *f.Intel.RetentionDays
	}
	return time.Duration(days) * 24 * time.Hour
}

// Landing is the "landing" object of config.json.
type Landing struct {
	// CommitOnSettle commits a settling worker's uncommitted changes on its
	// branch; absent: for agent providers (claude, codex, copilot) only.
	CommitOnSettle *bool `json:"commitOnSettle,omitempty"`
	// PRCommand, when set, is run with sh -c by fleet pr after the push,
	// instead of gh.
	PRCommand string `json:"prCommand,omitempty"`
	// Remote is where fleet pr pushes; default origin.
	Remote string `json:"remote,omitempty"`
}

// Budgets is the "budgets" object: tokens (input + output) a worker and
// the whole session may use before an operator must raise the budget.
type Budgets struct {
	WorkerTokens  *int64 `json:"workerTokens,omitempty"`
	SessionTokens *int64 `json:"sessionTokens,omitempty"`
}

// Price is one model's entry of "prices", in USD per million tokens.
type Price struct {
	InputPerMTok      float64 `json:"inputPerMTok"`
	OutputPerMTok     float64 `json:"outputPerMTok"`
	CacheReadPerMTok  float64 `json:"cacheReadPerMTok"`
	CacheWritePerMTok float64 `json:"cacheWritePerMTok"`
}

// ProviderConfig is one entry of "providers" (docs/providers.md). The
// local provider takes Shell alone; the agent CLIs take the others.
type ProviderConfig struct {
	Path           string   `json:"path,omitempty"`           // the CLI binary; default found in PATH
	Args           []string `json:"args,omitempty"`           // extra arguments, after the fleet's own
	Env            EnvMap   `json:"env,omitempty"`            // extra environment for the CLI
	Model          string   `json:"model,omitempty"`          // the default model
	PermissionMode string   `json:"permissionMode,omitempty"` // passed to the CLI where it has one
	// Shell is the shell the local provider runs commands with, one of
	// LocalShells; "" is the system's: sh, or cmd on Windows.
	Shell string `json:"shell,omitempty"`
}

// LocalShells are the values of providers.local.shell.
var LocalShells = []string{"sh", "cmd", "powershell"}

// checkLocal checks providers.local: a shell, nothing else.
func (pc ProviderConfig) checkLocal() error {
	for _, f := range []struct {
		key string
		set bool
	}{{"path", pc.Path != ""}, {"args", len(pc.Args) > 0}, {"env", len(pc.Env) > 0}, {"model", pc.Model != ""}, {"permissionMode", pc.PermissionMode != ""}} {
		if f.set {
			return fmt.Errorf("field \"providers.local.%s\": the local provider takes only \"shell\"", f.key)
		}
	}
	if pc.Shell != "" && !slices.Contains(LocalShells, pc.Shell) {
		return fmt.Errorf("field \"providers.local.shell\" must be \"sh\", \"cmd\" or \"powershell\" (absent: sh, or cmd on Windows), got %q", pc.Shell)
	}
	return nil
}

// EnvMap is an environment: in config.json an object {"NAME": "value"}
// or a list ["NAME=value"].
type EnvMap map[string]string

// UnmarshalJSON takes either form.
func (m *EnvMap) UnmarshalJSON(b []byte) error {
	var obj map[string]string
	if err := json.Unmarshal(b, &obj); err == nil {
		*m = obj
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New(`must be an object {"NAME": "value"} or a list ["NAME=value"]`)
	}
	out := make(EnvMap, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("entry %q is not NAME=value", kv)
		}
		out[k] = v
	}
	*m = out
	return nil
}

// ProviderNames are the providers a fleet knows.
var ProviderNames = []string{"local", "claude", "codex", "copilot"}

// CheckProvider says whether name is a known provider.
func CheckProvider(name string) error {
	for _, n := range ProviderNames {
		if n == name {
			return nil
		}
	}
	return fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(ProviderNames, ", "))
}

// Limits are the control socket's bounds (docs/configuration.md).
type Limits struct {
	MaxClients     *int `json:"maxClients,omitempty"`     // attached clients at once; default 4096
	MaxInflight    *int `json:"maxInflight,omitempty"`    // native requests in flight per client; default 16
	HelloTimeoutMs *int `json:"helloTimeoutMs,omitempty"` // time to send hello; default 10000
	WriteTimeoutMs *int `json:"writeTimeoutMs,omitempty"` // per write to a client; default 10000
	QueueBytes     *int `json:"queueBytes,omitempty"`     // per-client backlog before eviction; default 8 MiB
	SoftQueueBytes *int `json:"softQueueBytes,omitempty"` // backlog that holds task output back; default 1 MiB
	// SendBufferBytes is the socket send buffer asked for each client;
	// default 128 KiB, 0 keeps the system's default.
	SendBufferBytes *int `json:"sendBufferBytes,omitempty"`
	// StallGraceMs is how long a congested client may go without a
	// completed write before it stops holding task output back; default 200.
	StallGraceMs *int `json:"stallGraceMs,omitempty"`
	// AgentStallTimeoutMs fails an agent turn with no activity for this
	// long (not counting time waiting on the operator); default 600000.
	AgentStallTimeoutMs *int `json:"agentStallTimeoutMs,omitempty"`
	// MinFreeMemoryMiB: a task starts on this machine only while this much
	// memory stays free (MemAvailable, or less under a cgroup v2 limit);
	// default 1024, 0 admits by count alone (docs/unattended.md).
	MinFreeMemoryMiB *int `json:"minFreeMemoryMiB,omitempty"`
	// WorkerMemoryMiB stops a worker whose whole process tree holds more;
	// default 0, off.
	WorkerMemoryMiB *int `json:"workerMemoryMiB,omitempty"`
	// StallRetries is how many stalls of an agent's turn are healed (the
	// turn interrupted and continued, then the CLI resumed in a new
	// process) before the worker fails; default 2.
	StallRetries *int `json:"stallRetries,omitempty"`
	// RateLimitMaxWaitMs bounds the wait for a rate or usage limit to
	// reset; past it the worker fails with the reason. Default 6 h.
	RateLimitMaxWaitMs *int `json:"rateLimitMaxWaitMs,omitempty"`
}

// limitRanges are the accepted ranges of each limit.
var limitRanges = []struct {
	name     string
	get      func(Limits) *int
	min, max int
}{
	{"maxClients", func(l Limits) *int { return l.MaxClients }, 1, 65536},
	{"maxInflight", func(l Limits) *int { return l.MaxInflight }, 1, 1024},
	{"helloTimeoutMs", func(l Limits) *int { return l.HelloTimeoutMs }, 100, 600000},
	{"writeTimeoutMs", func(l Limits) *int { return l.WriteTimeoutMs }, 100, 600000},
	{"queueBytes", func(l Limits) *int { return l.QueueBytes }, 64 << 10, 1 << 30},
	{"softQueueBytes", func(l Limits) *int { return l.SoftQueueBytes }, 16 << 10, 1 << 30},
	{"sendBufferBytes", func(l Limits) *int { return l.SendBufferBytes }, 0, 16 << 20},
	{"stallGraceMs", func(l Limits) *int { return l.StallGraceMs }, 10, 60000},
	{"agentStallTimeoutMs", func(l Limits) *int { return l.AgentStallTimeoutMs }, 1000, 24 * 3600 * 1000},
	{"minFreeMemoryMiB", func(l Limits) *int { return l.MinFreeMemoryMiB }, 0, 1 << 20},
	{"workerMemoryMiB", func(l Limits) *int { return l.WorkerMemoryMiB }, 0, 1 << 20},
	{"stallRetries", func(l Limits) *int { return l.StallRetries }, 0, 100},
	{"rateLimitMaxWaitMs", func(l Limits) *int { return l.RateLimitMaxWaitMs }, 0, 7 * 24 * 3600 * 1000},
}

// Web is the "web" object of config.json: fleet web's settings.
type Web struct {
	// Addr is where fleet web listens (loopback only); --addr wins.
	Addr string `json:"addr,omitempty"`
}

// TelegramHub is the "telegramHub" object of config.json.
type TelegramHub struct {
	// Attach opts this fleet in to the hub (hubAttach in its descriptor).
	Attach *bool `json:"attach,omitempty"`
	// The rest configures fleet hub itself (docs/hub.md).
	// BotTokenFile holds the bot token; it must be 0600 and the user's.
	BotTokenFile string `json:"botTokenFile,omitempty"`
	// AllowedChatIDs are the chats the hub talks to; required.
	AllowedChatIDs []int64 `json:"allowedChatIds,omitempty"`
	// AllowedUserIDs, when set, are the only users who may press buttons
	// or send prompts (in a group chat anyone in it could otherwise).
	AllowedUserIDs []int64 `json:"allowedUserIds,omitempty"`
	// APIBaseURL is the Bot API server; default the public one.
	APIBaseURL string `json:"apiBaseUrl,omitempty"`
	// Verbosity is quiet, normal (default) or verbose.
	Verbosity string `json:"verbosity,omitempty"`
}

// HubVerbosities are the values telegramHub.verbosity takes.
var HubVerbosities = []string{"quiet", "normal", "verbose"}

// FileError is a config file that cannot be used as written: bad JSON, a
// wrong type, an unknown key, a value out of range, a file too large or
// not a regular file. Commands refuse to start on it (a usage error).
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// LoadHome locates fleetHome (Home) and reads its config.json (Load): what
// every command that acts on the fleet home starts with.
func LoadHome() (home string, file File, err error) {
	if home, err = Home(); err != nil {
		return "", File{}, err
	}
	file, err = Load(home)
	return home, file, err
}

// Load reads <home>/config.json. A missing file is not an error (zero File).
// A malformed file is a *FileError naming the file and the problem: a JSON
// syntax error with its line and column, a wrong type with the field path,
// an unknown key with the closest known one, an out of range value. Files
// over MaxFileSize are refused.
func Load(home string) (File, error) {
	path := Path(home)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("read config: %w", err)
	}
	// Refuse FIFOs and devices before opening: a FIFO would block the open.
	if !fi.Mode().IsRegular() {
		return File{}, &FileError{path, errors.New("not a regular file")}
	}
	if fi.Size() > MaxFileSize {
		return File{}, &FileError{path, fmt.Errorf("file is %d bytes; the limit is %d bytes (1 MiB)", fi.Size(), MaxFileSize)}
	}
	fh, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("read config: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return File{}, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(data) > MaxFileSize { // grew after the Stat
		return File{}, &FileError{path, fmt.Errorf("file is over the limit of %d bytes (1 MiB)", MaxFileSize)}
	}
	return parse(path, data)
}

// parse decodes data, the contents of the config file at path.
func parse(path string, data []byte) (File, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // editors on Windows add a BOM
	if len(bytes.TrimSpace(data)) == 0 {
		return File{}, &FileError{path, errors.New("file is empty; write {} for an empty configuration")}
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return File{}, &FileError{path, errors.New(describeJSONError(data, err))}
	}
	if err := unknownKeys(data); err != nil {
		return File{}, &FileError{path, err}
	}
	if err := f.validate(); err != nil {
		return File{}, &FileError{path, err}
	}
	return f, nil
}

// validate checks the values that JSON types alone do not bound.
func (f File) validate() error {
	if f.Workers != nil {
		if err := checkWorkers(*f.Workers); err != nil {
			return fmt.Errorf("field \"workers\" %w", err)
		}
	}
	if err := checkName(f.Name); err != nil {
		return fmt.Errorf("field \"name\" %w", err)
	}
	for _, r := range limitRanges {
		if v := r.get(f.Limits); v != nil && (*v < r.min || *v > r.max) {
			return fmt.Errorf("field \"limits.%s\" must be between %d and %d, got %d", r.name, r.min, r.max, *v)
		}
	}
	if q, s := f.Limits.QueueBytes, f.Limits.SoftQueueBytes; s != nil && *s > pick(q, 8<<20) {
		return fmt.Errorf("field \"limits.softQueueBytes\" (%d) must not be larger than limits.queueBytes (%d)", *s, pick(q, 8<<20))
	}
	if d := f.Intel.RetentionDays; d != nil && (*d < 0 || *d > 36500) {
		return fmt.Errorf("field \"intel.retentionDays\" must be between 0 (keep everything) and 36500, got %d", *d)
	}
	if r := f.Landing.Remote; r != "" && (strings.HasPrefix(r, "-") || strings.ContainsAny(r, " \t\n\x00")) {
		return fmt.Errorf("field \"landing.remote\": %q is not a remote name", r)
	}
	if strings.ContainsRune(f.Landing.PRCommand, 0) {
		return errors.New("field \"landing.prCommand\" must not contain NUL")
	}
	if f.Provider != "" {
		if err := CheckProvider(f.Provider); err != nil {
			return fmt.Errorf("field \"provider\": %w", err)
		}
	}
	for name, pc := range f.Providers {
		if err := CheckProvider(name); err != nil {
			return fmt.Errorf("field \"providers.%s\": %w", name, err)
		}
		if name == "local" {
			if err := pc.checkLocal(); err != nil {
				return err
			}
			continue
		}
		if pc.Shell != "" {
			return fmt.Errorf("field \"providers.%s.shell\": only the local provider runs a shell", name)
		}
		if len(pc.Args) > 256 || len(pc.Env) > 256 {
			return fmt.Errorf("field \"providers.%s\": at most 256 args and 256 env entries", name)
		}
		for k := range pc.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("field \"providers.%s.env\": %q is not a variable name", name, k)
			}
		}
	}
	for _, b := range []struct {
		name string
		v    *int64
	}{{"workerTokens", f.Budgets.WorkerTokens}, {"sessionTokens", f.Budgets.SessionTokens}} {
		if b.v != nil && *b.v < 0 {
			return fmt.Errorf("field \"budgets.%s\" must be a positive number of tokens (0 or absent: no budget), got %d", b.name, *b.v)
		}
	}
	if len(f.Prices) > 1024 {
		return fmt.Errorf("field \"prices\" has %d models; the limit is 1024", len(f.Prices))
	}
	for model, p := range f.Prices {
		if strings.TrimSpace(model) == "" {
			return errors.New("field \"prices\": a model name is empty")
		}
		for _, v := range []struct {
			name string
			v    float64
		}{{"inputPerMTok", p.InputPerMTok}, {"outputPerMTok", p.OutputPerMTok}, {"cacheReadPerMTok", p.CacheReadPerMTok}, {"cacheWritePerMTok", p.CacheWritePerMTok}} {
			if v.v < 0 {
				return fmt.Errorf("field \"prices.%s.%s\" must not be negative, got %g", model, v.name, v.v)
			}
		}
	}
	if a := f.Hosts.Listen; a != "" {
		if err := CheckHostsListen(a); err != nil {
			return fmt.Errorf("field \"hosts.listen\": %w", err)
		}
	}
	if a := f.Hosts.Advertise; a != "" {
		if err := CheckHostsAdvertise(a); err != nil {
			return fmt.Errorf("field \"hosts.advertise\": %w", err)
		}
	}
	if p := f.Hosts.Placement; p != "" && !slices.Contains(Placements, p) {
		return fmt.Errorf("field \"hosts.placement\" must be one of %s, got %q", strings.Join(Placements, ", "), p)
	}
	if l := f.Hosts.LeaseMs; l != nil && (*l < 1000 || *l > 600000) {
		return fmt.Errorf("field \"hosts.leaseMs\" must be between 1000 and 600000, got %d", *l)
	}
	if h := f.TelegramHub; h != nil {
		if h.Verbosity != "" && !slices.Contains(HubVerbosities, h.Verbosity) {
			return fmt.Errorf("field \"telegramHub.verbosity\" must be quiet, normal or verbose, got %q", h.Verbosity)
		}
		if len(h.AllowedChatIDs) > 1024 || len(h.AllowedUserIDs) > 1024 {
			return errors.New("field \"telegramHub\": at most 1024 allowedChatIds and 1024 allowedUserIds")
		}
	}
	if f.ConfirmPatterns != nil {
		if len(*f.ConfirmPatterns) > 256 {
			return fmt.Errorf("field \"confirmPatterns\" has %d entries; the limit is 256", len(*f.ConfirmPatterns))
		}
		for i, p := range *f.ConfirmPatterns {
			if _, err := regexp.Compile(p); err != nil {
				return fmt.Errorf("field \"confirmPatterns\" entry %d (%q) is not a valid regular expression: %v", i+1, p, err)
			}
		}
	}
	return nil
}

// checkWorkers bounds the worker count.
func checkWorkers(n int) error {
	if n < MinWorkers || n > MaxWorkers {
		return fmt.Errorf("must be between %d and %d, got %d", MinWorkers, MaxWorkers, n)
	}
	return nil
}

// checkName rejects names that would garble a listing or an approval prompt.
// registry.Validate applies the same rule to descriptors.
func checkName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxNameLen, len(name))
	}
	if !utf8.ValidString(name) {
		return errors.New("must be valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("must not contain control characters, got %q", name)
		}
	}
	return nil
}

// describeJSONError turns an encoding/json error into a message for the
// operator: line and column for syntax errors, the field path and the
// expected and actual kinds for type errors.
func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read including the offending one.
		at := int(se.Offset) - 1
		if strings.HasPrefix(se.Error(), "unexpected end") || at < 0 {
			at = len(data)
		}
		line, col := position(data, at)
		return fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("must be a JSON object, got %s", jsonKind(te.Value))
		}
		return fmt.Sprintf("field %q must be %s, got %s", te.Field, goKind(te), jsonKind(te.Value))
	default:
		return err.Error()
	}
}

// position returns the 1-based line and column (in characters) of byte offset at in data.
func position(data []byte, at int) (line, col int) {
	at = min(at, len(data))
	before := data[:at]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// goKind names the JSON kind expected for the destination of a type error.
func goKind(te *json.UnmarshalTypeError) string {
	t := te.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}

// jsonKind renders the Value of an UnmarshalTypeError ("bool", "number 1.5", ...).
func jsonKind(v string) string {
	if v == "bool" {
		return "boolean"
	}
	return v
}

func pick(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}
