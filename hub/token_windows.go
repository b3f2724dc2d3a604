package hub

import (
	"fmt"
	"io/fs"
)

// checkBotTokenMode refuses a bot token file that is not a regular file.
// Mode bits mean nothing on Windows (Go reports every file 0666 or 0444):
// registry.ReadToken checks the file's owner and access list instead.
func checkBotTokenMode(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("bot token file %s is not a regular file", path)
	}
	return nil
}

// privateFileHint is what to run to make path private to the user, after
// an error that says it is not: a file in a user's profile lets
// Administrators in, by inheritance.
func privateFileHint(path string) string {
	return fmt.Sprintf(` (make it yours alone: icacls "%s" /inheritance:r /grant:r "%%USERNAME%%:F")`, path)
}
