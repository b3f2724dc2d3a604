//go:build windows

package local

import (
	"encoding/base64"
	"encoding/binary"
	"os/exec"
	"strings"
	"syscall"
	"unicode/utf16"
)

// systemShells are the shells that run here; the first is the default.
// sh is a Windows port's (Git for Windows, MSYS2) found in PATH.
var systemShells = []string{"cmd", "powershell", "sh"}

// crlf says whether output lines end with CR LF: yes, and the CR goes with
// the LF.
const crlf = true

// shellCommand returns how shell (checked by CheckShell) runs command.
func shellCommand(shell, command string) (*shellCmd, error) {
	switch shell {
	case "powershell":
		return powershellCommand(command)
	case "sh":
		return shCommand(command)
	}
	return cmdCommand(command)
}

// cmdCommand runs command with `cmd /d /s /c "command"`, the command line
// given as is (SysProcAttr.CmdLine): Go's argument quoting would turn each
// " into \", which cmd does not read. With /s, cmd drops the first and the
// last quote and runs what is between verbatim, whatever quotes it holds;
// /d skips the AutoRun commands of the registry, so a task runs the same
// on every machine.
//
// A command of several lines (or with a NUL, which no command line can
// hold) runs from a batch file instead, `@echo off` first as a command
// line does not echo: batch rules apply then (%% for a literal %). cmd
// refuses a line over 8,191 characters either way, and says so.
func cmdCommand(command string) (*shellCmd, error) {
	line, cleanup := command, func() {}
	if strings.ContainsAny(command, "\r\n\x00") {
		path, rm, err := scriptFile("command.cmd", batchFile(command))
		if err != nil {
			return nil, err
		}
		line, cleanup = `"`+path+`"`, rm
	}
	cmd := exec.Command("cmd.exe")
	cmd.SysProcAttr = &syscall.SysProcAttr{CmdLine: `cmd.exe /d /s /c "` + line + `"`}
	return &shellCmd{cmd: cmd, name: "cmd.exe", eol: "\r\n", cleanup: cleanup}, nil
}

// batchFile is command as a batch file: echo off, then its lines, each
// ended by CR LF (cmd mis-reads labels and jumps in files with bare LFs).
func batchFile(command string) []byte {
	lines := strings.Split(strings.ReplaceAll(command, "\r\n", "\n"), "\n")
	return []byte("@echo off\r\n" + strings.Join(lines, "\r\n") + "\r\n")
}

// maxEncodedCommand bounds -EncodedCommand's argument: Windows command
// lines end at 32,767 characters.
const maxEncodedCommand = 30000

// powershellCommand runs command with Windows PowerShell as
// -EncodedCommand, the command's UTF-16 in base64: powershell.exe splits
// its command line into arguments and joins them again, which drops the
// quotes of a plain -Command (`echo "a b"` would print two lines), so the
// encoding is what carries the command verbatim, line breaks included. A
// command too long for that is read from a script file by a short encoded
// command that dot-sources it (as -Command runs it: same scope, no script
// execution policy).
//
// -NonInteractive makes a cmdlet that would prompt fail rather than wait
// on stdin, which carries the ::ask:: answers: a script reads one with
// [Console]::In.ReadLine(). -InputFormat None keeps powershell.exe from
// reading stdin for itself, which can keep it from exiting while stdin is
// open.
func powershellCommand(command string) (*shellCmd, error) {
	enc, cleanup := encodePowerShell(command), func() {}
	if len(enc) > maxEncodedCommand {
		path, rm, err := scriptFile("command.ps1", []byte(command))
		if err != nil {
			return nil, err
		}
		enc, cleanup = encodePowerShell(". ([ScriptBlock]::Create([IO.File]::ReadAllText('"+strings.ReplaceAll(path, "'", "''")+"')))"), rm
	}
	cmd := exec.Command("powershell.exe")
	cmd.SysProcAttr = &syscall.SysProcAttr{CmdLine: "powershell.exe -NoLogo -NoProfile -NonInteractive -InputFormat None -EncodedCommand " + enc}
	return &shellCmd{cmd: cmd, name: "powershell.exe", eol: "\r\n", cleanup: cleanup}, nil
}

// encodePowerShell is script as -EncodedCommand takes it: base64 of its
// UTF-16LE.
func encodePowerShell(script string) string {
	u := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return base64.StdEncoding.EncodeToString(b)
}
