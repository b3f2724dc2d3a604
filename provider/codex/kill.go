package codex

// commandSweeper is what an interrupt needs of the CLI's process: a way to
// end the commands Codex ran for the model (every process whose
// environment carries commandEnv=mark, however it detached) and their
// process groups, sparing the app-server's own group. A local
// agentcli.Proc is one.
type commandSweeper interface {
	SweepMarked(name, value string) int
}

// sweepCommands ends the commands the session's turns left running: after
// turn/interrupt Codex keeps a running command alive, and the session must
// go on. Where the process cannot sweep (or off Linux, where a local one
// finds nothing) those commands end with the process tree at Close.
func (s *session) sweepCommands() {
	if s.cli == nil {
		return
	}
	if sw, ok := s.cli.Process().(commandSweeper); ok {
		sw.SweepMarked(commandEnv, s.mark)
	}
}
