package registry

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/testdir"
)

// badToken is a token file ReadToken refuses: setup makes it at p, and the
// error names want.
type badToken struct {
	name  string
	setup func(p string)
	want  string
}

func TestTokens(t *testing.T) {
	dir := testdir.New(t)
	path := filepath.Join(dir, "1-a.token")
	tok, err := WriteToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok) {
		t.Errorf("token %q is not 64 hex chars", tok)
	}
	assertPrivate(t, path)
	if got, err := ReadToken(path); err != nil || got != tok {
		t.Errorf("ReadToken = %q, %v; want %q", got, err, tok)
	}
	if _, err := WriteToken(path); err == nil {
		t.Error("WriteToken over an existing token succeeded")
	}
	if got, _ := ReadToken(path); got != tok {
		t.Error("failed WriteToken changed the token")
	}
	other, err := WriteToken(filepath.Join(dir, "2-a.token"))
	if err != nil || other == tok {
		t.Errorf("second token %q, %v", other, err)
	}

	bad := append(platformBadTokens(t, path, tok),
		badToken{"too large", func(p string) { writePrivate(t, p, strings.Repeat("a", MaxTokenSize+1)) }, "over the limit of 4096 bytes"},
		badToken{"empty", func(p string) { writePrivate(t, p, " \n") }, "is empty"},
		badToken{"directory", func(p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		badToken{"missing", func(string) {}, noSuchFile},
	)
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(testdir.New(t), "x.token")
			tt.setup(p)
			_, err := ReadToken(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadToken = %v, want %q", err, tt.want)
			}
		})
	}

	p := filepath.Join(testdir.New(t), "ws.token")
	writePrivate(t, p, "  "+tok+"\n")
	if got, err := ReadToken(p); err != nil || got != tok {
		t.Errorf("ReadToken(whitespace) = %q, %v", got, err)
	}
}

// writePrivate writes content to a new file p that only the user can
// open, made as WriteToken makes a token.
func writePrivate(t *testing.T, p, content string) {
	t.Helper()
	f, err := openNoFollow(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}
