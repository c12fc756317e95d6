package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
)

// A holder is who holds a lock, from the record its Client keeps in the
// store (see driver.ClientRecorder): the host, process, label and command,
// and, when the record lists the lock, when it was taken and whether it is
// left to expire (leash run's --at-least tail).
type holder struct {
	rec    driver.ClientRecord
	lock   driver.LockRecord
	listed bool // the record lists this lock
}

// holders maps owners to their holders; an owner without a record is absent.
type holders map[string]*holder

// readHolders reads the records of the Clients that hold infos' locks, one
// read per Client. A record that cannot be read is reported once on warn and
// left out: the locks are still listed, their holders unknown. A store that
// keeps no records (no driver.ClientRecorder) gives no holders: ls and show
// then name each holder by its owner id.
func readHolders(ctx context.Context, store driver.Store, warn func(error), infos ...driver.Info) holders {
	hs := holders{}
	s, ok := store.(driver.ClientRecorder)
	if !ok {
		return hs
	}
	recs := map[string]*driver.ClientRecord{}
	warned := false
	for _, info := range infos {
		for _, o := range info.Owners {
			id := driver.OwnerClient(o.Owner)
			rec, seen := recs[id]
			if !seen {
				r, ok, err := s.GetClient(ctx, id)
				if err != nil && !warned {
					warn(err)
					warned = true
				}
				if ok {
					rec = &r
				}
				recs[id] = rec
			}
			if rec != nil {
				l, listed := rec.Lock(o.Owner)
				hs[o.Owner] = &holder{rec: *rec, lock: l, listed: listed}
			}
		}
	}
	return hs
}

// tail reports whether the lock is left to expire after its work ended.
func (h *holder) tail() bool { return h.listed && !h.lock.TailSince.IsZero() }

// state is the JSON state: "held" while the holder works under the lock (for
// leash run: the command runs), "tail" once it left the lock to expire, ""
// when the record does not list the lock.
func (h *holder) state() string {
	switch {
	case !h.listed:
		return ""
	case h.tail():
		return "tail"
	}
	return "held"
}

// short is the holder in a few words, for ls: "host:pid [label] (command)",
// with " tail" when the lock is left to expire.
func (h *holder) short() string {
	s := h.rec.Host + ":" + strconv.Itoa(h.rec.PID)
	if h.rec.Label != "" {
		s += " [" + clip(h.rec.Label, 24) + "]"
	}
	if h.rec.Command != "" {
		s += " (" + clip(h.rec.Command, 40) + ")"
	}
	if h.tail() {
		s += " tail"
	}
	return s
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// holderText is the HOLDER column of ls: the holder, or the owner id when
// its Client keeps no record.
func (hs holders) holderText(owner string) string {
	if h := hs[owner]; h != nil {
		return h.short()
	}
	return owner
}

// print writes the holder lines of show for owner, in a tabwriter.
func (hs holders) print(w io.Writer, owner string, now time.Time) {
	h := hs[owner]
	if h == nil {
		fmt.Fprintf(w, "host\tunknown (no holder record: a Redisson client, or a leash client that has not written one yet)\n")
		return
	}
	fmt.Fprintf(w, "host\t%s\n", h.rec.Host)
	fmt.Fprintf(w, "pid\t%d\n", h.rec.PID)
	if h.rec.Label != "" {
		fmt.Fprintf(w, "label\t%s\n", h.rec.Label)
	}
	if h.rec.Command != "" {
		fmt.Fprintf(w, "command\t%s\n", h.rec.Command)
	}
	if !h.listed {
		fmt.Fprintf(w, "acquired\tnot recorded yet (a holder records a lock when it first renews it)\n")
		return
	}
	fmt.Fprintf(w, "acquired\t%s\n", when(h.lock.Acquired, now))
	if h.tail() {
		fmt.Fprintf(w, "state\ttail since %s: the work ended and the lock is kept until its lease runs out (--at-least)\n", when(h.lock.TailSince, now))
	} else if h.rec.Command != "" {
		fmt.Fprintf(w, "state\tthe command is running\n")
	}
}

// when formats a recorded time with how long ago it was.
func when(t, now time.Time) string {
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	if ago := now.Sub(t); ago >= 0 {
		s += " (" + ago.Round(time.Second).String() + " ago)"
	}
	return s
}

// setJSON copies the holder of oj's owner into oj.
func (hs holders) setJSON(oj *ownerJSON) {
	h := hs[oj.Owner]
	if h == nil {
		return
	}
	oj.Host, oj.PID, oj.Label, oj.Command, oj.State = h.rec.Host, h.rec.PID, h.rec.Label, h.rec.Command, h.state()
	if h.listed {
		at := h.lock.Acquired.UTC()
		oj.AcquiredAt = &at
	}
	if h.tail() {
		since := h.lock.TailSince.UTC()
		oj.TailSince = &since
	}
}

// shellSpecial are the characters that make commandLine quote an argument.
const shellSpecial = "\"'\\$`;&|<>()*?[]#~!{}"

// commandLine is argv as one line for the holder record, each argument
// quoted only when it needs it, cut to leash.MaxCommandLen bytes.
func commandLine(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "" || !utf8.ValidString(a) || strings.ContainsFunc(a, func(r rune) bool {
			return r == ' ' || !unicode.IsPrint(r) || strings.ContainsRune(shellSpecial, r)
		}) {
			a = strconv.Quote(a)
		}
		b.WriteString(a)
	}
	s := b.String()
	if len(s) > leash.MaxCommandLen {
		cut := leash.MaxCommandLen - len("…")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
