package redisstore_test

import (
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
)

// TestHolderRecordKeepsRedissonLayout: with a label and a holder record,
// the lock hash still holds only its owner field, the record lives in a key
// of its own, and a Redisson client's acquire condition (the key is absent,
// or holds its own field) stays false while leash holds.
func TestHolderRecordKeepsRedissonLayout(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	c := newClient(t, srv.Addr, &leash.Options{Label: "billing worker", Lease: 300 * time.Millisecond})
	name := lockName(t)
	h, err := c.Mutex(name).Lock(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	s := redisstore.New(rdb, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Held past a few renewals, and listed in the record.
		rec, ok, err := s.GetClient(bg(t), c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if _, listed := rec.Lock(h.Owner()); ok && listed && time.Until(h.ValidUntil()) > 0 && rec.Label == "billing worker" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record listing the lock within 30s: %+v", rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Renewed several times since: any writer of the lock hash has run.
	for v := h.ValidUntil(); !h.ValidUntil().After(v.Add(250 * time.Millisecond)); {
		if time.Now().After(deadline) {
			t.Fatal("the lock was not renewed within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	owners, err := rdb.HGetAll(bg(t), name).Result()
	if err != nil || len(owners) != 1 || owners[h.Owner()] != "1" {
		t.Errorf("lock hash with a holder record = %v (%v), want only %s -> 1", owners, err, h.Owner())
	}
	if typ, _ := rdb.Type(bg(t), "leash_client:{"+c.ID()+"}").Result(); typ != "hash" {
		t.Errorf("record key type = %q, want a hash of its own", typ)
	}
	javaOwner := "0f8fad5b-d9cb-469f-a165-70867728950e:57"
	if n, _ := rdb.Exists(bg(t), name).Result(); n == 0 || rdb.HExists(bg(t), name, javaOwner).Val() {
		t.Errorf("a Redisson client could take the lock leash holds (exists=%d)", n)
	}
	if err := h.Unlock(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := s.GetClient(bg(t), c.ID()); ok || err != nil {
		t.Errorf("record after Close = %+v, %v, want none", rec, err)
	}
}
