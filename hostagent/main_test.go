package hostagent

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine of the hub, the leaf node and their connections ends
// when they are closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
