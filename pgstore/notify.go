package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/leash-go/leash/driver"
)

// notifier multiplexes every watched lock of a Store over one connection of
// its own, dialled from the pool's configuration and with its BeforeConnect
// and AfterConnect hooks (so it takes no connection from the pool), that
// LISTENs on the store's channel: one channel for all
// names, each payload naming its lock. It starts with the first Watch and
// ends with Close. One goroutine reads the connection; when it has heard
// nothing for HealthCheck it sends a query, and a connection that fails it
// is replaced. After a replacement every watcher is woken (WakeAll), since a
// release may have been sent while no one listened.
type notifier struct {
	s *Store

	mu       sync.Mutex
	watchers map[watchKey][]*watcher
	// up is closed while a connection is LISTENing; a new one replaces it
	// when that connection is lost.
	up      chan struct{}
	started bool
	closed  bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// watchKey is what a watch is for: a watch group (see groupOf) and a name.
type watchKey struct {
	group byte
	name  string
}

type watcher struct{ wake func(driver.Wake) }

func (n *notifier) init(s *Store) {
	n.s = s
	n.watchers = make(map[watchKey][]*watcher)
	n.up = make(chan struct{})
	n.ctx, n.cancel = context.WithCancel(context.Background())
}

// errClosed is returned by Watch after Close.
var errClosed = errors.New("pgstore: store closed")

// Watch groups, as the payload's first byte names them. Readers and writers
// share one.
const (
	groupMutex  = 'm'
	groupFair   = 'f'
	groupRW     = 'w'
	groupPermit = 'p'
	groupEvery  = '*' // a force release: every group of the name
)

func groupOf(kind driver.Kind) byte {
	switch kind {
	case driver.KindFair:
		return groupFair
	case driver.KindRead, driver.KindWrite:
		return groupRW
	case driver.KindPermit:
		return groupPermit
	}
	return groupMutex
}

// Watch implements [driver.Watcher]. It returns once the Store's listening
// connection has had its LISTEN acknowledged, so a release committed after
// Watch returns is delivered; it fails after Options.ListenTimeout when no
// connection can be made.
func (s *Store) Watch(ctx context.Context, kind driver.Kind, name string, wake func(driver.Wake)) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.notify.watch(ctx, watchKey{groupOf(kind), name}, wake)
}

func (n *notifier) watch(ctx context.Context, key watchKey, wake func(driver.Wake)) (func(), error) {
	w := &watcher{wake: wake}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errClosed
	}
	if !n.started {
		n.started = true
		// Owner: the Store. Stops when Close cancels n.ctx.
		n.wg.Go(n.run)
	}
	n.watchers[key] = append(n.watchers[key], w)
	up := n.up
	n.mu.Unlock()
	var once sync.Once
	stop := func() { once.Do(func() { n.unwatch(key, w) }) }
	timer := time.NewTimer(n.s.opts.ListenTimeout)
	defer timer.Stop()
	select {
	case <-up:
		return stop, nil
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	case <-timer.C:
		stop()
		return nil, fmt.Errorf("pgstore: watch %q: no listening connection within %v", key.name, n.s.opts.ListenTimeout)
	case <-n.ctx.Done():
		stop()
		return nil, errClosed
	}
}

func (n *notifier) unwatch(key watchKey, w *watcher) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ws := n.watchers[key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(n.watchers, key)
	} else {
		n.watchers[key] = ws
	}
}

// run keeps a listening connection up until Close.
func (n *notifier) run() {
	backoff := 50 * time.Millisecond
	for connected := false; ; {
		conn, err := n.connect()
		if err != nil {
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		n.mu.Lock()
		close(n.up)
		n.mu.Unlock()
		if connected {
			n.wakeEveryone() // a release may have been sent while no one listened
		}
		connected = true
		n.listen(conn)
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
		n.mu.Lock()
		n.up = make(chan struct{})
		n.mu.Unlock()
		if n.ctx.Err() != nil {
			return
		}
	}
}

// connect dials a connection from the pool's configuration and LISTENs on
// the store's channel; it returns once PostgreSQL has acknowledged the
// LISTEN.
func (n *notifier) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.s.opts.ListenTimeout)
	defer cancel()
	pc := n.s.pool.Config()
	cfg := pc.ConnConfig
	// Named for pg_stat_activity (the server truncates it to 63 bytes).
	cfg.RuntimeParams["application_name"] = listenerAppName(n.s.channel)
	// A context that ends interrupts the connection's read by a deadline,
	// never by a cancel request as the pool's connections may: every quiet
	// HealthCheck period ends a wait that way, and a cancel request, which
	// arrives when it arrives, could cancel the health check's query that
	// follows (and a timed-out health check closes the connection anyway).
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	// Made as the pool makes its connections (a BeforeConnect hook may
	// fetch a short-lived password, say).
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cfg); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if pc.AfterConnect != nil {
		if err := pc.AfterConnect(ctx, conn); err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.s.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listenerAppName is the application_name of a Store's listening
// connection: "leash listener" and the channel's schema and table.
func listenerAppName(channel string) string {
	return "leash listener " + strings.TrimPrefix(channel, "leash:")
}

// listen routes notifications from conn until it fails or the Store closes.
func (n *notifier) listen(conn *pgx.Conn) {
	hc := n.s.opts.HealthCheck
	for {
		ctx, cancel := context.WithTimeout(n.ctx, hc)
		note, err := conn.WaitForNotification(ctx)
		cancel()
		if n.ctx.Err() != nil {
			return
		}
		if err != nil {
			if !pgconn.Timeout(err) || conn.IsClosed() {
				return
			}
			// Quiet for a while: ask for a sign of life.
			pctx, cancel := context.WithTimeout(n.ctx, hc)
			_, err = conn.Exec(pctx, "SELECT 1")
			cancel()
			if err != nil {
				return
			}
			continue
		}
		if key, msg, ok := parsePayload(note.Payload); ok {
			n.deliver(key, msg)
		}
	}
}

// parsePayload decodes a notification's payload (see the Table+"_notify"
// function): the watch group, whom to wake, the byte length of the head
// owner, ':', the head owner, and the name. The longest is well under
// PostgreSQL's 8000 bytes: a name is at most leash.MaxNameLen (512) bytes,
// an owner a client id, a counter and at most leash.MaxOwnerLen (128)
// bytes.
func parsePayload(p string) (watchKey, driver.Wake, bool) {
	if len(p) < 4 {
		return watchKey{}, driver.Wake{}, false
	}
	group, wake := p[0], p[1]
	lenText, rest, ok := strings.Cut(p[2:], ":")
	headLen, err := strconv.Atoi(lenText)
	if !ok || err != nil || headLen < 0 || headLen > len(rest) {
		return watchKey{}, driver.Wake{}, false
	}
	key := watchKey{group, rest[headLen:]}
	switch wake {
	case '1':
		return key, driver.Wake{To: driver.WakeOne}, true
	case 'a':
		return key, driver.Wake{To: driver.WakeAll}, true
	case 'r':
		return key, driver.Wake{To: driver.WakeReaders}, true
	case 'w':
		return key, driver.Wake{To: driver.WakeWriter}, true
	case 'h':
		return key, driver.Wake{To: driver.WakeHead, Head: rest[:headLen]}, true
	}
	return watchKey{}, driver.Wake{}, false
}

// deliver passes msg to the watchers of key; a force release (groupEvery)
// to the watchers of every group of the name.
func (n *notifier) deliver(key watchKey, msg driver.Wake) {
	groups := []byte{key.group}
	if key.group == groupEvery {
		groups = []byte{groupMutex, groupFair, groupRW, groupPermit}
	}
	var wakes []func(driver.Wake)
	n.mu.Lock()
	for _, g := range groups {
		for _, w := range n.watchers[watchKey{g, key.name}] {
			wakes = append(wakes, w.wake)
		}
	}
	n.mu.Unlock()
	for _, wake := range wakes {
		wake(msg)
	}
}

// wakeEveryone wakes every watcher with WakeAll.
func (n *notifier) wakeEveryone() {
	var wakes []func(driver.Wake)
	n.mu.Lock()
	for _, ws := range n.watchers {
		for _, w := range ws {
			wakes = append(wakes, w.wake)
		}
	}
	n.mu.Unlock()
	for _, wake := range wakes {
		wake(driver.Wake{To: driver.WakeAll})
	}
}

func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}
