//go:build unix

package native

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

const (
	dbEnv    = "FLEET_NATIVE_TEST_DB"
	roundEnv = "FLEET_NATIVE_TEST_ROUND"
)

// TestHelperCrashWriter is the child of TestCrashKill9: four goroutines
// send pause/resume mutations on the bound root (at the revision they last
// saw; conflicts are retried) and print each acknowledged operationId, after
// its receipt came back, until the process is killed.
func TestHelperCrashWriter(t *testing.T) {
	if os.Getenv(helperEnv) != "writer" {
		t.Skip("helper process for TestCrashKill9")
	}
	ctx := context.Background()
	st, err := Open(os.Getenv(dbEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := New(ctx, st, "crash", Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	root := c.BoundRoot()
	var out sync.Mutex
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				s := c.Handle(ctx, &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: root})
				action := protocol.NativePause
				if s.Root.Intent == "pause" {
					action = protocol.NativeResume
				}
				op := fmt.Sprintf("r%s-g%d-%d", os.Getenv(roundEnv), g, i)
				res := c.Handle(ctx, &protocol.NativeRequest{Action: action, RootID: root, OperationID: op, ExpectedRevision: &s.Root.Revision})
				if res.Kind == protocol.NativeKindReceipt {
					out.Lock()
					fmt.Fprintln(os.Stdout, op)
					out.Unlock()
				}
			}
		}()
	}
	select {}
}

func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := t.TempDir() + "/state/native.db"
	acked := map[string]bool{}
	for round, killAfter := range []int{1, 17, 64, 150, 400} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashWriter$", "-test.v=false")
		cmd.Env = append(os.Environ(), helperEnv+"=writer", dbEnv+"="+path, fmt.Sprint(roundEnv, "=", round))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if len(line) == 0 || line[0] != 'r' {
				continue
			}
			acked[line] = true
			n++
			if n == killAfter {
				// Vary the moment within the storm, not only the count.
				time.Sleep(time.Duration(round*300) * time.Microsecond)
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		err = cmd.Wait()
		if n < killAfter {
			t.Fatalf("round %d: child ended after %d acks: %v", round, n, err)
		}
		checkCrashState(t, path, acked, round)
	}
}

// checkCrashState reopens the database and checks that every acknowledged
// operation has its receipt, and that the root's state is exactly what its
// receipts say: revision = 1 + number of receipts (gap-free), intent = the
// newest receipt's.
func checkCrashState(t *testing.T, path string, acked map[string]bool, round int) {
	t.Helper()
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := New(t.Context(), st, "crash", Options{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	var revs []int64
	var last string
	rows, err := st.r.Query(`SELECT operation_id, revision, action FROM receipts WHERE root_id = ? ORDER BY revision`, c.BoundRoot())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var op string
		var r int64
		rows.Scan(&op, &r, &last)
		stored[op] = true
		revs = append(revs, r)
	}
	rows.Close()
	for op := range acked {
		if !stored[op] {
			t.Fatalf("round %d: acknowledged %s has no receipt", round, op)
		}
	}
	for i, r := range revs {
		if r != int64(i+2) {
			t.Fatalf("round %d: receipt revisions have a gap at %d: %d", round, i, r)
		}
	}
	s := c.Handle(t.Context(), &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: c.BoundRoot()}).Root
	if s.Revision != int64(len(revs)+1) {
		t.Fatalf("round %d: revision %d but %d receipts", round, s.Revision, len(revs))
	}
	want := "run"
	if last == protocol.NativePause {
		want = "pause"
	}
	if s.Intent != want {
		t.Fatalf("round %d: intent %q, newest receipt %q", round, s.Intent, last)
	}
	t.Logf("round %d: %d acknowledged so far, %d receipts", round, len(acked), len(revs))
}
