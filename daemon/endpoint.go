package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/registry"
)

// endpoint is the published control socket: token file, listener, and the
// discovery descriptor once registered.
type endpoint struct {
	id, socketPath, tokenPath, registryDir string
	token                                  string
	ln                                     net.Listener
	registered                             bool
}

// openEndpoint prunes stale descriptors, creates the private control
// directory, the token file and the listening socket. The descriptor is
// written later, by register, once the server is serving.
func openEndpoint(home string, logger *slog.Logger) (*endpoint, error) {
	regDir := config.RegistryDir(home)
	if removed, err := registry.PruneStale(regDir); err != nil {
		logger.Warn("pruning stale descriptors", "err", err)
	} else if len(removed) > 0 {
		logger.Info("removed stale fleet descriptors", "ids", removed)
	}
	id, err := registry.NewID(os.Getpid())
	if err != nil {
		return nil, err
	}
	ep := &endpoint{
		id:          id,
		socketPath:  registry.SocketPath(home, id),
		tokenPath:   registry.TokenPath(home, id),
		registryDir: regDir,
	}
	if err := registry.CheckSocketPath(ep.socketPath); err != nil {
		return nil, err
	}
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		return nil, err
	}
	if ep.token, err = registry.WriteToken(ep.tokenPath); err != nil {
		return nil, err
	}
	if ep.ln, err = controlsock.Listen(ep.socketPath); err != nil {
		os.Remove(ep.tokenPath)
		return nil, err
	}
	return ep, nil
}

// claimName claims base as the fleet's name in the registry, or the next
// free numbered name (saying so on stderr). A name given with --name is
// not numbered: it is refused when another fleet has it.
func claimName(home, base string, given bool, cwd string, stderr io.Writer) (string, func(), error) {
	dir := config.RegistryDir(home)
	name, release, err := registry.ClaimName(dir, base)
	if err != nil || name == base {
		return name, release, err
	}
	other := fmt.Sprintf("another fleet named %q is starting", base)
	if entries, err := registry.Live(dir); err == nil {
		for _, e := range entries {
			if e.Name != base {
				continue
			}
			if e.Cwd == cwd {
				other = fmt.Sprintf("another fleet %q runs in this folder", base)
			} else {
				other = fmt.Sprintf("another fleet %q runs, in %q", base, e.Cwd)
			}
			if given {
				other += fmt.Sprintf(", id %s", e.ID)
			}
			break
		}
	}
	if given {
		release()
		return "", nil, fmt.Errorf("--name %q: %s; choose another name", base, other)
	}
	fmt.Fprintf(stderr, "fleet: %s; this one is %q\n", other, name)
	return name, release, nil
}

func (ep *endpoint) register(d registry.Descriptor) error {
	if _, err := registry.Write(ep.registryDir, d); err != nil {
		return fmt.Errorf("register fleet: %w", err)
	}
	ep.registered = true
	return nil
}

func (ep *endpoint) unregister(logger *slog.Logger) {
	if !ep.registered {
		return
	}
	ep.registered = false
	if err := registry.Remove(ep.registryDir, ep.id); err != nil {
		logger.Warn("remove descriptor", "err", err)
	}
}

// close removes everything the endpoint put on disk.
func (ep *endpoint) close(logger *slog.Logger) {
	ep.unregister(logger)
	ep.ln.Close()
	for _, p := range []string{ep.socketPath, ep.tokenPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			logger.Warn("remove", "path", p, "err", err)
		}
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
