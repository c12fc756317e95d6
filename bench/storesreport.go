package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/mysqlstore"
)

// storesMarker opens the stores section of BENCHMARKS.md. Everything from it
// to the end of the file is the section: the stores mode rewrites only that,
// and the Redis run keeps it as it is.
const storesMarker = "<!-- stores section: written by `./scripts/bench.sh -stores`; do not edit by hand. -->\n"

// redlockMarker opens the Redlock section at the end of BENCHMARKS.md,
// after the stores section: TestRedlock (redlock_test.go) writes it, and
// both modes of the programme keep it.
const redlockMarker = "<!-- redlock section: written by bench's TestRedlock (BENCH_REDLOCK_WRITE=1); do not edit by hand. -->\n"

// splitRedlock splits md into what comes before the Redlock section and the
// section.
func splitRedlock(md []byte) (before, section []byte) {
	if i := bytes.Index(md, []byte(redlockMarker)); i >= 0 {
		return md[:i], md[i:]
	}
	return md, nil
}

// splitStores splits BENCHMARKS.md into what comes before the stores
// section and the section.
func splitStores(md []byte) (before, section []byte) {
	if i := bytes.Index(md, []byte(storesMarker)); i >= 0 {
		return md[:i], md[i:]
	}
	return md, nil
}

// peerRatio is the median over runs of value(lib) / value(its peer) in that
// run, turned so that above 1 means the leash library is ahead; 0 when the
// library has no peer.
func peerRatio[T any](runs []map[string]T, sl storeLib, value func(T) float64, higher bool) float64 {
	if sl.peer == "" {
		return 0
	}
	var ratios []float64
	for _, m := range runs {
		a, b := value(m[sl.name]), value(m[sl.peer])
		if a <= 0 || b <= 0 {
			continue
		}
		if higher {
			ratios = append(ratios, a/b)
		} else {
			ratios = append(ratios, b/a)
		}
	}
	return median(ratios)
}

func fmtPeerRatio(r float64, sl storeLib) string {
	if sl.peer == "" {
		return "—"
	}
	return fmt.Sprintf("**%s** %s", fmtTimes(r), sl.peer)
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func storesReport(res *storesResults, cfg storesConfig) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("%s\n", storesMarker)
	p("## Stores: leash on memstore, Redis, PostgreSQL, MySQL, etcd and ZooKeeper, beside the peers\n\n")
	p("Measured in one run of its own command, at another time than the sections above (which it does not rewrite): leash's Mutex on each of its stores, and the Go peers that lock with a database — ")
	p("[pglock](https://github.com/cirello-io/pglock) (PostgreSQL: a row per lock, lease and heartbeat) and [go-mysql-lock](https://github.com/sanketplus/go-mysql-lock) (MySQL's `GET_LOCK`, held by a connection), and etcd's own [concurrency.Mutex](https://pkg.go.dev/go.etcd.io/etcd/client/v3/concurrency) (a key per waiter under the lock's prefix, attached to a Session's lease). ")
	p("Every library ran against the same servers, which the programme started for the run on loopback ports; the timed scenarios ran %s, each time with the libraries in a rotated order. ", times(cfg.runs))
	p("**× peer** compares leash on a server with the peer on the **same** server, as the median over runs of the ratio measured in the same run, turned so that **above 1× leash is ahead**. ")
	p("Absolute figures on a shared 2-core machine are noisy (the client and the five servers share the cores); the ratios are the figures to read.\n\n")
	p("```sh\n./scripts/bench.sh -stores   # = cd bench && GOWORK=off go run . -stores (rewrites only this section)\n```\n\n")

	p("### Machine, versions and settings\n\n")
	p("| | |\n|---|---|\n")
	p("| date | %s |\n", res.started.UTC().Format("2006-01-02 15:04 MST"))
	p("| machine | %s, %d cores (GOMAXPROCS %d), %s, Linux %s, %s |\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0),
		memTotal(), strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")), runtime.Version())
	p("| redis-server | %s, no persistence |\n", res.redis)
	p("| PostgreSQL | %s, fsync and full_page_writes on, synchronous_commit off (a commit is flushed within 200 ms, not waited for) |\n", res.postgres)
	p("| MariaDB | %s, InnoDB, innodb_flush_log_at_trx_commit=2 (flushed once a second), no binary log |\n", res.mariadb)
	p("| etcd | %s, one member, defaults (no auto-compaction) |\n", res.etcd)
	p("| ZooKeeper | %s, standalone, as internal/testserver starts it (tick %v, forceSync=no: the transaction log is not fsynced) |\n", res.zookeeper, testserver.ZooKeeperTick)
	p("| leash | %s |\n", res.leash)
	for _, mod := range []string{"cirello.io/pglock", "github.com/sanketplus/go-mysql-lock", "go.etcd.io/etcd/client/v3", "github.com/jackc/pgx/v5", "github.com/lib/pq", "github.com/go-sql-driver/mysql", "github.com/redis/go-redis/v9", "github.com/go-zookeeper/zk"} {
		p("| %s | %s |\n", mod, modVersion(mod))
	}
	p("| whole run | %v |\n\n", res.elapsed.Round(time.Second))
	p("Every connection pool has %d connections (go-redis's default here, 10 per CPU; the database pools are set to the same).\n\n", poolSize)
	p("| library | settings |\n|---|---|\n")
	for _, sl := range res.libs {
		p("| %s | %s |\n", sl.name, sl.settings)
	}
	p("\n")

	p("### Uncontended Lock + Unlock\n\n")
	p("Each goroutine locks and unlocks a name of its own, in a loop, for %v, through one client shared by all goroutines. Latency is one Lock + Unlock. *Stuck*: Lock calls on the free name still waiting after %v, summed over the runs.\n\n", cfg.uncontended, stuckAfter)
	p("| goroutines | library | server | ops/s | × peer | p50 | p99 | stuck |\n|---:|---|---|---:|---|---:|---:|---:|\n")
	for _, g := range storesGoroutines {
		runs := res.uncontended[g]
		for _, sl := range res.libs {
			stuck := 0
			for _, m := range runs {
				stuck += m[sl.name].stuck
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %d |\n", g, sl.name, sl.server,
				fmtNum(medianOf(runs, sl.name, func(u uncontendedResult) float64 { return u.opsPerSec })),
				fmtPeerRatio(peerRatio(runs, sl, func(u uncontendedResult) float64 { return u.opsPerSec }, true), sl),
				fmtDur(time.Duration(medianOf(runs, sl.name, func(u uncontendedResult) float64 { return float64(u.p50) }))),
				fmtDur(time.Duration(medianOf(runs, sl.name, func(u uncontendedResult) float64 { return float64(u.p99) }))), stuck)
		}
	}
	p("\n")

	p("### Hot-name hand-off\n\n")
	p("Two clients, each with its own store and connection pool (as two processes would have; on memstore, two Clients of one Store): one holds a name, the other calls Lock on it and waits, and the holder releases it after a pause drawn uniformly from 20–300 ms. ")
	p("*Hand-off* is from the holder's Unlock **returning** to the waiter's Lock returning. Up to %d hand-offs per library per run, fewer when they are slow (a library stops after %v of a run); the percentiles are of every run's hand-offs pooled, and × peer is the median over runs of the peer's median over leash's. ", cfg.handoffs, cfg.budget)
	p("A waiter granted before the holder called Unlock would fail the programme.\n\n")
	p("| library | server | hand-offs | p50 | p99 | max | × peer |\n|---|---|---:|---:|---:|---:|---|\n")
	for _, sl := range res.libs {
		var all []time.Duration
		for _, m := range res.handoff {
			all = append(all, m[sl.name].handoffs...)
		}
		slices.Sort(all)
		p("| %s | %s | %d | %s | %s | %s | %s |\n", sl.name, sl.server, len(all),
			fmtDur(pct(all, 0.5)), fmtDur(pct(all, 0.99)), fmtDur(pct(all, 1)),
			fmtPeerRatio(peerRatio(res.handoff, sl, func(h handoffResult) float64 { return float64(pct(h.handoffs, 0.5)) }, false), sl))
	}
	p("\n")
	if len(res.poll) > 0 {
		p("**mysqlstore's waiters poll** (MySQL has no LISTEN/NOTIFY): one poller per Store and name reads it at intervals of a quarter of the time since a poll last saw the name change, at least %v and at most %v apart (mysqlstore's defaults), and never later than just after the holder's lease ends; ", mysqlstore.DefaultPollMin, mysqlstore.DefaultPollMax)
		p("a release through the **same** Store wakes its waiters at once. So a hand-off to another process costs up to one poll interval, which grows with how long the waiter has already waited. Measured (%d hand-offs each, holder and waiter as above, the pause fixed):\n\n", cfg.pollN)
		p("| waiter | had waited | hand-off p50 | hand-off max |\n|---|---:|---:|---:|\n")
		for _, r := range res.poll {
			p("| %s | %v | %s | %s |\n", r.what, r.gap, fmtDur(pct(r.handoffs, 0.5)), fmtDur(pct(r.handoffs, 1)))
		}
		p("\n")
	}

	p("### Keeping locks held (renewal): %s, and %s on Redis, etcd and ZooKeeper\n\n", fmtNum(float64(cfg.renewN)), fmtNum(float64(cfg.renewBig)))
	p("One client takes the locks (on 64 goroutines, for at most %v, or %v above 10,000 locks: a library that has not taken them all by then is measured on those it holds, with a note) and keeps them; after %v the server's counters are read over %v. ", renewalTakeLimit, bigTakeLimit, cfg.settle, cfg.window)
	p("Every library keeps its locks on a 1 s schedule here: leash with a %v lease (renewed every lease/3), pglock with its README's 3 s lease and 1 s heartbeat, go-mysql-lock with its default 1 s ping, concurrency.Mutex with a Session of %d s TTL (clientv3 keeps it alive every TTL/3). ", renewLease, etcdMutexRenewTTL)
	p("*Statements* are counted by the server: PostgreSQL's pg_stat_statements (top-level statements, a function call once), MariaDB's `Questions` + `Com_admin_commands` (statements and pings sent by clients; a CALL once), Redis's script calls (EVALSHA; leash sends a round's scripts in one pipeline), ")
	p("etcd's gRPC messages received (`grpc_server_msg_received_total`, every method: a unary call once, each keep-alive on a LeaseKeepAlive stream once), ZooKeeper's packets received (`mntr`'s `zk_packets_received`: requests and the connection's pings); memstore has no server. ")
	p("*Client heap per lock* is the benchmark process's HeapInuse at the end of the window, after a garbage collection, less the same before the client was opened, divided by the locks held: the client's (and its connection pool's) whole footprint, spread over its locks; on memstore it includes the store itself, which lives in the process. In parentheses, the same of HeapAlloc (the live objects alone; HeapInuse counts the spans they sit in, and a span half freed by an earlier library's run stays in use, so a small footprint can come out below its live bytes). ")
	p("*Server CPU* is the server's processes' (PostgreSQL's backends included) over the window, in a share of one core. *Rounds* and *round time* are leash's renewal rounds (one `Renew` call to the store, which sends a statement per batch) and how long each took, from its Observer. *Renewals of each lock*: how often each lock was renewed per interval, 1 when the library keeps its schedule (leash's from its Observer; pglock's and go-mysql-lock's from the statements, 2 per pglock heartbeat — `nextval` and an UPDATE — and one ping). *Goroutines* are the client's beyond its count before it took the locks (on MySQL they include go-sql-driver's one per open connection). Every lock was checked still held at the end of the window; a library that could not take them all, or lost some, is measured all the same, with a note saying so.\n\n")
	p("| library | server | locks | statements/s | statements per interval | per 1,000 locks per interval | renewals of each lock per interval | server CPU | rounds per interval | round time p50 | round time max | goroutines | client heap per lock | × peer |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	var notes []string
	for _, sl := range res.libs {
		r := res.renewal[sl.name]
		if r.failed != "" {
			p("| %s | %s | %s | %s | | | | | | | | | | |\n", sl.name, sl.server, fmtNum(float64(r.n)), r.failed)
			continue
		}
		stmts, perIv, per, cpu := "—", "—", "—", "—"
		if r.counted {
			stmts, perIv, per = fmtNum(r.stmtsSec), fmtNum(r.perInterval), fmtNum(r.perInterval*1000/float64(r.n))
			cpu = fmtPct(r.cpu)
		}
		renewed := "—"
		if r.renewed > 0 {
			renewed = fmtNum(r.renewed)
		}
		rounds, p50, mx := "—", "—", "—"
		if r.rounds > 0 {
			rounds, p50, mx = fmtNum(r.rounds), fmtDur(r.roundP50), fmtDur(r.roundMax)
		}
		ratio := "—"
		if pr, ok := res.renewal[sl.peer]; ok && sl.peer != "" && r.counted && pr.counted && pr.failed == "" && r.perInterval > 0 {
			ratio = fmt.Sprintf("**%s** %s (per lock)", fmtTimes((pr.perInterval/float64(pr.n))/(r.perInterval/float64(r.n))), sl.peer)
		}
		name := sl.name
		for _, note := range []string{sl.renewNote, r.short} {
			if note != "" {
				notes = append(notes, fmt.Sprintf("%s: %s.", sl.name, note))
				name += fmt.Sprintf(" [%d]", len(notes))
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, sl.server, fmtNum(float64(r.n)), stmts, perIv, per, renewed, cpu, rounds, p50, mx, fmtInt(r.goroutines), fmtBytes(r.heapPerLock)+" ("+fmtBytes(r.livePerLock)+")", ratio)
	}
	p("\n")
	for i, n := range notes {
		p("[%d] %s\n\n", i+1, n)
	}
	if notes, err := os.ReadFile("STORES.md"); err == nil {
		b.Write(notes)
	} else {
		return nil, err
	}
	return b.Bytes(), nil
}
