//go:build unix

package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests re-execute the test binary as a child process: helperEnv says
// which helper the child runs, dbEnv and sessionEnv what it opens.
const (
	helperEnv  = "FLEET_STORE_TEST_HELPER"
	dbEnv      = "FLEET_STORE_TEST_DB"
	sessionEnv = "FLEET_STORE_TEST_SESSION"
	fsizeEnv   = "FLEET_STORE_TEST_FSIZE"
)

// crashBatch is the batch the crash-test writer appends as number n: lines
// transcript lines, one conversation entry, one hub event, a task and the
// "batch" counter set to n, so the counter says how many batches committed.
const crashLines = 40

func crashBatch(n int64) []Record {
	recs := make([]Record, 0, crashLines+4)
	for i := range crashLines {
		recs = append(recs, line(fmt.Sprint("w", (n+int64(i/10))%5), fmt.Sprintf("b%d/%d %s", n, i, strings.Repeat("x", 60)), n))
	}
	return append(recs,
		Record{Conversation: &ConversationEntry{Role: "assistant", Text: fmt.Sprint("b", n), Ts: n}},
		Record{Hub: &HubEvent{From: "coordinator", Kind: "task.updated", Text: fmt.Sprint("b", n), Ts: n}},
		Record{Task: &Task{ID: fmt.Sprint("t", n%7), Status: "running", UpdatedAt: n}},
		Record{Counter: &Counter{Name: "batch", Value: n}})
}

// crashLinesOnly is the batch of transcript lines only that the writer
// appends after batch n: crashOnly lines "t<n>/<i>".
const crashOnly = 10

func crashLinesOnly(n int64) []Record {
	recs := make([]Record, 0, crashOnly)
	for i := range crashOnly {
		recs = append(recs, line(fmt.Sprint("w", (n+int64(i))%5), fmt.Sprintf("t%d/%d", n, i), n))
	}
	return recs
}

// TestHelperWriter is the child of TestCrashSafety: it appends batches
// forever, printing each batch number on stdout after Append returned (the
// journal's "broadcast after commit"), until it is killed.
func TestHelperWriter(t *testing.T) {
	if os.Getenv(helperEnv) != "writer" {
		t.Skip("helper process for TestCrashSafety")
	}
	ctx := context.Background()
	// Ingest all the time, so that the kill also lands inside moves of
	// the transcript log into SQLite.
	ingestDefaults = ingestLimits{idle: time.Millisecond, maxAge: 10 * time.Millisecond, bytes: 32 << 10}
	s, err := Open(os.Getenv(dbEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	id := os.Getenv(sessionEnv)
	l, err := s.Load(ctx, id, Limits{-1, -1, -1, -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := l.Counters["batch"]
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		n++
		if err := s.Append(ctx, id, crashBatch(n)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		if _, err := fmt.Fprintln(os.Stdout, n); err != nil {
			os.Exit(4)
		}
		// A batch of transcript lines only (task output): it goes to the
		// log alone.
		if err := s.Append(ctx, id, crashLinesOnly(n)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		if _, err := fmt.Fprintln(os.Stdout, "t", n); err != nil {
			os.Exit(4)
		}
	}
	os.Exit(5) // never killed: the parent has gone
}

// TestCrashSafety kills a writer process with SIGKILL at five different
// moments and checks "told ⇒ stored": every batch the child reported after
// Append returned is in the database, and no batch is there in part.
func TestCrashSafety(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	createT(t, s, newSession("crash", 1))
	s.Close()

	toldOnly := make(map[int64]bool) // lines-only batches reported, every round
	for round, reads := range []int{150, 220, 300, 380, 460} {
		if raceEnabled {
			reads /= 5
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=writer", dbEnv+"="+path, sessionEnv+"=crash")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		var told int64
		parse := func() {
			if v, ok := strings.CutPrefix(sc.Text(), "t "); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					toldOnly[n] = true
				}
			} else if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil && n > told {
				told = n
			}
		}
		read := 0
		for read < reads && sc.Scan() {
			parse()
			read++
		}
		if read < reads {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child stopped after %d lines: %s", round, read, stderr.String())
		}
		// Land the kill at an arbitrary point of a batch.
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() { // what the child printed before it died was told too
			parse()
		}
		io.Copy(io.Discard, stdout)
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, not SIGKILL: %s", round, err, stderr.String())
		}

		s, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill -9: %v", round, err)
		}
		l, err := s.Load(t.Context(), "crash", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		stored := l.Counters["batch"]
		lines, err := s.TranscriptCount(t.Context(), "crash")
		if err != nil {
			t.Fatal(err)
		}
		all, err := s.Load(t.Context(), "crash", Limits{TranscriptPerAgent: 1 << 30, Conversation: -1, Hub: -1})
		if err != nil {
			t.Fatal(err)
		}
		var lastToldLines, bLines int64
		onlyLines := make(map[int64]int) // lines-only batch → its lines
		for _, lines := range all.Transcripts {
			for _, ln := range lines {
				if strings.HasPrefix(ln.Text, fmt.Sprintf("b%d/", told)) {
					lastToldLines++
				}
				if strings.HasPrefix(ln.Text, "b") {
					bLines++
				}
				if v, ok := strings.CutPrefix(ln.Text, "t"); ok {
					n, _ := strconv.ParseInt(v[:strings.IndexByte(v, '/')], 10, 64)
					onlyLines[n]++
				}
			}
		}
		// Lines-only batches: every one told is there, each one whole.
		for n := range toldOnly {
			if onlyLines[n] != crashOnly {
				t.Errorf("round %d: lines-only batch %d was told but has %d lines, want %d", round, n, onlyLines[n], crashOnly)
			}
		}
		for n, c := range onlyLines {
			if c != crashOnly {
				t.Errorf("round %d: lines-only batch %d is partial: %d lines", round, n, c)
			}
		}
		if lines != bLines+int64(len(onlyLines))*crashOnly {
			t.Errorf("round %d: TranscriptCount %d, but %d lines read", round, lines, bLines+int64(len(onlyLines))*crashOnly)
		}
		lines = bLines
		distinct := querySQL(t, s.r, `SELECT count(DISTINCT text) FROM conversation`)
		t.Logf("round %d: told %d, stored %d batches (%d transcript lines), %d lines-only batches", round, told, stored, lines, len(onlyLines))
		switch {
		case stored < told:
			t.Errorf("round %d: told ⇒ stored violated: the child reported batch %d, the database has %d", round, told, stored)
		case lines != stored*crashLines || int64(l.ConversationTotal) != stored || distinct != stored:
			t.Errorf("round %d: partial batch: %d batches but %d lines, %d conversation entries (%d distinct)",
				round, stored, lines, l.ConversationTotal, distinct)
		case lastToldLines != crashLines:
			t.Errorf("round %d: batch %d has %d lines, want %d", round, told, lastToldLines, crashLines)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelperOpen is the child of TestReadOnlyRefused: it opens the database
// and prints "OK" or "ERR <error>".
func TestHelperOpen(t *testing.T) {
	if os.Getenv(helperEnv) != "open" {
		t.Skip("helper process for TestReadOnlyRefused")
	}
	if v := os.Getenv(fsizeEnv); v != "" {
		// Simulate a full disk: writes past this size fail with EFBIG (Go
		// ignores SIGXFSZ).
		n, _ := strconv.ParseUint(v, 10, 64)
		var lim syscall.Rlimit
		syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim)
		lim.Cur = n
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Println("SETUP " + err.Error())
			return
		}
	}
	s, err := Open(os.Getenv(dbEnv))
	if err != nil {
		fmt.Println("ERR " + err.Error())
		return
	}
	defer s.Close()
	// Append until the disk is "full" (or a few MB were written).
	for i := range 64 {
		recs := transcriptBatch(512)
		if i == 0 {
			recs = []Record{line("child", "written by the child", 1)}
		}
		if err := s.Append(context.Background(), os.Getenv(sessionEnv), recs); err != nil {
			fmt.Println("ERR append: " + err.Error())
			return
		}
		if os.Getenv(fsizeEnv) == "" {
			break
		}
	}
	fmt.Println("OK")
}

// unprivileged runs TestHelperOpen as a user that file modes apply to. As
// root (which ignores them) that is uid/gid 65534 (nobody), so the test
// binary is copied where nobody can run it and the state directory is
// handed to nobody; as any other user it is the user itself.
type unprivileged struct {
	base, bin string
	cred      *syscall.Credential
}

func newUnprivileged(t *testing.T) *unprivileged {
	t.Helper()
	if os.Geteuid() != 0 {
		return &unprivileged{base: t.TempDir(), bin: os.Args[0]}
	}
	base, err := os.MkdirTemp("", "fleet-store-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	u := &unprivileged{base: base, bin: filepath.Join(base, "store.test"), cred: &syscall.Credential{Uid: 65534, Gid: 65534}}
	src, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return u
}

// own hands paths to the unprivileged user.
func (u *unprivileged) own(t *testing.T, paths ...string) {
	t.Helper()
	if u.cred == nil {
		return
	}
	for _, p := range paths {
		if err := os.Chown(p, int(u.cred.Uid), int(u.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

// open runs Open(path) in the child and returns its verdict line.
func (u *unprivileged) open(t *testing.T, path, session string, env ...string) string {
	t.Helper()
	cmd := exec.Command(u.bin, "-test.run=^TestHelperOpen$", "-test.count=1")
	cmd.Dir = u.base
	cmd.Env = append(os.Environ(), helperEnv+"=open", dbEnv+"="+path, sessionEnv+"="+session)
	cmd.Env = append(cmd.Env, env...)
	if u.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	}
	out, err := cmd.CombinedOutput()
	for l := range strings.Lines(string(out)) {
		if strings.HasPrefix(l, "OK") || strings.HasPrefix(l, "ERR ") {
			return strings.TrimSpace(l)
		}
	}
	if u.cred != nil && err != nil {
		t.Skipf("cannot run the helper as uid %d: %v: %s", u.cred.Uid, err, out)
	}
	t.Fatalf("helper: %v: %s", err, out)
	return ""
}

// TestReadOnlyRefused opens an existing database whose directory or file is
// read-only: Open must fail with an error naming the path, leave the file
// as it was, and a later read-write Open must find the data intact.
func TestReadOnlyRefused(t *testing.T) {
	for _, c := range []struct {
		name              string
		dirMode, fileMode os.FileMode
		hint              string
	}{
		{"read-only directory", 0o500, 0o600, "is not writable (SQLite needs it"},
		{"read-only file", 0o700, 0o400, "the database file is not writable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUnprivileged(t)
			dir := filepath.Join(u.base, "state")
			path := filepath.Join(dir, "fleet.db")
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			createT(t, s, newSession("s1", 1))
			appendT(t, s, "s1", line("w1", "kept", 1), Record{Counter: &Counter{Name: "n", Value: 7}})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			u.own(t, dir, path)
			// The child can write when the modes allow it (so the failure
			// below is the modes' doing).
			if got := u.open(t, path, "s1"); got != "OK" {
				t.Fatalf("writable database: child says %q", got)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700); os.Chmod(path, 0o600) })
			if err := os.Chmod(path, c.fileMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, c.dirMode); err != nil {
				t.Fatal(err)
			}
			before := fileBytes(t, path)

			got := u.open(t, path, "s1")
			t.Log(got)
			if !strings.HasPrefix(got, "ERR open store "+path+": ") || !strings.Contains(got, c.hint) {
				t.Errorf("Open = %q; want an error naming %s and saying %q", got, path, c.hint)
			}
			if !bytes.Equal(before, fileBytes(t, path)) {
				t.Error("the database file changed")
			}

			os.Chmod(dir, 0o700)
			os.Chmod(path, 0o600)
			s = openT(t, path)
			l := loadT(t, s, "s1", Limits{})
			if len(l.Transcripts["w1"]) != 1 || len(l.Transcripts["child"]) != 1 || l.Counters["n"] != 7 {
				t.Errorf("data after the refused open: %+v", l)
			}
		})
	}
}

// TestReadOnlyDirectoryNewDatabase: creating a database in a read-only
// directory fails with an error naming the path and leaves no file behind.
func TestReadOnlyDirectoryNewDatabase(t *testing.T) {
	u := newUnprivileged(t)
	dir := filepath.Join(u.base, "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	u.own(t, dir)
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	path := filepath.Join(dir, "fleet.db")
	got := u.open(t, path, "s1")
	t.Log(got)
	if !strings.HasPrefix(got, "ERR open store "+path+": directory "+dir+" is not writable") {
		t.Errorf("Open = %q", got)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a database file was created")
	}
}

// TestDiskFull fills the "disk" (RLIMIT_FSIZE in a child process, which
// SQLite sees as an I/O error where a real full disk gives SQLITE_FULL):
// Open of a new database and Append to an existing one fail with errors that
// name the file and say so, and what was committed stays intact, in whole
// batches.
func TestDiskFull(t *testing.T) {
	u := &unprivileged{base: t.TempDir(), bin: os.Args[0]}
	t.Run("open", func(t *testing.T) {
		path := filepath.Join(u.base, "new.db")
		got := u.open(t, path, "s1", fsizeEnv+"=2048")
		t.Log(got)
		if !strings.HasPrefix(got, "ERR open store "+path+": I/O error on the database file (is the disk full?)") {
			t.Errorf("Open = %q", got)
		}
	})
	t.Run("append", func(t *testing.T) {
		path := filepath.Join(u.base, "fleet.db")
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		createT(t, s, newSession("s1", 1))
		appendT(t, s, "s1", line("kept", "kept", 1))
		s.Close()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		got := u.open(t, path, "s1", fmt.Sprint(fsizeEnv, "=", st.Size()+256<<10))
		t.Log(got)
		// The lines go to the transcript log first, so that write is the
		// one that fails (the hint the same as SQLite's would be).
		if !strings.HasPrefix(got, "ERR append: append to session s1: "+path+": the file size limit was reached (or the disk is full): transcript log ") {
			t.Errorf("Append = %q", got)
		}
		s = openT(t, path)
		l := loadT(t, s, "s1", Limits{})
		n, _ := s.TranscriptCount(t.Context(), "s1")
		if len(l.Transcripts["kept"]) != 1 || len(l.Transcripts["child"]) != 1 || n%512 != 2 || n < 2+512 {
			t.Errorf("after the full disk: %d lines (want 2 + whole batches of 512), kept %+v", n, l.Transcripts["kept"])
		}
	})
}
