package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/leash-go/leash/driver"
)

// lockJSON is the --json form of a lock's state, as ls and show print it.
type lockJSON struct {
	Name string `json:"name"`
	// Kind is "mutex" (a Mutex, FairMutex or Redisson lock), "read" or
	// "write" (an RWMutex), or "permit" (a Semaphore); "" when free.
	Kind string `json:"kind,omitempty"`
	Held bool   `json:"held"`
	// Owners are the holders and their hold counts; empty when free.
	Owners []ownerJSON `json:"owners"`
	// RemainingMS is the lease left, in milliseconds; null when not held.
	RemainingMS *int64 `json:"remaining_ms"`
	// Fence is the last fencing token granted for the name; 0 if none.
	Fence int64 `json:"fence"`
	// Permits is a semaphore's permit count; absent for other kinds.
	Permits int `json:"permits,omitempty"`
	// Queued is the number of waiters with a place in a fair queue or a
	// waiting-writer mark.
	Queued int `json:"queued"`
	// Waiters is the number of clients waiting; null when unknown.
	Waiters *int `json:"waiters"`
}

type ownerJSON struct {
	Owner string `json:"owner"`
	Holds int    `json:"holds"`
	// Kind is the owner's hold: "read" for a reader of a write-held
	// (downgrading) RWMutex; as the lock's kind otherwise.
	Kind string `json:"kind"`
	// RemainingMS is this owner's own lease left (readers, permits); absent
	// when the lease is the lock's.
	RemainingMS *int64 `json:"remaining_ms,omitempty"`
	// Host, PID, Label and Command describe the holder, from the record its
	// Client keeps in the store; absent when it keeps none (a Redisson
	// client, or a leash client that has not written it yet).
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Label   string `json:"label,omitempty"`
	Command string `json:"command,omitempty"`
	// AcquiredAt is when the holder took the lock; absent when its record
	// does not list the lock yet.
	AcquiredAt *time.Time `json:"acquired_at,omitempty"`
	// State is "held" while the holder works under the lock (for leash
	// run: the command runs), "tail" once the work ended and the lock is
	// only kept until its lease runs out (--at-least); absent when unknown.
	State string `json:"state,omitempty"`
	// TailSince is when the tail began; present with state "tail".
	TailSince *time.Time `json:"tail_since,omitempty"`
}

func toJSON(info driver.Info, hs holders) lockJSON {
	j := lockJSON{Name: info.Name, Held: info.Held, Owners: []ownerJSON{}, Fence: info.Fence,
		Permits: info.Permits, Queued: info.Queued}
	if info.Held || info.Permits > 0 {
		j.Kind = info.Kind.String()
	}
	for _, o := range info.Owners {
		oj := ownerJSON{Owner: o.Owner, Holds: o.Holds, Kind: o.Kind.String()}
		if o.Remaining >= 0 {
			ms := o.Remaining.Milliseconds()
			oj.RemainingMS = &ms
		}
		hs.setJSON(&oj)
		j.Owners = append(j.Owners, oj)
	}
	if info.Held && info.Remaining >= 0 {
		ms := info.Remaining.Milliseconds()
		j.RemainingMS = &ms
	}
	if info.Waiters >= 0 {
		w := info.Waiters
		j.Waiters = &w
	}
	return j
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// remaining formats a lease left for people.
func remaining(info driver.Info) string {
	switch {
	case !info.Held:
		return "-"
	case info.Remaining < 0:
		return "no expiry"
	}
	return info.Remaining.Round(time.Millisecond).String()
}

func fence(info driver.Info) string {
	if info.Fence == 0 {
		return "none"
	}
	return strconv.FormatInt(info.Fence, 10)
}

func waiters(info driver.Info) string {
	if info.Waiters < 0 {
		return "unknown"
	}
	return strconv.Itoa(info.Waiters)
}

// printLock writes one lock's state as aligned "field  value" lines.
func printLock(w io.Writer, info driver.Info, hs holders) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "lock\t%s\n", info.Name)
	if !info.Held {
		fmt.Fprintf(tw, "state\tfree\n")
	} else {
		fmt.Fprintf(tw, "state\theld\n")
		fmt.Fprintf(tw, "kind\t%s\n", kindText(info.Kind))
		for _, o := range info.Owners {
			if o.Remaining >= 0 { // a lease of its own: a reader or a permit
				fmt.Fprintf(tw, "holder\t%s (%s, %v left)\n", o.Owner, o.Kind, o.Remaining.Round(time.Millisecond))
				fmt.Fprintf(tw, "\t%s\n", hs.holderText(o.Owner))
				continue
			}
			fmt.Fprintf(tw, "holder\t%s\n", o.Owner)
			hs.print(tw, o.Owner, now)
			fmt.Fprintf(tw, "holds\t%d\n", o.Holds)
		}
		fmt.Fprintf(tw, "remaining\t%s\n", remaining(info))
	}
	if info.Permits > 0 {
		fmt.Fprintf(tw, "permits\t%d (%d held)\n", info.Permits, len(info.Owners))
	}
	if info.Queued > 0 {
		fmt.Fprintf(tw, "queued\t%d\n", info.Queued)
	}
	fmt.Fprintf(tw, "fence\t%s\n", fence(info))
	fmt.Fprintf(tw, "waiters\t%s\n", waiters(info))
	tw.Flush()
}

// kindText says what kind of lock is held, for people.
func kindText(k driver.Kind) string {
	switch k {
	case driver.KindRead:
		return "read (an RWMutex held by readers)"
	case driver.KindWrite:
		return "write (an RWMutex held by a writer)"
	case driver.KindPermit:
		return "permit (a Semaphore)"
	}
	return "mutex (a Mutex, FairMutex or Redisson lock)"
}

// printLocks writes locks as an aligned table with a header.
func printLocks(w io.Writer, infos []driver.Info, hs holders) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDER\tHOLDS\tREMAINING\tFENCE\tWAITERS")
	for _, info := range infos {
		holder, holds, kind := "-", "-", "-"
		if len(info.Owners) > 0 {
			holder, holds = hs.holderText(info.Owners[0].Owner), strconv.Itoa(info.Owners[0].Holds)
			kind = info.Kind.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", info.Name, kind, holder, holds, remaining(info), fence(info), waiters(info))
		for _, o := range info.Owners[min(1, len(info.Owners)):] {
			fmt.Fprintf(tw, "\t\t%s\t%d\t\t\t\n", hs.holderText(o.Owner), o.Holds)
		}
	}
	tw.Flush()
}
