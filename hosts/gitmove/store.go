package gitmove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"
)

// scratch is one transfer's private directory (0700, under Limits.TempDir)
// and the bundle file in it (0600). close removes both.
type scratch struct {
	dir    string
	bundle string
}

func (l Limits) newScratch() (*scratch, error) {
	dir, err := os.MkdirTemp(l.TempDir, "gitmove-") // 0700
	if err != nil {
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	// The bundle path is absolute: git resolves a relative one against the
	// repository it runs in.
	if dir, err = filepath.Abs(dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	return &scratch{dir: dir, bundle: filepath.Join(dir, "bundle")}, nil
}

func (s *scratch) close() { os.RemoveAll(s.dir) }

// create opens the bundle file for writing, 0600.
func (s *scratch) create() (*os.File, error) {
	f, err := os.OpenFile(s.bundle, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create bundle file: %w", err)
	}
	return f, nil
}

// bundleTo runs `git bundle create - revs…` in dir into the scratch bundle
// file and returns its size. A bundle over the limit stops git and is
// ErrTooLarge.
func (l Limits) bundleTo(ctx context.Context, s *scratch, dir string, revs ...string) (int64, error) {
	f, err := s.create()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := &capWriter{w: f, n: l.maxBundle()}
	_, err = l.run(ctx, gitCmd{dir: dir, args: append([]string{"bundle", "create", "-q", "-"}, revs...), out: w})
	if w.over {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.maxBundle())
	}
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write bundle file: %w", err)
	}
	return l.maxBundle() - w.n, nil
}

// upload puts the scratch bundle into store under key.
func (l Limits) upload(ctx context.Context, store ObjectStore, s *scratch, key string) error {
	ctx, cancel := context.WithTimeout(ctx, l.transferTimeout())
	defer cancel()
	f, err := os.Open(s.bundle)
	if err != nil {
		return fmt.Errorf("store bundle %s: %w", key, err)
	}
	defer f.Close()
	if _, err := store.Put(ctx, jetstream.ObjectMeta{Name: key}, f); err != nil {
		return fmt.Errorf("store bundle %s: %w", key, err)
	}
	return nil
}

// download reads the object key of store into the scratch bundle file and
// returns its size. It refuses an object that is a link (into another
// bucket, or to another name: a host could otherwise hand the fleet another
// host's bundle) and one over the limit, whatever the object's recorded
// size says. The store checks the object's digest at its end.
func (l Limits) download(ctx context.Context, store ObjectStore, key string, s *scratch) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.transferTimeout())
	defer cancel()
	st, err := store.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("read bundle %s: %w", key, err)
	}
	res, err := store.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("read bundle %s: %w", key, err)
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return 0, fmt.Errorf("read bundle %s: %w", key, err)
	}
	if info.Bucket != st.Bucket() || info.Name != key || (info.Opts != nil && info.Opts.Link != nil) {
		return 0, fmt.Errorf("read bundle %s: %w: the object is a link to %s/%s", key, ErrBadBundle, info.Bucket, info.Name)
	}
	max := l.maxBundle()
	if info.Size > uint64(max) {
		return 0, fmt.Errorf("read bundle %s: %w: %d bytes, the limit is %d", key, ErrTooLarge, info.Size, max)
	}
	f, err := s.create()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(res, max+1))
	if n > max {
		return 0, fmt.Errorf("read bundle %s: %w: more than %d bytes", key, ErrTooLarge, max)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrDigestMismatch) {
			err = fmt.Errorf("%w: %w", ErrBadBundle, err)
		}
		return 0, fmt.Errorf("read bundle %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("read bundle %s: %w", key, err)
	}
	return n, nil
}
