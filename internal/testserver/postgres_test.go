package testserver

import (
	"os"
	"testing"
)

// TestPostgresLifecycle starts a server, pauses and resumes it, restarts it
// on the same port, and checks that Close removes its directory.
func TestPostgresLifecycle(t *testing.T) {
	p := NewPostgres(t, PostgresOptions{})
	if err := pgReady(p.Addr); err != nil {
		t.Fatalf("started server not ready: %v", err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := pgReady(p.Addr); err == nil {
		t.Errorf("paused server answered a startup")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return pgReady(p.Addr) == nil }) {
		t.Fatalf("resumed server not ready")
	}
	port := p.Port
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if p.Port != port || pgReady(p.Addr) != nil {
		t.Errorf("restarted server on port %d (was %d), ready %v", p.Port, port, pgReady(p.Addr))
	}
	p.Close()
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", p.Dir, err)
	}
}
