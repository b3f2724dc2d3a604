// Package gitmove moves a worker's work between the fleet and a worker host
// by git, never by file sync: git bundles through a JetStream object store.
//
// The fleet sends the base commit a worker starts from (SendBase), bundled
// against what the host's cache for that repository already has. The host
// keeps one bare repository per repository it works on (Caches, Cache),
// takes the base into it (ReceiveBase), makes the worker's worktree from it
// (Worktree), and after every agent turn and at the end sends the worker's
// branch back, bundled against the base (SendBranch). The fleet fetches that
// bundle into the user's repository as the worker's branch
// fleet/<session>/<worker> (FetchBranch), touching no work tree and no other
// branch.
//
// Everything is bounded: bundles by Limits.MaxBundle, each git command by
// Limits.GitTimeout, each transfer by Limits.TransferTimeout. Bundles wait
// on disk in 0600 files in a fresh 0700 directory that is removed after use.
// git runs with a clean environment: no system or global configuration, no
// hooks, no replace refs, no network transports. A bundle from a host is
// untrusted: it is verified, its objects are checked (fsck) as they are
// fetched, only its one named ref is taken, into a private ref, and the
// branch is then moved with a compare-and-swap. See docs/hosts.md, "Work
// moves by git".
package gitmove

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/worktree"
)

// Sentinel errors, returned wrapped with what they concern; test with
// errors.Is.
var (
	// ErrTooLarge: a bundle is over Limits.MaxBundle. Nothing was stored or
	// applied.
	ErrTooLarge = errors.New("bundle over the size limit")
	// ErrBadKey: an object key is not one gitmove makes, or not of the kind
	// expected (a base where a branch was due, another worker's branch).
	ErrBadKey = errors.New("invalid bundle key")
	// ErrBadBundle: the object is not a bundle this transfer accepts: git
	// cannot read or verify it, it carries other refs than the one expected,
	// or its objects are corrupt. Nothing was changed.
	ErrBadBundle = errors.New("bundle refused")
	// ErrMissingPrerequisites: the cache lacks commits the base bundle was
	// made against (the host's have list was stale, or its cache was
	// deleted). Send the base again with the cache's current Have.
	ErrMissingPrerequisites = errors.New("cache lacks the bundle's prerequisite commits")
	// ErrMissingCommit: the cache does not hold the commit a worktree should
	// start from; receive its base first.
	ErrMissingCommit = errors.New("commit not in the cache")
	// ErrNotDescendant: a worker branch whose tip does not descend from the
	// base it was given (history rewritten below the base). The fleet's
	// diff, merge and retry measure from that base, so such a branch is not
	// carried.
	ErrNotDescendant = errors.New("branch does not descend from its base")
	// ErrExists: the worktree directory or the worker branch already exists
	// in the cache.
	ErrExists = errors.New("worktree or branch already exists")
	// ErrCheckedOut: the worker branch is checked out in a work tree of the
	// user's repository; moving it would change that work tree's files.
	ErrCheckedOut = errors.New("branch is checked out in a work tree")
)

// Defaults for the zero Limits.
const (
	DefaultMaxBundle       = 1 << 30
	DefaultGitTimeout      = 10 * time.Minute
	DefaultTransferTimeout = 30 * time.Minute
)

// Limits bounds a transfer. The zero value takes the defaults above and
// os.TempDir.
type Limits struct {
	// MaxBundle is the largest bundle made, stored or accepted, in bytes.
	MaxBundle int64
	// GitTimeout bounds each git command.
	GitTimeout time.Duration
	// TransferTimeout bounds each upload to or download from the store.
	TransferTimeout time.Duration
	// TempDir is where bundles wait on disk, each transfer in a directory of
	// its own (0700) that is removed when it ends. "" is os.TempDir.
	TempDir string
}

func (l Limits) maxBundle() int64 {
	if l.MaxBundle > 0 {
		return l.MaxBundle
	}
	return DefaultMaxBundle
}

func (l Limits) gitTimeout() time.Duration {
	if l.GitTimeout > 0 {
		return l.GitTimeout
	}
	return DefaultGitTimeout
}

func (l Limits) transferTimeout() time.Duration {
	if l.TransferTimeout > 0 {
		return l.TransferTimeout
	}
	return DefaultTransferTimeout
}

// ObjectStore is what gitmove needs of a JetStream object store bucket
// (jetstream.ObjectStore has it): Status names the bucket, so an object
// that is a link into another bucket can be refused.
type ObjectStore interface {
	Put(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) (*jetstream.ObjectInfo, error)
	Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error)
	Status(ctx context.Context) (jetstream.ObjectStoreStatus, error)
}

// Sent is a bundle put into the store.
type Sent struct {
	// Key is the object's name, unique per send. "" when nothing had to
	// move: SendBase found the commit in what the host has, SendBranch
	// found the branch at the tip the fleet acknowledged.
	Key string
	// Commit is what the bundle brings: the base commit, or the branch tip.
	Commit string
	// Size is the bundle's size in bytes.
	Size int64
	// Full: SendBase had nothing of the host's to build on, so the bundle
	// holds the whole history of the commit.
	Full bool
}

// Key kinds: the first element of every key.
const (
	baseKind = "base" // base/<commit>/<nonce>
	workKind = "work" // work/fleet/<session>/<worker>/<nonce>
)

const maxKey = 255

var (
	keyElemRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	oidRE     = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
)

// ValidKey reports whether key is a name gitmove could have made: at most
// 255 bytes of slash-separated elements of [A-Za-z0-9._-], each starting
// with a letter or digit, none containing "..". Such a key names no parent
// directory, no absolute path, nothing outside ASCII.
func ValidKey(key string) error {
	if key == "" || len(key) > maxKey {
		return fmt.Errorf("%w %q: want 1-%d bytes", ErrBadKey, key, maxKey)
	}
	for elem := range strings.SplitSeq(key, "/") {
		if !keyElemRE.MatchString(elem) || strings.Contains(elem, "..") {
			return fmt.Errorf("%w %q: want /-separated elements of [A-Za-z0-9._-], each starting with a letter or digit, no \"..\"", ErrBadKey, key)
		}
	}
	return nil
}

// newKey returns kind/elems…/<nonce>, the nonce making every send's key
// its own: a receiver never reads a bundle another send is replacing.
func newKey(kind string, elems ...string) (string, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("make bundle key: %w", err)
	}
	key := kind + "/" + strings.Join(append(elems, hex.EncodeToString(nonce[:])), "/")
	return key, ValidKey(key)
}

// baseKeyCommit returns the commit a base key names: base/<commit>/<nonce>.
func baseKeyCommit(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", err
	}
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] != baseKind || !oidRE.MatchString(parts[1]) {
		return "", fmt.Errorf("%w %q: want %s/<commit>/<nonce>", ErrBadKey, key, baseKind)
	}
	return parts[1], nil
}

// checkWorkKey checks that key is a branch bundle of branch:
// work/<branch>/<nonce>.
func checkWorkKey(key, branch string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(key, workKind+"/"+branch+"/")
	if !ok || strings.Contains(rest, "/") {
		return fmt.Errorf("%w %q: want %s/%s/<nonce>", ErrBadKey, key, workKind, branch)
	}
	return nil
}

// validBranch checks that branch is a fleet worker branch
// fleet/<session>/<worker>, the only branches gitmove moves.
func validBranch(branch string) error {
	parts := strings.Split(branch, "/")
	if len(parts) != 3 || parts[0] != "fleet" {
		return fmt.Errorf("invalid worker branch %q: want fleet/<session>/<worker>", branch)
	}
	if err := worktree.ValidSession(parts[1]); err != nil {
		return fmt.Errorf("invalid worker branch %q: %w", branch, err)
	}
	if err := worktree.ValidWorker(parts[2]); err != nil {
		return fmt.Errorf("invalid worker branch %q: %w", branch, err)
	}
	return nil
}

// validOID checks that s is a full object id (SHA-1 or SHA-256, lower-case
// hex): what arrives from a host goes on git's command line only so.
func validOID(what, s string) error {
	if !oidRE.MatchString(s) {
		return fmt.Errorf("invalid %s %q: want a full lower-case hex object id", what, s)
	}
	return nil
}

// short abbreviates a commit for messages.
func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}
