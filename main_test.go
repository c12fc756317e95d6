package leash_test

import (
	"os"
	"testing"

	"github.com/leash-go/leash/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Check(m.Run())) }
