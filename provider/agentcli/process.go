package agentcli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/agents-fleet/fleet/internal/proctree"
)

// Process is a running agent CLI as a session uses it: its three streams,
// its end, and a way to end it with everything it started. Start gives a
// local one (Proc); a session on another machine supplies its own (its
// streams over a connection), and a Conn runs on it unchanged.
type Process interface {
	// Stdin is the CLI's input. Closing it asks an idle CLI to exit.
	Stdin() Input
	// Stdout and Stderr are its output. Closing one ends a read in
	// progress.
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
	// Wait blocks until the CLI ended and says how (an *exec.ExitError
	// for a local process that failed). It is called once.
	Wait() error
	// Kill ends the CLI and everything it started, however detached, so
	// that Wait returns. It is safe to call at any time, more than once,
	// from any goroutine.
	Kill()
}

// Input is a CLI's stdin: writes take a deadline, so that a CLI that
// stopped reading fails a write instead of blocking its writer. An
// *os.File pipe and a net.Conn are Inputs.
type Input interface {
	io.WriteCloser
	SetWriteDeadline(t time.Time) error
}

// Command is an agent CLI to start locally.
type Command struct {
	Path string
	Args []string // without the program name
	Dir  string
	Env  []string // complete; Start adds the tree's mark
	// Tree marks the process tree; nil takes a fresh one. An adapter that
	// needs the mark before the command line is built makes its own.
	Tree *proctree.Tree
}

// Proc is a local agent CLI: the leader of a process group of its own,
// its environment marked with its proctree.Tree so that Kill ends what it
// started in other groups and sessions too. Its pipes are its own rather
// than exec's: stdout is read until EOF, which a descendant holding the
// pipe can delay past the CLI's exit, so Wait must not close it under the
// reader; and stdin's end takes write deadlines.
type Proc struct {
	cmd                   *exec.Cmd
	tree                  *proctree.Tree
	stdin, stdout, stderr *os.File // our ends
}

var _ Process = (*Proc)(nil)

// Start starts c with its three pipes.
func Start(c Command) (*Proc, error) {
	tree := c.Tree
	if tree == nil {
		tree = proctree.New()
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = tree.Env(c.Env)
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(pipes[:2*i])
			return nil, fmt.Errorf("%s pipe: %w", name, err)
		}
		pipes[2*i], pipes[2*i+1] = r, w
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0], pipes[3], pipes[5]
	err := tree.Start(cmd)
	// The child has its copies; ours go, so that EOF can arrive.
	closeFiles([]*os.File{pipes[0], pipes[3], pipes[5]})
	if err != nil {
		closeFiles([]*os.File{pipes[1], pipes[2], pipes[4]})
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	return &Proc{cmd: cmd, tree: tree, stdin: pipes[1], stdout: pipes[2], stderr: pipes[4]}, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (p *Proc) Stdin() Input          { return p.stdin }
func (p *Proc) Stdout() io.ReadCloser { return p.stdout }
func (p *Proc) Stderr() io.ReadCloser { return p.stderr }
func (p *Proc) Wait() error           { return p.cmd.Wait() }
func (p *Proc) Kill()                 { p.tree.Kill(p.cmd) }

// Args is the command line, program name first.
func (p *Proc) Args() []string { return p.cmd.Args }

// Alive lists the live processes of the tree, the CLI's included (on
// Linux; nil elsewhere).
func (p *Proc) Alive() []int { return p.tree.Alive() }

// leader is the CLI's pid, which is its process group's id.
func (p *Proc) leader() int { return p.cmd.Process.Pid }

// SweepMarked ends the processes whose environment has name=value and
// their process groups, sparing the CLI's own group: what a turn started
// while the CLI lives on. It returns how many it found (none off Linux).
func (p *Proc) SweepMarked(name, value string) int {
	return proctree.SweepMarked(name, value, p.leader())
}
