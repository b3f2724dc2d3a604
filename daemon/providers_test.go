package daemon

import (
	"runtime"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/provider/local"
)

// providers.local.shell reaches the local provider, and a shell this
// system lacks stops the fleet before it starts, saying which.
func TestLocalShellFromConfig(t *testing.T) {
	native, foreign := "sh", "cmd"
	if runtime.GOOS == "windows" {
		native, foreign = "cmd", "sh"
	}
	file := config.File{Providers: map[string]config.ProviderConfig{"local": {Shell: native}}}
	p, err := BuildProviders(Selection{Provider: "local"}, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Default.(*local.Provider).Shell; got != native {
		t.Fatalf("the local provider's shell is %q, want %q from config", got, native)
	}
	if runtime.GOOS == "windows" {
		return // a Windows with sh on PATH runs it
	}
	file.Providers["local"] = config.ProviderConfig{Shell: foreign}
	_, err = BuildProviders(Selection{Provider: "local"}, file, nil)
	if err == nil || !strings.Contains(err.Error(), "providers.local.shell") || !strings.Contains(err.Error(), foreign) {
		t.Fatalf("BuildProviders with shell %q = %v; want an error naming providers.local.shell and the shell", foreign, err)
	}
}
