package testserver

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestPostgresLifecycle starts a server, pauses it (an open connection gets
// no answer, nor does a new one) and resumes it, restarts it on the same
// port, and checks that Close removes its directory.
func TestPostgresLifecycle(t *testing.T) {
	p := NewPostgres(t, PostgresOptions{})
	c, r, err := pgConnect(p.Addr)
	if err != nil {
		t.Fatalf("started server not ready: %v", err)
	}
	defer c.Close()
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := pgReady(p.Addr); err == nil {
		t.Errorf("paused server answered a startup")
	}
	query := "SELECT 1\x00"
	msg := append(binary.BigEndian.AppendUint32([]byte{'Q'}, uint32(len(query)+4)), query...)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if _, err := r.Peek(1); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("paused server's open connection answered a query (%v)", err)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(startTimeout))
	if err := pgAwaitReady(r); err != nil {
		t.Errorf("resumed server did not answer the query: %v", err)
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
