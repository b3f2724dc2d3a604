package local

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/agents-fleet/fleet/config"
)

// CheckShell says whether shell, a Provider.Shell, runs commands on this
// system.
func CheckShell(shell string) error {
	switch {
	case shell == "" || slices.Contains(systemShells, shell):
		return nil
	case slices.Contains(config.LocalShells, shell):
		return fmt.Errorf("the %s shell does not run on %s (here: %s)", shell, runtime.GOOS, strings.Join(systemShells, ", "))
	}
	return fmt.Errorf("unknown shell %q (known: %s)", shell, strings.Join(config.LocalShells, ", "))
}

// shellCmd is a task's command ready to start with its shell.
type shellCmd struct {
	cmd  *exec.Cmd
	name string // the shell's program, for errors
	// eol ends an answer written to the command's stdin: the newline the
	// shell reads lines up to.
	eol string
	// cleanup removes a script file the command runs from; it is called
	// once the command and its group are gone.
	cleanup func()
}

// maxArgCommand is the longest command passed to sh as its -c argument.
// The kernel refuses longer arguments (Linux: 128 KiB for one, about 2 MiB
// for all of them with the environment: "argument list too long"), and
// none may hold a NUL byte; such a command is run from a script file
// instead (shArgs).
const maxArgCommand = 32 << 10

// shCommand runs command with `sh -c`.
func shCommand(command string) (*shellCmd, error) {
	args, cleanup, err := shArgs(command)
	if err != nil {
		return nil, err
	}
	return &shellCmd{cmd: exec.Command("sh", args...), name: "sh", eol: "\n", cleanup: cleanup}, nil
}

// shArgs returns sh's arguments for command: `-c command`, or for a long
// one `-c '. FILE'`, FILE a private copy of the command (scriptFile).
// Sourcing it from -c keeps what a command sees as in `sh -c`: $0 is the
// shell, there are no positional parameters, and stdin is still the
// channel ::ask:: answers arrive on.
func shArgs(command string) (args []string, cleanup func(), err error) {
	if len(command) <= maxArgCommand && !strings.ContainsRune(command, 0) {
		return []string{"-c", command}, func() {}, nil
	}
	path, cleanup, err := scriptFile("command.sh", []byte(command))
	if err != nil {
		return nil, nil, err
	}
	// Forward slashes: a Windows sh (Git's, MSYS2's) reads them too.
	path = filepath.ToSlash(path)
	return []string{"-c", ". '" + strings.ReplaceAll(path, "'", `'\''`) + "'"}, cleanup, nil
}

// scriptFile writes a private script file, name in a directory of its own
// (0600 in 0700 on Unix; on Windows the user's temporary folder is the
// user's alone), and returns its path and what removes both.
func scriptFile(name string, content []byte) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "fleet-command-")
	if err != nil {
		return "", nil, fmt.Errorf("write the command to a script file: %w", err)
	}
	path = filepath.Join(dir, name)
	// The file, then its directory: os.RemoveAll alone fails under Wine.
	cleanup = func() { os.Remove(path); os.RemoveAll(dir) }
	if err := os.WriteFile(path, content, 0o600); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("write the command to a script file: %w", err)
	}
	return path, cleanup, nil
}
