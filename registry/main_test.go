package registry

import (
	"testing"

	"go.uber.org/goleak"
)

// On Windows go-winio completes every pipe's I/O in one goroutine, started
// with the first pipe and never stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Microsoft/go-winio.ioCompletionProcessor"))
}
