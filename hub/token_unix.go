//go:build !windows

package hub

import (
	"fmt"
	"io/fs"
)

// checkBotTokenMode refuses a bot token file that is not a regular file of
// mode 0600 exactly.
func checkBotTokenMode(path string, fi fs.FileInfo) error {
	if fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
		return fmt.Errorf("bot token file %s has mode %s; it must be a regular file with mode 0600 (chmod 600 %s)", path, fi.Mode(), path)
	}
	return nil
}

// privateFileHint is what to run to make path private, after an error that
// says it is not: the mode error above says it already.
func privateFileHint(string) string { return "" }
