//go:build !linux

package memtrim

// dropImage does nothing where the executable's pages cannot be dropped
// by this package.
func dropImage() {}
