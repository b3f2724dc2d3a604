package sqlitefile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// TestPrepareFile: a missing file is created empty with mode 0600, an empty
// or SQLite file is accepted as it is, and anything else is refused with
// the right error and left untouched.
func TestPrepareFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	if err := PrepareFile(path); err != nil {
		t.Fatalf("PrepareFile(missing) = %v", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 0 {
		t.Errorf("created file has %d bytes", st.Size())
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("created file mode %v, want 0600", st.Mode().Perm())
	}
	if err := PrepareFile(path); err != nil {
		t.Errorf("PrepareFile(empty) = %v", err)
	}

	for _, tc := range []struct {
		name    string
		content string
		want    error
	}{
		{"database", Header + "rest of the page", nil},
		{"exact header", Header, nil},
		{"garbage", "not a database, just text\n", ErrNotDatabase},
		{"short prefix", Header[:6], ErrNotDatabase},
		{"short garbage", "SQLx", ErrNotDatabase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.db")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := PrepareFile(p); err != tc.want {
				t.Fatalf("PrepareFile = %v, want %v", err, tc.want)
			}
			if b, _ := os.ReadFile(p); string(b) != tc.content {
				t.Error("the file was modified")
			}
		})
	}

	if err := PrepareFile(dir); err != ErrNotRegular {
		t.Errorf("PrepareFile(directory) = %v, want ErrNotRegular", err)
	}
	if err := PrepareFile(filepath.Join(dir, "missing", "x.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PrepareFile(missing directory) = %v, want ErrNotExist", err)
	}
}

func TestFileURI(t *testing.T) {
	for abs, want := range map[string]string{
		"/a/b/fleet.db":     "file:///a/b/fleet.db",
		"/a b/x?y#z%.db":    "file:///a%20b/x%3Fy%23z%25.db",
		"/":                 "file:///",
		"C:/Users/u/x.db":   "file:///C:/Users/u/x.db",
		"/tmp/fleet-1/f.db": "file:///tmp/fleet-1/f.db",
	} {
		if got := FileURI(abs); got != want {
			t.Errorf("FileURI(%q) = %q, want %q", abs, got, want)
		}
	}
}

// openDB opens the file at path, PrepareFile'd first when prepare, with
// the URI parameters params; the test closes it.
func openDB(t *testing.T, path string, prepare bool, params string) *sql.DB {
	t.Helper()
	if prepare {
		if err := PrepareFile(path); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", FileURI(path)+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestOpenWAL: a file PrepareFile made opens writable through FileURI with
// a '?' and a '#' in its path, SetWAL switches it to WAL, and the same file
// opened read-only fails CheckWritable.
func TestOpenWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c.db")
	db := openDB(t, path, true, "?mode=rw")
	SingleConn(db)
	ctx := context.Background()
	if err := CheckWritable(ctx, db); err != nil {
		t.Fatalf("CheckWritable = %v", err)
	}
	if err := SetWAL(ctx, db, time.Second); err != nil {
		t.Fatalf("SetWAL = %v", err)
	}
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	if err := SetWAL(ctx, db, time.Second); err != nil {
		t.Fatalf("SetWAL again = %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at its path: %v", err)
	}
	if err := CheckWritable(ctx, openDB(t, path, false, "?mode=ro")); err != ErrReadOnly {
		t.Fatalf("CheckWritable(read-only) = %v, want ErrReadOnly", err)
	}
}

// TestSetWALBusy: while another connection holds the database locked,
// SetWAL retries until its timeout and then returns the busy error.
func TestSetWALBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	ctx := context.Background()
	conn, err := openDB(t, path, true, "?mode=rw").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE t (x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `ROLLBACK`)

	start := time.Now()
	err = SetWAL(ctx, openDB(t, path, false, "?mode=rw"), 100*time.Millisecond)
	if !IsBusy(err) || !IsBusy(fmt.Errorf("wrapped: %w", err)) {
		t.Fatalf("SetWAL under a lock = %v, want a busy error", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("SetWAL gave up after %v, before its timeout", d)
	}
}

// TestIsBusy: only SQLite's busy errors, wrapped or not, are busy (the
// busy case itself is TestSetWALBusy's).
func TestIsBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(path, []byte("not a database, just text, long enough to be read as a header\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, notADB := openDB(t, path, false, "").Exec(`CREATE TABLE t (x)`)
	var se *sqlite.Error
	if !errors.As(notADB, &se) || se.Code()&0xff != sqlite3.SQLITE_NOTADB {
		t.Fatalf("garbage file: %v, want SQLITE_NOTADB", notADB)
	}
	for _, err := range []error{nil, errors.New("database is locked (5) (SQLITE_BUSY)"), notADB, fmt.Errorf("wrapped: %w", notADB)} {
		if IsBusy(err) {
			t.Errorf("IsBusy(%v) = true", err)
		}
	}
}
