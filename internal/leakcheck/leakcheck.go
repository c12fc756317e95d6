// Package leakcheck fails a test binary that leaves leash goroutines
// running after its tests: a renewal scheduler, a pub/sub reader or a round
// that was never stopped. Call Check from TestMain after m.Run.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Check waits up to five seconds for goroutines running leash code to end,
// and returns a non-zero exit code (after printing their stacks) if any
// remain. It returns code unchanged when it is already non-zero.
func Check(code int) int {
	if code != 0 {
		return code
	}
	var leaked []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		leaked = leashGoroutines()
		if len(leaked) == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "leakcheck: %d leash goroutines still running after the tests:\n\n%s\n",
		len(leaked), strings.Join(leaked, "\n\n"))
	return 1
}

func leashGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/leash-go/leash") &&
			!strings.Contains(g, "leakcheck.") && !strings.Contains(g, "testing.(*M).") &&
			!strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}
