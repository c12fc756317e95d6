package storetest

import (
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
)

// recordTests are holder records (driver.ClientRecorder).
var recordTests = []test{
	{name: "a record reads back as written", fn: testRecordRoundTrip},
	{name: "a put replaces the whole record", fn: testRecordReplace},
	{name: "a record expires after its time to live", fn: testRecordExpiry},
	{name: "a deleted record is gone", fn: testRecordDelete},
}

// record is a ClientRecord with every field set, its times at whole
// milliseconds (the precision a store must keep).
func record(n *namer) driver.ClientRecord {
	id := n.owner()
	at := time.UnixMilli(time.Now().UnixMilli())
	return driver.ClientRecord{
		ID: id, Host: "host-1.example", PID: 4242, Label: "billing worker", Command: `./report.sh --day "2026-11-24"`,
		Started: at.Add(-time.Minute),
		Locks: []driver.LockRecord{
			{Owner: id + ":1", Acquired: at.Add(-30 * time.Second)},
			{Owner: id + ":2@job-7", Acquired: at.Add(-20 * time.Second), TailSince: at.Add(-10 * time.Second)},
		},
	}
}

func mustGet(t *testing.T, s driver.ClientRecorder, id string) (driver.ClientRecord, bool) {
	t.Helper()
	rec, ok, err := s.GetClient(ctx(t), id)
	if err != nil {
		t.Fatalf("GetClient(%q) error: %v", id, err)
	}
	return rec, ok
}

func mustPut(t *testing.T, s driver.ClientRecorder, rec driver.ClientRecord, ttl time.Duration) {
	t.Helper()
	if err := s.PutClient(ctx(t), rec, ttl); err != nil {
		t.Fatalf("PutClient error: %v", err)
	}
}

// mustGetSame checks that the record of want.ID reads back as want.
func mustGetSame(t *testing.T, s driver.ClientRecorder, want driver.ClientRecord) {
	t.Helper()
	got, ok := mustGet(t, s, want.ID)
	if !ok {
		t.Fatalf("GetClient(%q) after put = none, want the record", want.ID)
	}
	sameRecord(t, got, want)
}

func sameRecord(t *testing.T, got, want driver.ClientRecord) {
	t.Helper()
	if got.ID != want.ID || got.Host != want.Host || got.PID != want.PID || got.Label != want.Label ||
		got.Command != want.Command || !got.Started.Equal(want.Started) || len(got.Locks) != len(want.Locks) {
		t.Fatalf("GetClient = %+v, want %+v", got, want)
	}
	for _, w := range want.Locks {
		g, ok := got.Lock(w.Owner)
		if !ok || !g.Acquired.Equal(w.Acquired) || !g.TailSince.Equal(w.TailSince) {
			t.Fatalf("GetClient: lock %q = %+v (listed %v), want %+v", w.Owner, g, ok, w)
		}
	}
}

func testRecordRoundTrip(t *testing.T, st driver.Store, n *namer) {
	s := st.(driver.ClientRecorder)
	want := record(n)
	if _, ok := mustGet(t, s, want.ID); ok {
		t.Fatalf("GetClient(%q) before any put = found, want none", want.ID)
	}
	mustPut(t, s, want, long)
	mustGetSame(t, s, want)
}

func testRecordReplace(t *testing.T, st driver.Store, n *namer) {
	s := st.(driver.ClientRecorder)
	first := record(n)
	mustPut(t, s, first, long)
	second := first
	second.Label, second.Command = "", ""
	second.Locks = first.Locks[1:]
	mustPut(t, s, second, long)
	mustGetSame(t, s, second)
}

func testRecordExpiry(t *testing.T, st driver.Store, n *namer) {
	s := st.(driver.ClientRecorder)
	rec := record(n)
	mustPut(t, s, rec, short)
	deadline := time.Now().Add(short + wakeWait)
	for {
		if _, ok := mustGet(t, s, rec.ID); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("record put with a time to live of %v still there %v later", short, short+wakeWait)
		}
		time.Sleep(short / 10)
	}
}

func testRecordDelete(t *testing.T, st driver.Store, n *namer) {
	s := st.(driver.ClientRecorder)
	rec := record(n)
	mustPut(t, s, rec, long)
	if err := s.DeleteClient(ctx(t), rec.ID); err != nil {
		t.Fatalf("DeleteClient error: %v", err)
	}
	if _, ok := mustGet(t, s, rec.ID); ok {
		t.Fatalf("GetClient(%q) after delete = found, want none", rec.ID)
	}
	if err := s.DeleteClient(ctx(t), rec.ID); err != nil {
		t.Fatalf("DeleteClient of a deleted record error: %v, want nil", err)
	}
}
