package jsoneval

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// TestColdFirstPass measures the first decode of the corpus in a fresh
// process (type caches empty: encoding/json's field cache, goccy's compiled
// codecs, sonic's JIT) against a warm pass, for each library. Each sample is
// a child process running this test binary; the median of 5 is logged. A
// server decodes few client frames, so the cold cost is paid on the first
// frames of each type after start. Skipped with -short.
func TestColdFirstPass(t *testing.T) {
	if name := os.Getenv("JSONEVAL_COLD"); name != "" {
		coldChild(name)
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	names := []string{"protocol.Decode"}
	for _, c := range codecs {
		names = append(names, c.name)
	}
	var rows []string
	for _, name := range names {
		var cold, warm []time.Duration
		for range 5 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestColdFirstPass$")
			cmd.Env = append(os.Environ(), "JSONEVAL_COLD="+name)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out)
			}
			var c, w int64
			line := out[strings.Index(string(out), "COLD "):]
			if _, err := fmt.Sscanf(string(line), "COLD %d WARM %d", &c, &w); err != nil {
				t.Fatalf("%s: %v in %q", name, err, out)
			}
			cold = append(cold, time.Duration(c))
			warm = append(warm, time.Duration(w))
		}
		slices.Sort(cold)
		slices.Sort(warm)
		rows = append(rows, fmt.Sprintf("%-16s first pass %9v   warm pass %9v", name, cold[2], warm[2]))
	}
	t.Logf("corpus decode in a fresh process, median of 5 (47 frames, 29 types):\n%s", strings.Join(rows, "\n"))
}

// coldChild decodes the corpus twice and prints both times.
func coldChild(name string) {
	corpus, _ := loadCorpus(&testing.T{})
	decode := func(f frame) error { _, err := protocol.Decode(f.data); return err }
	for _, c := range codecs {
		if c.name == name {
			decode = func(f frame) error { return c.unmarshal(f.data, f.new()) }
		}
	}
	pass := func() time.Duration {
		start := time.Now()
		for _, f := range corpus {
			if err := decode(f); err != nil {
				fmt.Println("ERROR", f.name, err)
				os.Exit(1)
			}
		}
		return time.Since(start)
	}
	cold := pass()
	pass() // settle
	warm := pass()
	fmt.Println("COLD " + strconv.FormatInt(int64(cold), 10) + " WARM " + strconv.FormatInt(int64(warm), 10))
}
