package etcdstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/leash-go/leash/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the key prefix of a Store whose Options.Prefix is empty.
const DefaultPrefix = "leash/"

// Options configures a Store. The zero value (and nil) means every default.
type Options struct {
	// Prefix starts every key the Store reads or writes (see the package
	// doc for the layout below it). Empty means DefaultPrefix. Stores that
	// share an etcd cluster exclude each other's locks only when their
	// prefixes are the same.
	Prefix string
}

// Store is a leash lock store on etcd. It is a driver.SessionStore: every
// lock of a leash Client is attached to one etcd lease per lease duration,
// which the Client's watchdog keeps alive with one LeaseKeepAliveOnce per lease each round.
// It is safe for concurrent use. Create it with New.
type Store struct {
	cli    *clientv3.Client
	prefix string

	mu       sync.Mutex
	sessions map[string]map[int64]*lease // client id → TTL in seconds → lease
	rounds   map[string]time.Time        // client id → send time of its last KeepAlive that succeeded
	minTTL   int64                       // the server's minimum lease TTL, once a grant showed it (0: not seen)
	sweepAt  time.Time                   // when session next drops the leases nobody kept alive

	claims claims       // which owner of a client holds each lock key it put (see Renew)
	slow   atomic.Int64 // requests Renew has checked by reading their keys

	streams watchStreams // which gRPC stream new watches join

	// presenceOnly makes Renew take any key on a client's lease as its
	// owner's, the claims aside: set by tests only, as a negative control.
	presenceOnly bool
}

var (
	_ driver.Store        = (*Store)(nil)
	_ driver.SessionStore = (*Store)(nil)
	_ driver.Watcher      = (*Store)(nil)
	_ driver.Validator    = (*Store)(nil)
)

// New returns a Store that keeps its locks on the etcd cluster cli talks to.
// The caller keeps ownership of cli: the Store never closes it. A nil cli is
// reported by Validate (leash.New calls it), before any round trip.
func New(cli *clientv3.Client, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	return &Store{cli: cli, prefix: o.Prefix, sessions: make(map[string]map[int64]*lease),
		rounds: make(map[string]time.Time)}
}

// Validate reports a Store that cannot work: a nil client, or a prefix that
// is not valid UTF-8.
func (s *Store) Validate() error {
	switch {
	case s.cli == nil:
		return errors.New("etcdstore: nil *clientv3.Client")
	case !utf8.ValidString(s.prefix):
		return fmt.Errorf("etcdstore: Options.Prefix %q is not valid UTF-8", s.prefix)
	}
	return nil
}

// String names the store in messages.
func (s *Store) String() string { return "etcdstore (prefix " + strconv.Quote(s.prefix) + ")" }

// Prefix returns the key prefix of every key the Store uses.
func (s *Store) Prefix() string { return s.prefix }

// fenceMark is the value of every fence key: a key there holding anything
// else is not the Store's, and is never overwritten.
const fenceMark = "leash fence v1"

// formatVersion is the "leash" field of every lock value.
const formatVersion = 1

// lockValue is the value of a lock key, JSON-encoded with its fields in
// this order (Release compares values byte for byte).
type lockValue struct {
	Leash   int    `json:"leash"`    // formatVersion
	Kind    string `json:"kind"`     // kindMutex, kindWrite, kindRead or kindPermit
	Owner   string `json:"owner"`    // the tenure's owner, "<client-id>:<n>[@…]"
	LeaseMS int64  `json:"lease_ms"` // the lease the owner asked for, in milliseconds
}

// The kinds of lockValue.Kind on a lock key: an exclusive hold of a
// Mutex or FairMutex, or an RWMutex's writer.
const (
	kindMutex = "mutex"
	kindWrite = "write"
)

// encode returns the value of the key req holds (see heldKey).
func encode(req driver.Request) string { return encodeKind(req, heldKind(req)) }

// encodeKind returns the value of req's lock key (kindMutex) or permit key
// (kindPermit).
func encodeKind(req driver.Request, kind string) string {
	b, err := json.Marshal(lockValue{Leash: formatVersion, Kind: kind, Owner: req.Owner, LeaseMS: max(req.Lease.Milliseconds(), 1)})
	if err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return string(b)
}

// decode parses a lock key's value. It reports false for anything that is
// not a lock of the Store's format: another application's data.
func decode(b []byte) (lockValue, bool) {
	if v, ok := decodeKind(b, kindMutex); ok {
		return v, true
	}
	return decodeKind(b, kindWrite)
}

// decodeKind parses a lock key's (kindMutex) or permit key's (kindPermit)
// value; false means it is not one.
func decodeKind(b []byte, kind string) (lockValue, bool) {
	v, ok := decodeJSON[lockValue](b)
	return v, ok && v.Leash == formatVersion && v.Kind == kind && v.Owner != "" && v.LeaseMS > 0
}

// decodeJSON parses b as one JSON value of type T with no field T lacks.
func decodeJSON[T any](b []byte) (T, bool) {
	var v T
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil || d.More() {
		return v, false
	}
	return v, true
}

// lease is the lock's lease as the value records it.
func (v lockValue) lease() time.Duration { return time.Duration(v.LeaseMS) * time.Millisecond }

// notALock is the refusal of key, which holds value and is not a lock.
func (s *Store) notALock(name, key string, value []byte) error {
	const most = 40
	shown := value
	if len(shown) > most {
		shown = shown[:most]
	}
	what := "a value that is not a leash lock"
	switch key {
	case s.fenceKey(name):
		what = "a value that is not leash's fencing mark"
	case s.semKey(name):
		what = "a value that is not a leash semaphore"
	case s.wakeKey(name):
		what = "a value that is not leash's wake mark"
	}
	return &driver.NotALockError{Name: name, Found: fmt.Sprintf("%s at key %q (%d bytes: %q)", what, key, len(value), shown)}
}
