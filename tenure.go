package leash

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leash-go/leash/driver"
)

// Tenure states.
const (
	stateHeld uint8 = iota + 1
	stateLost
	stateReleased
)

// A tenure is one continuous holding of a lock by one owner: from the grant
// to the last Unlock or the loss. Re-entries share it (and its fencing token);
// each Lock call gets its own Hold on it. A MultiLock tenure has one part per
// name; every other tenure has one part.
type tenure struct {
	c       *Client
	parts   []part
	owner   string      // store owner
	cfg     *lockConfig // shared with the locker, and with the Client for default options
	grantAt int64       // monotonic ns: send time of the granting acquire, or when a handed-over grant was taken
	parent  *tenure     // the tenure on the same name this one was taken inside, if any

	validUntil atomic.Int64 // monotonic ns: the local validity deadline (see the package doc)
	lastTouch  atomic.Int64 // monotonic ns; Hold.Touch

	mu    sync.Mutex
	kind  driver.Kind // set when the tenure is made, never changed; here, in the padding after mu
	state uint8
	// announced: OpAcquired was sent. Only the acquiring goroutine uses it;
	// it sits here, in the padding after state, to keep a tenure small.
	announced bool
	// owned: made for an owner given with WithOwner (see explicit). Set
	// when the tenure is made, never changed.
	owned   bool
	nholds  int32 // live holds: Unlock of the last one releases the lock
	ctxs    *Hold // the live holds whose Context was made, linked by Hold.next: cancelled on loss
	lostErr *LostError
	lostCh  chan struct{} // made on demand by Lost

	// first is the tenure's first hold, allocated with it (re-entries
	// allocate their own).
	first Hold

	// sched is the tenure's entry in the scheduler's queue. The entry is
	// the scheduler's (see queue.go): it sits in the tenure only to be
	// allocated with it, and the tenure never reads or writes it.
	sched entry
}

// A part is one name of a tenure and the token it was granted.
type part struct {
	name  string
	fence int64
}

// explicit is the owner given with WithOwner for this tenure, "" for an
// anonymous one: what follows the first '@' of its store owner (see
// explicitOwner), which neither the client id nor the number contains.
func (t *tenure) explicit() string {
	if !t.owned {
		return ""
	}
	_, o, _ := strings.Cut(t.owner, "@")
	return o
}

// name is the tenure's first (for most kinds, only) name.
func (t *tenure) name() string { return t.parts[0].name }

// fence is the tenure's token: the highest of its parts'.
func (t *tenure) fence() int64 {
	f := t.parts[0].fence
	for _, p := range t.parts[1:] {
		f = max(f, p.fence)
	}
	return f
}

// request is the store request for part i, with the tenure's lease.
func (t *tenure) request(i int) driver.Request {
	r := driver.Request{Kind: t.kind, Name: t.parts[i].name, Owner: t.owner, Lease: t.cfg.lease}
	if t.parent != nil {
		r.Parent = t.parent.owner
	}
	return r
}

// requests is one request per part.
func (t *tenure) requests() []driver.Request {
	return t.appendRequests(make([]driver.Request, 0, len(t.parts)))
}

// appendRequests appends one request per part to dst.
func (t *tenure) appendRequests(dst []driver.Request) []driver.Request {
	for i := range t.parts {
		dst = append(dst, t.request(i))
	}
	return dst
}

// validAfter is the validity deadline of a grant or renewal sent at send
// (monotonic ns): send+lease-margin.
func (t *tenure) validAfter(send int64) int64 { return send + int64(t.cfg.lease-t.cfg.margin) }

// setValid moves the validity deadline forward to send+lease-margin, never back.
func (t *tenure) setValid(send int64) {
	v := t.validAfter(send)
	for {
		old := t.validUntil.Load()
		if v <= old || t.validUntil.CompareAndSwap(old, v) {
			return
		}
	}
}

// check declares the tenure lost if its validity deadline has passed. Holders
// call it through Hold.Err, Hold.Lost and the hold context's Err, so a process
// that resumes from a pause learns of the loss on its first look, even before
// the scheduler goroutine runs.
func (t *tenure) check() {
	reason, err, passed := t.expiry()
	if !passed {
		return
	}
	t.mu.Lock()
	held := t.state == stateHeld
	t.mu.Unlock()
	if held {
		t.lose(reason, err)
	}
}

// expiry reports whether the tenure's validity deadline has passed and, if
// so, the reason and cause of its loss by it (see expiryReason).
func (t *tenure) expiry() (Reason, error, bool) {
	if t.c.now() < t.validUntil.Load() {
		return 0, nil, false
	}
	err := t.c.sched.lastErr(t)
	return expiryReason(err), err, true
}

func expiryReason(lastErr error) Reason {
	if lastErr != nil {
		return ReasonUnreachable
	}
	return ReasonExpired
}

// alive reports whether the tenure is held, checking its deadline first.
func (t *tenure) alive() bool {
	t.check()
	return t.held()
}

// held reports whether t is held as far as it knows, without checking its
// validity deadline (which alive does, and which may end the tenure and take
// the owner registry's lock): for callers that hold it.
func (t *tenure) held() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == stateHeld
}

// lose ends a held tenure: it records why, closes Lost, cancels every hold's
// context and stops renewal. It reports whether it made the transition.
func (t *tenure) lose(reason Reason, cause error) bool {
	t.mu.Lock()
	if t.state != stateHeld {
		t.mu.Unlock()
		return false
	}
	t.state = stateLost
	le := &LostError{Name: t.name(), Fence: t.fence(), Reason: reason, Err: cause}
	t.lostErr = le
	if reason == ReasonRevoked && t.cfg.ackOnUnlock {
		// Before Lost closes: an Unlock it wakes finds the entry to clear.
		t.revokedUntilUnlock()
	}
	// Contexts first, then Lost: whoever sees Lost closed also sees every
	// hold's context cancelled. Cancelling runs no user code synchronously.
	for h := t.ctxs; h != nil; h = h.next {
		h.ctx.Load().cancel(le)
	}
	if t.lostCh == nil {
		t.lostCh = closedChan
	} else {
		close(t.lostCh)
	}
	t.mu.Unlock()

	t.c.sched.remove(t)
	t.c.forget(t)
	t.c.endKept(t, reason)
	if reason == ReasonRevoked && !t.cfg.ackOnUnlock {
		t.c.ackRevoke(t) // told: the store may free the name
	}
	t.c.observeEnd(t, OpLost, reason, cause)
	lvl := slog.LevelError
	if reason == ReasonClosed {
		lvl = slog.LevelWarn
	}
	t.c.log.Log(context.Background(), lvl, "lock lost",
		slog.String(attrLock, t.name()), slog.String(attrKind, t.kind.String()), slog.Int64(attrToken, t.fence()),
		slog.String(attrReason, reason.String()), slog.Any(attrError, cause))
	return true
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newHold adds hold h (nil: a new one) to a held tenure; the caller holds
// t.mu. ctx is the Lock call's context: the hold's context, made by its
// first Context call, keeps its values but not its cancellation.
func (t *tenure) newHold(ctx context.Context, h *Hold) *Hold {
	if h == nil {
		h = new(Hold)
	}
	h.t, h.base = t, ctx
	t.nholds++
	return h
}

// reenter adds a hold if the tenure is still held, or returns nil.
func (t *tenure) reenter(ctx context.Context) *Hold {
	t.check()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != stateHeld {
		return nil
	}
	return t.newHold(ctx, nil)
}

// mayStillHold reports whether, after a loss for this reason, the server may
// still record the owner on some name of the tenure (so a release is worth
// sending, owner-checked). A MultiLock that lost one name still holds the
// others.
func (t *tenure) mayStillHold(r Reason) bool {
	switch r {
	case ReasonExpired, ReasonUnreachable, ReasonMaxHold, ReasonStalled:
		return true
	}
	return len(t.parts) > 1
}

// holdsKey finds, in a context, the innermost hold's context it derives
// from (its holdValues); each holdValues answers it with itself, and its
// base leads on to the next one out.
type holdsKey struct{}

// tenureIn returns the innermost tenure of c on name carried by ctx. The
// key is of size zero, so the lookup allocates nothing: every Lock makes it.
func tenureIn(ctx context.Context, c *Client, name string) *tenure {
	for {
		v, _ := ctx.Value(holdsKey{}).(*holdValues)
		if v == nil {
			return nil
		}
		if v.t.c == c {
			for _, p := range v.t.parts {
				if p.name == name {
					return v.t
				}
			}
		}
		ctx = v.base
	}
}

// newTenure makes a tenure that is not yet granted.
// A single name's part is allocated with it, as are its first hold and the
// entry by which the scheduler will track it: one allocation instead of four.
func (c *Client) newTenure(kind driver.Kind, names []string, explicit string, cfg *lockConfig) *tenure {
	a := &struct {
		t   tenure
		one [1]part
	}{}
	t := &a.t
	t.c, t.kind, t.cfg = c, kind, cfg
	t.sched.init(t)
	if len(names) == 1 {
		t.parts = a.one[:]
	} else {
		t.parts = make([]part, len(names))
	}
	for i, n := range names {
		t.parts[i].name = n
	}
	if explicit != "" {
		t.owned = true
		t.owner = explicitOwner(c.id, c.seq.Add(1), explicit)
	} else {
		t.owner = tenureOwner(c.id, c.seq.Add(1))
	}
	return t
}
