package hub

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/agents-fleet/fleet/config"
)

// DefaultAPIBaseURL is the public Bot API.
const DefaultAPIBaseURL = "https://api.telegram.org"

// Flags are the fleet hub flags a user set; nil or empty means not set.
type Flags struct {
	BotTokenFile string
	AllowedChats []int64
	APIBaseURL   string
	Verbosity    string
}

// Resolve builds the hub's Config from the flags, which win, and the
// telegramHub object of config.json. It reads the bot token, so a missing
// allowedChatIds or a token file that is not the user's 0600 file is
// refused here, before anything starts.
func Resolve(home string, file config.File, fl Flags) (Config, error) {
	var th config.TelegramHub
	if file.TelegramHub != nil {
		th = *file.TelegramHub
	}
	cfg := Config{
		FleetHome:    home,
		RegistryDir:  config.RegistryDir(home),
		APIBaseURL:   cmp.Or(fl.APIBaseURL, th.APIBaseURL, DefaultAPIBaseURL),
		AllowedChats: th.AllowedChatIDs,
		AllowedUsers: th.AllowedUserIDs,
	}
	if len(fl.AllowedChats) > 0 {
		cfg.AllowedChats = fl.AllowedChats
	}
	if len(cfg.AllowedChats) == 0 {
		return Config{}, errors.New("telegramHub.allowedChatIds is missing or empty: the hub only talks to chats you list; set it in " +
			config.Path(home) + " or pass --allowed-chat-id (repeatable)")
	}
	v, err := ParseVerbosity(cmp.Or(fl.Verbosity, th.Verbosity))
	if err != nil {
		return Config{}, fmt.Errorf("--verbosity / telegramHub.verbosity: %w", err)
	}
	cfg.Verbosity = v
	u, err := url.Parse(cfg.APIBaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, fmt.Errorf("--api-base-url / telegramHub.apiBaseUrl %q is not an http(s) URL", cfg.APIBaseURL)
	}
	// A relative --bot-token-file is from the working directory; a
	// relative botTokenFile in config.json is from the fleet home.
	path := fl.BotTokenFile
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	} else if path = th.BotTokenFile; path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(home, path)
	}
	if cfg.Token, err = ReadBotToken(path); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
