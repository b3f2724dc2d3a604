//go:build unix

package store

import (
	"errors"
	"syscall"
)

// spaceHint describes a write that failed for want of space; "" otherwise.
func spaceHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "the disk is full"
	case errors.Is(err, syscall.EFBIG):
		return "the file size limit was reached (or the disk is full)"
	}
	return ""
}
