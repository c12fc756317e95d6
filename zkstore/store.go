package zkstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

// DefaultRoot is the znode under which a Store keeps its nodes unless
// Options.Root says otherwise.
const DefaultRoot = "/leash"

// DefaultSessionTimeout is the session timeout Dial asks for unless
// Options.SessionTimeout says otherwise: it covers leash's default 30 s
// lease, and is ZooKeeper's default maxSessionTimeout (20 ticks of 2 s).
const DefaultSessionTimeout = 40 * time.Second

// DefaultTickTime is the servers' tickTime a Store assumes unless
// Options.TickTime says otherwise: ZooKeeper's own default (3 s), longer
// than the 2 s of its sample configuration.
const DefaultTickTime = 3 * time.Second

// Options configures a Store. The zero value (or nil) means all defaults.
type Options struct {
	// Root is the znode under which the Store keeps its nodes: Root/locks,
	// Root/clients, Root/clock, Root/records and Root/jobs (see the package
	// documentation). Default
	// DefaultRoot. It must be an absolute ZooKeeper path other than "/".
	Root string
	// SessionTimeout is the session timeout to ask the server for, for the
	// Store's own session and every Client's (default
	// DefaultSessionTimeout); the server clamps it to its
	// [minSessionTimeout, maxSessionTimeout], and the Store learns the
	// timeout the server granted from the connection handshake. Acquire
	// refuses a lease longer than it.
	SessionTimeout time.Duration
	// TickTime is the servers' tickTime (zoo.cfg), or a longer duration
	// (default DefaultTickTime). In an ensemble the leader expires
	// sessions, and hears of a client's requests to a follower only when
	// it next pings that follower, every half tick: the Store allows a tick
	// for that, and so keeps each lock valid at most (T − TickTime)/2
	// after the keep-alive or grant that proved it, for a session timeout
	// T (see the package documentation, "The session is the lease"). The
	// Store assumes the leader pings each follower within a tick; a
	// TickTime longer than the servers' allows for the leader's pauses.
	TickTime time.Duration
	// Servers are, for New, the ZooKeeper servers ("host:port") on which
	// the Store opens each Client's session; New requires them. Dial uses
	// its own servers and ignores this.
	Servers []string
	// ACL is the ACL of the znodes the Store creates. Default
	// zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
}

// Store is a leash store on ZooKeeper (see the package documentation): a
// [driver.Store] of every kind ([driver.KindStore], [driver.Withdrawer],
// [driver.PermitSetter]), [driver.Watcher], [driver.SessionStore],
// [driver.MultiStore], [driver.Admin], [driver.ClientRecorder] and
// [driver.JobStore]. It is safe for concurrent use.
type Store struct {
	conn    *zk.Conn // the Store's own session: reads, watches, administration
	owned   bool     // Close closes conn
	servers []string // where each Client's session is opened
	digest  string   // "user:password" digest credentials, or ""
	root    string
	locks   string // root/locks: one directory per lock name
	clients string // root/clients: written by keep-alives
	clock   string // root/clock: written to read the server's clock, for places and records
	records string // root/records: one holder record per client id
	acl     []zk.ACL
	desc    string

	// timeout is the session timeout in milliseconds the server last
	// granted (every session asks for the same).
	timeout atomic.Int64
	// requested is the session timeout Dial asked for, for messages.
	requested time.Duration
	// tick is Options.TickTime: how long a follower may take to tell the
	// leader of a request (see heard.go).
	tick time.Duration

	closed    chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	rootDone bool
	jobsDone bool                      // Root/jobs was found or created, and is leash's
	sessions map[string]*clientSession // by client id: its ZooKeeper session
	dirs     map[string]dirData        // lock directory → its data, as last read or written
	held     map[heldKey]string        // the hold node of each lock this Store granted and has not released

	slow     atomic.Int64 // requests Renew has checked by reading their nodes
	reproved atomic.Int64 // grants that wrote on their session first and waited a tick (prove)

	// ignoreEvents makes Renew take a hold node's watch as proof even after
	// it fired: set by tests only, as a negative control.
	ignoreEvents bool
	// trustQuiet makes every keep-alive and grant count as proven (see
	// heard.go): set by tests only, as a negative control.
	trustQuiet bool
}

var (
	_ driver.Store        = (*Store)(nil)
	_ driver.Watcher      = (*Store)(nil)
	_ driver.SessionStore = (*Store)(nil)
	_ driver.Admin        = (*Store)(nil)
	_ driver.Validator    = (*Store)(nil)
	_ driver.StoreCloser  = (*Store)(nil)
	_ driver.NameChecker  = (*Store)(nil)
	_ fmt.Stringer        = (*Store)(nil)
	_ driver.KindStore    = (*Store)(nil)
	_ driver.Withdrawer   = (*Store)(nil)
	_ driver.PermitSetter = (*Store)(nil)
	_ driver.MultiStore   = (*Store)(nil)
	_ driver.Drifter      = (*Store)(nil)
)

// New returns a Store that reads, watches and administers through conn, a
// connection the caller opened with zk.Connect and keeps (Close does not
// close it), and opens each Client's session on opts.Servers, which it
// requires (Validate reports their absence): a lock is an ephemeral node of
// its Client's own session, never of conn's.
func New(conn *zk.Conn, opts *Options) *Store {
	s := newStore(opts)
	s.conn = conn
	if opts != nil {
		s.servers = append([]string(nil), opts.Servers...)
	}
	return s
}

// Dial connects to the ZooKeeper servers ("host:port") with a session of
// its own for reads, watches and administration, which Close ends, and
// opens each Client's session there on its first Acquire. It returns
// before the session is established; the first request waits for it.
func Dial(servers []string, opts *Options) (*Store, error) {
	s := newStore(opts)
	if err := s.checkOptions(); err != nil {
		return nil, err
	}
	if len(servers) == 0 {
		return nil, errors.New("zkstore: no ZooKeeper server to dial")
	}
	s.servers = append([]string(nil), servers...)
	conn, err := s.connect(nil)
	if err != nil {
		return nil, err
	}
	s.conn, s.owned = conn, true
	return s, nil
}

func newStore(opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if o.ACL == nil {
		o.ACL = zk.WorldACL(zk.PermAll)
	}
	requested := DefaultSessionTimeout
	if o.SessionTimeout > 0 {
		requested = o.SessionTimeout
	}
	tick := DefaultTickTime
	if o.TickTime != 0 {
		tick = o.TickTime
	}
	root := strings.TrimSuffix(o.Root, "/")
	if root == "" {
		root = o.Root // "/", refused by checkOptions
	}
	return &Store{
		root:      root,
		locks:     root + "/locks",
		clients:   root + "/clients",
		clock:     root + "/clock",
		records:   root + "/records",
		acl:       o.ACL,
		desc:      "zkstore(" + root + ")",
		closed:    make(chan struct{}),
		sessions:  make(map[string]*clientSession),
		dirs:      make(map[string]dirData),
		held:      make(map[heldKey]string),
		requested: requested,
		tick:      tick,
	}
}

// checkOptions reports a bad Root or TickTime.
func (s *Store) checkOptions() error {
	if s.tick <= 0 {
		return fmt.Errorf("zkstore: Options.TickTime %v is not positive", s.tick)
	}
	if s.root == "/" || !strings.HasPrefix(s.root, "/") || strings.Contains(s.root, "//") {
		return fmt.Errorf("zkstore: Options.Root %q is not an absolute ZooKeeper path other than \"/\"", s.root)
	}
	for _, seg := range strings.Split(s.root[1:], "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("zkstore: Options.Root %q has a %q segment", s.root, seg)
		}
	}
	return nil
}

// Validate implements driver.Validator: it reports a nil connection, a bad
// Root, or (for New) a missing session timeout.
func (s *Store) Validate() error {
	if s.conn == nil {
		return errors.New("zkstore: nil *zk.Conn")
	}
	if err := s.checkOptions(); err != nil {
		return err
	}
	if len(s.servers) == 0 {
		return errors.New("zkstore: Options.Servers is required by New: each Client's locks live on a ZooKeeper session of its own, opened there")
	}
	return nil
}

// String names the store in messages.
func (s *Store) String() string { return s.desc }

// Conn returns the Store's own ZooKeeper connection, which reads, watches
// and administers; no lock is a node of its session.
func (s *Store) Conn() *zk.Conn { return s.conn }

// SessionTimeout returns the session timeout that bounds every lease: the
// one the server last granted (0 until a session of the Store is first
// established).
func (s *Store) SessionTimeout() time.Duration {
	return time.Duration(s.timeout.Load()) * time.Millisecond
}

// Close ends every Client's session (every lock they hold is released at
// once, and waiters are woken) and the session of a Store from Dial; for a
// Store from New it leaves the caller's connection open. It is safe to call
// more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.closed)
		var all []*clientSession
		for _, cs := range s.sessions {
			all = append(all, cs)
		}
		s.mu.Unlock()
		for _, cs := range all {
			s.end(cs)
		}
		if s.owned {
			s.conn.Close()
		}
	})
	return nil
}

// CheckName implements driver.NameChecker. Every name leash accepts maps
// onto one znode name (see the package documentation), so it accepts all.
func (s *Store) CheckName(string) error { return nil }

// dialer dials a server and reads the session timeout the server granted
// from the handshake's reply.
func (s *Store) dialer(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c, s: s}, nil
}

// handshakeConn reads the negotiated session timeout from the first bytes a
// server sends: the connect response, [length int32][protocol version
// int32][timeout int32][session id int64][password]. go-zookeeper reads a
// connection from one goroutine at a time.
type handshakeConn struct {
	net.Conn
	s    *Store
	n    int
	head [12]byte
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.n < len(c.head) && n > 0 {
		c.n += copy(c.head[c.n:], p[:n])
		if c.n == len(c.head) {
			if ms := int32(binary.BigEndian.Uint32(c.head[8:12])); ms > 0 {
				c.s.timeout.Store(int64(ms))
			}
		}
	}
	return n, err
}

// call runs f, a go-zookeeper request, and returns its result, or ctx's
// error as soon as ctx is done: go-zookeeper's requests take no context.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	// Owner: call. go-zookeeper answers every request (with an error when
	// its connection ends), so the goroutine ends after an abandoned call too.
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// nothing is call's result for requests that return only an error.
type nothing struct{}

func call0(ctx context.Context, f func() error) error {
	_, err := call(ctx, func() (nothing, error) { return nothing{}, f() })
	return err
}

// Ping checks that the ensemble answers, with one read (of the root znode
// "/"): go-zookeeper connects in the background, so a Store whose servers
// cannot be reached is found here, or at its first operation.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := call(ctx, func() (bool, error) { ok, _, err := s.conn.Exists("/"); return ok, err }); err != nil {
		return fmt.Errorf("zkstore: ping: %w", err)
	}
	return nil
}

// ensureRoot creates the Store's directories when they are missing, and
// checks that those that exist are leash's.
func (s *Store) ensureRoot(ctx context.Context) error {
	s.mu.Lock()
	done := s.rootDone
	s.mu.Unlock()
	if done {
		return nil
	}
	// The root and its parents are anybody's; only what is below is leash's.
	path := ""
	for _, seg := range strings.Split(s.root[1:], "/") {
		path += "/" + seg
		if err := s.createIfMissing(ctx, path, nil); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		path string
		data []byte
	}{{s.locks, locksMarker}, {s.clients, clientsMarker}, {s.clock, clockMarker}, {s.records, recordsMarker}} {
		if err := s.createIfMissing(ctx, d.path, d.data); err != nil {
			return err
		}
		data, _, err := getData(ctx, s, d.path)
		if err != nil {
			return fmt.Errorf("zkstore: read %s: %w", d.path, err)
		}
		if string(data) != string(d.data) {
			return fmt.Errorf("zkstore: %s holds %s, not leash's %q: choose another Options.Root", d.path, describeData(data), d.data)
		}
	}
	s.mu.Lock()
	s.rootDone = true
	s.mu.Unlock()
	return nil
}

// createIfMissing creates a persistent znode.
func (s *Store) createIfMissing(ctx context.Context, path string, data []byte) error {
	_, err := call(ctx, func() (string, error) { return s.conn.Create(path, data, 0, s.acl) })
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zkstore: create %s: %w", path, err)
	}
	return nil
}

// describeData says what a znode's data is, for messages.
func describeData(b []byte) string {
	if len(b) == 0 {
		return "no data"
	}
	if len(b) > 40 {
		return fmt.Sprintf("%d bytes of data starting %q", len(b), b[:40])
	}
	return fmt.Sprintf("data %q", b)
}

// escapeSegment turns a lock name or a client id into one znode name:
// url.PathEscape, which escapes '/', '%', control characters and every
// non-ASCII byte, and also "." and "..", which ZooKeeper refuses.
func escapeSegment(s string) string {
	e := url.PathEscape(s)
	switch e {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return e
}

// unescapeSegment reverses escapeSegment; ok is false for a znode name
// escapeSegment cannot have made.
func unescapeSegment(e string) (string, bool) {
	s, err := url.PathUnescape(e)
	if err != nil || escapeSegment(s) != e {
		return "", false
	}
	return s, true
}

// dir returns the lock directory of name.
func (s *Store) dir(name string) string { return s.locks + "/" + escapeSegment(name) }
