package faultproxy_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/leash-go/leash/internal/faultproxy"
	"github.com/leash-go/leash/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Check(m.Run())) }

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// patient bounds a round trip that must succeed: a hang, not a slow
// machine, should trip it. Round trips that must fail keep short bounds (a
// slow machine only makes those time out sooner).
const patient = 30 * time.Second

// roundTrip sends a line and waits up to d for its echo.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		return errors.New("garbled echo " + line)
	}
	return err
}

func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestForwards(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	if err := roundTrip(c, r, patient); err != nil {
		t.Fatalf("round trip through a healthy proxy: %v", err)
	}
}

func TestBlackholeIsSilentUntilHealed(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	if err := roundTrip(c, r, patient); err != nil { // the link is established
		t.Fatal(err)
	}
	p.Blackhole()
	var ne net.Error
	if err := roundTrip(c, r, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("round trip in a black hole = %v, want a timeout (silence, not an error)", err)
	}
	if p.Conns() != 1 {
		t.Errorf("open connections in a black hole = %d, want 1 (kept open)", p.Conns())
	}
	p.Heal()
	c2, r2 := dial(t, p)
	if err := roundTrip(c2, r2, patient); err != nil {
		t.Fatalf("round trip on a new connection after Heal: %v", err)
	}
}

func TestLatency(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c, r, patient); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("round trip with 100ms latency each way took %v, want at least 200ms", d)
	}
}

func TestResetAndRefuse(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	if err := roundTrip(c, r, patient); err != nil { // the link is established
		t.Fatal(err)
	}
	p.Reset()
	if err := roundTrip(c, r, time.Second); err == nil {
		t.Fatalf("round trip on a reset connection succeeded")
	}
	p.Refuse()
	if c2, err := net.Dial("tcp", p.Addr); err == nil { // the reset may already fail the connect
		err = roundTrip(c2, bufio.NewReader(c2), time.Second)
		c2.Close()
		if err == nil {
			t.Fatalf("round trip on a refused connection succeeded")
		}
	}
	p.Heal()
	c3, r3 := dial(t, p)
	if err := roundTrip(c3, r3, patient); err != nil {
		t.Fatalf("round trip after Heal: %v", err)
	}
}

// TestBlackholeRepliesDeliversRequests checks that requests still arrive
// while their answers are swallowed.
func TestBlackholeRepliesDeliversRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got <- line
			_, _ = c.Write([]byte(line))
		}
	}()
	p, err := faultproxy.New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, r := dial(t, p)
	p.BlackholeReplies()
	var ne net.Error
	if err := roundTrip(c, r, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("round trip with replies black-holed = %v, want a timeout", err)
	}
	select {
	case line := <-got:
		if line != "ping\n" {
			t.Errorf("server got %q, want the request", line)
		}
	case <-time.After(patient):
		t.Fatalf("the request did not reach the server")
	}
}
