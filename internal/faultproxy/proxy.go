// Package faultproxy is a TCP proxy for fault-injection tests: put one
// between each client and its server, then add latency, reset connections,
// black-hole traffic (accept and keep connections open, but never answer),
// or refuse new connections. Faults apply to every connection of one proxy,
// so a test gives each client its own proxy to partition clients one by one.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from Addr to an upstream address.
type Proxy struct {
	// Addr is the proxy's listening address, "127.0.0.1:<port>".
	Addr     string
	upstream string
	ln       net.Listener

	mu        sync.Mutex
	links     map[*link]struct{}
	accepted  int  // links made, ever
	blackhole bool // both directions
	dropDown  bool // server to client only
	refuse    bool
	latency   time.Duration
	closed    bool
	wg        sync.WaitGroup
}

// A link is one proxied connection.
type link struct {
	client, server net.Conn
}

// New starts a proxy to upstream on a free loopback port.
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, links: make(map[*link]struct{})}
	// Owner: the Proxy. Stops when Close closes the listener.
	p.wg.Go(p.accept)
	return p, nil
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			resetConn(c)
			continue
		}
		s, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
		if err != nil {
			resetConn(c)
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(c)
			s.Close()
			continue
		}
		p.links[l] = struct{}{}
		p.accepted++
		p.mu.Unlock()
		// Owner: the link. Each stops when either side of the link closes.
		p.wg.Go(func() { p.pipe(l, c, s, false) })
		p.wg.Go(func() { p.pipe(l, s, c, true) })
	}
}

// pipe copies src to dst, applying the proxy's faults to each chunk; down
// is true for the server-to-client direction.
func (p *Proxy) pipe(l *link, src, dst net.Conn, down bool) {
	defer p.drop(l)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			blackhole, latency := p.blackhole || (down && p.dropDown), p.latency
			p.mu.Unlock()
			if latency > 0 {
				time.Sleep(latency)
			}
			if !blackhole { // a black hole swallows the bytes: they are lost
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.client.Close()
	l.server.Close()
}

// resetConn closes c with a TCP RST instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// Blackhole makes the proxy swallow all traffic in both directions, on open
// and new connections, while keeping them open: the peers see silence, not
// an error, until Heal.
func (p *Proxy) Blackhole() { p.set(func() { p.blackhole = true }) }

// BlackholeReplies makes the proxy swallow only what the server sends, on
// open and new connections: requests still reach the server and take
// effect, but their answers never arrive. This is how an operation becomes
// ambiguous to its client: done on the server, timed out on the client.
func (p *Proxy) BlackholeReplies() { p.set(func() { p.dropDown = true }) }

// Heal ends a black hole and refusal, and removes latency. Bytes swallowed by
// the black hole stay lost, so a protocol stream that lost bytes is broken:
// clients must (and do) replace such connections.
func (p *Proxy) Heal() {
	p.set(func() { p.blackhole, p.dropDown, p.refuse, p.latency = false, false, false, 0 })
}

// SetLatency delays every chunk of data by d in each direction.
func (p *Proxy) SetLatency(d time.Duration) { p.set(func() { p.latency = d }) }

// Refuse resets new connections at once (open ones are untouched).
func (p *Proxy) Refuse() { p.set(func() { p.refuse = true }) }

// Reset closes every open connection with a TCP RST, as a crashed peer or a
// middlebox would. New connections are accepted as usual.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		resetConn(l.client)
		resetConn(l.server)
	}
}

// Conns returns the number of open proxied connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Accepted returns the number of connections proxied since the start,
// closed ones included: a test sees a client dial anew even when it closed
// a connection for it.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	f()
	p.mu.Unlock()
}

// Close stops the proxy and resets every connection. It is safe to call more
// than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

var _ io.Closer = (*Proxy)(nil)
