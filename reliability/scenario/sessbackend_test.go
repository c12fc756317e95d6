package scenario_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	_ "github.com/leash-go/leash/etcdstore" // registers etcd://
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/reliability/history"
	_ "github.com/leash-go/leash/zkstore" // registers zk://
)

// The session stores, etcd (etcdstore) and ZooKeeper (zkstore), run every
// scenario that applies to every lock server, on a single server (a
// one-member etcd cluster, a standalone ZooKeeper), and two of their own on
// three members: the leader killed (TestLeaderKilled) and the whole cluster
// killed and restarted (a case of TestServerRestart).
func init() { backends = append(backends, etcdBackend, zkBackend) }

// A sessionBackend is a backend whose store keeps each Client's locks alive
// with one session (driver.SessionStore), with a three-member cluster for
// the failover scenarios.
type sessionBackend struct {
	backend
	// cluster starts a three-member cluster for one scenario, stopped at
	// cleanup.
	cluster func(t *testing.T) cluster
}

// zkClientRace is why no ZooKeeper scenario runs under the race detector:
// go-zookeeper (v1.0.4, the newest release, and its main branch) reads
// Conn.lastZxid in sendSetWatches while the new connection's receive loop
// writes it, on any reconnect with watches set and requests queued — what a
// server restart, a partition or a leader's death does to every client. The
// race detector reports it and fails every test running at that moment
// (etcd's subtests too), although every checker passes; a fresh-clone CI run
// saw it on the single-server restart, so every ZooKeeper scenario skips
// under -race, and scripts/test.sh runs them all without it:
// go test -run '^Test(BaselineContention|RandomPartitions|ReentrantUnderPartitions|HolderPause|ServerPause|ServerRestart|HolderDeath|SkewedClientIsCaught|LeaderKilled)$/^zk$' ./scenario/
const zkClientRace = "go-zookeeper's data race on Conn.lastZxid at a reconnect (upstream: go-zookeeper/zk pull request 35) fails any test under -race; run this one without -race"

// skipUnderRace skips t under the race detector when why is not empty.
func skipUnderRace(t *testing.T, why string) {
	t.Helper()
	if raceDetector && why != "" {
		t.Skip(why)
	}
}

// cluster is a three-member lock server: its server's Addr lists every
// member's address, comma-separated (the store URLs take such a list), and
// its ctl acts on every member at once (Restart kills them all, then starts
// them all on their data).
type cluster struct {
	server
	// killLeader kills the member that leads now (SIGKILL) and returns how
	// to start it again on its data, once it has rejoined.
	killLeader func() (restart func() error, err error)
}

// sessionBackends are the backends of the session stores.
var sessionBackends = []sessionBackend{
	{etcdBackend, startEtcdCluster},
	{zkBackend, startZooKeeperEnsemble},
}

// etcdBackend is etcd with etcdstore, opened by URL. Its leases are whole
// seconds: a lock of lease d lives on an etcd lease of ceil(d)+1 s, so a
// holder that stops is waited out for up to 2.5 s past its lease (see
// etcdstore's package doc); the scenarios' checkers judge grants by the
// lease the client asked for, which is the stricter rule.
var etcdBackend = sessionBackendOf("", backend{
	name: "etcd",
	start: func(t *testing.T) server {
		s := testserver.NewEtcd(t, testserver.EtcdOptions{})
		return server{Addr: s.Addr(), ctl: wipeable{s, func() error { return wipeEtcd(s) }}}
	},
	open: func(cfg workerConfig, timeout time.Duration) (lockClient, error) {
		return openURL(fmt.Sprintf("etcd://%s/?dial_timeout=%s", cfg.Addr, timeout), cfg.Lease)
	},
}, startEtcdCluster, dataDeleted)

// wipeEtcd kills the one-member cluster s, deletes its data and starts it
// again empty: a new cluster whose revisions start over.
func wipeEtcd(s *testserver.Etcd) error {
	if err := s.Kill(); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.Dir, "data")); err != nil {
		return err
	}
	return s.Start()
}

// startEtcdCluster starts a three-member etcd cluster.
func startEtcdCluster(t *testing.T) cluster {
	c := testserver.NewEtcdCluster(t, 3)
	addrs := make([]string, len(c.Members))
	for i, m := range c.Members {
		addrs[i] = m.Addr()
	}
	return cluster{
		server: server{Addr: strings.Join(addrs, ","), ctl: members[*testserver.Etcd]{c.Members, c.Restart}},
		killLeader: func() (func() error, error) {
			m := c.Leader()
			if m == nil {
				return nil, fmt.Errorf("no etcd member says it leads")
			}
			return m.Start, m.Kill()
		},
	}
}

// zkBackend is ZooKeeper with zkstore, opened by URL, with a session timeout
// equal to the lease the server is sent (the shortest session the store
// accepts that lease on; shorter under the Skew and FastServer controls): a
// holder that stops is waited out for one session timeout, which is its
// lease.
var zkBackend = sessionBackendOf(zkClientRace, backend{
	name: "zk",
	start: func(t *testing.T) server {
		z := testserver.NewZooKeeper(t)
		return server{Addr: z.Addr, ctl: z}
	},
	open: func(cfg workerConfig, timeout time.Duration) (lockClient, error) {
		lease := serverLease(cfg)
		return openURL(fmt.Sprintf("zk://%s/leash?session_timeout=%s&tick_time=%s", cfg.Addr, lease, testserver.ZooKeeperTick), lease)
	},
}, startZooKeeperEnsemble, fastSession)

// serverLease is the lease cfg's worker sends the server: its lease,
// shortened by the Skew and FastServer controls.
func serverLease(cfg workerConfig) time.Duration {
	lease := cfg.Lease
	for _, f := range []float64{cfg.Skew, cfg.FastServer} {
		if f > 1 {
			lease = time.Duration(float64(lease) / f)
		}
	}
	return lease
}

// startZooKeeperEnsemble starts a three-server ZooKeeper ensemble.
func startZooKeeperEnsemble(t *testing.T) cluster {
	e := testserver.NewZooKeeperEnsemble(t)
	return cluster{
		server: server{Addr: strings.Join(e.Addrs(), ","), ctl: members[*testserver.ZooKeeper]{e.Servers, e.Restart}},
		killLeader: func() (func() error, error) {
			z := e.Leader()
			if z == nil {
				return nil, fmt.Errorf("no ZooKeeper server says it leads")
			}
			return func() error {
				if err := z.Start(); err != nil {
					return err
				}
				return e.AwaitServing()
			}, z.Kill()
		},
	}
}

// sessionBackendOf gives b the session stores' sizes and restart cases:
// half the Redis contention windows, subtests in parallel with the other
// parallel backends', and [sessionRestarts] on b.start and startCluster, with
// control, the negative control of the restart scenario (dataDeleted or
// fastSession). Every scenario of b is skipped under the race detector when
// raceSkip, the reason, is not empty.
func sessionBackendOf(raceSkip string, b backend, startCluster func(t *testing.T) cluster, control func(start func(t *testing.T) server) restartCase) backend {
	b.windows, b.parallel, b.raceSkip = 0.5, true, raceSkip
	b.restarts = sessionRestarts(b.start, startCluster, control(b.start))
	return b
}

// sessionRestarts are the restart cases of a session store: the single
// server and the whole three-member cluster killed (SIGKILL) and restarted
// on their data, which keep every lock, lease or session, and revision, so
// no double grant; and control, which must show double grants.
func sessionRestarts(start func(t *testing.T) server, cluster func(t *testing.T) cluster, control restartCase) []restartCase {
	return []restartCase{
		{name: "single server", start: start},
		{name: "three-member cluster, every member", window: 20 * time.Second,
			start: func(t *testing.T) server { return cluster(t).server }},
		control,
	}
}

// dataDeleted is etcd's restart control: the single server restarted with
// its data deleted, which forgets every grant and starts its revisions
// (the fencing tokens) over. etcd starts again well within a lease, so the
// checker must find the double grants, and the tokens going back.
func dataDeleted(start func(t *testing.T) server) restartCase {
	return restartCase{name: "single server, data deleted (negative control)", window: 20 * time.Second,
		start: func(t *testing.T) server {
			s := start(t)
			s.ctl = wiping{s.ctl.(wipeable)}
			return s
		},
		want: expect{DoubleGrant: true, StaleWrite: true,
			Note: "control: the emptied server grants locks whose leases still run, with tokens that start over"}}
}

// fastSession is ZooKeeper's restart control, durableRestarts' for a
// session: every lease, and the session timeout, cut to a tenth on the way
// to the server (a server clock ten times fast that the checker does not
// know of). ZooKeeper takes seconds to restart, longer than a lease, so a
// restart that forgot every grant would show no grant inside a running
// lease; sessions a tenth as long as the leases the checker knows of end
// inside them, restart or not.
func fastSession(start func(t *testing.T) server) restartCase {
	return restartCase{name: "single server, leases and session timeout 10x short (negative control)", start: start, window: 5 * time.Second,
		worker: func(cfg *workerConfig) { cfg.FastServer = 10 },
		want: expect{DoubleGrant: true,
			Note: "control: the server frees each lock after a tenth of the lease the checker knows of, so the checker sees grants inside running leases"}}
}

// openURL opens a worker's store with driver.Open(url); its readiness
// probe asks for a lock of lease.
func openURL(url string, lease time.Duration) (lockClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := driver.Open(ctx, url)
	if err != nil {
		return lockClient{}, err
	}
	ping := func(ctx context.Context) error { return storeReady(ctx, st, lease) }
	return lockClient{store: st, ping: ping, close: func() { _ = st.Close() }}, nil
}

// wipeable is a single server that can also be restarted empty.
type wipeable struct {
	serverControl
	wipe func() error // kill, delete the data, start again empty
}

// wiping is a wipeable server whose Restart deletes its data.
type wiping struct{ wipeable }

// Restart kills the server and starts it again with no data.
func (w wiping) Restart() error { return w.wipe() }

// member is one process of a cluster.
type member interface {
	Kill() error
	Pause() error
	Resume() error
	Close()
}

// members is a cluster as one serverControl: each call acts on every member.
type members[M member] struct {
	ms      []M
	restart func() error // the cluster's own: kill all, start all
}

// Kill kills every member.
func (c members[M]) Kill() error { return c.each(M.Kill) }

// Pause stops every member.
func (c members[M]) Pause() error { return c.each(M.Pause) }

// Resume continues every member.
func (c members[M]) Resume() error { return c.each(M.Resume) }

// Restart kills every member, then starts them all on their data.
func (c members[M]) Restart() error { return c.restart() }

// Close stops every member.
func (c members[M]) Close() {
	for _, m := range c.ms {
		m.Close()
	}
}

func (c members[M]) each(f func(M) error) error {
	for _, m := range c.ms {
		if err := f(m); err != nil {
			return err
		}
	}
	return nil
}

// TestLeaderKilled kills the leader of a three-member cluster (SIGKILL)
// while four clients contend, each time while one of them holds the lock,
// and starts it again on its data a lease or two later, once the others
// have elected a new leader. Holders that cannot reach a leader within
// their validity are told; no lock is granted twice, and tokens only grow
// across leaders (etcd revisions and ZooKeeper zxids are cluster-wide).
func TestLeaderKilled(t *testing.T) {
	for _, sb := range sessionBackends {
		t.Run(sb.name, func(t *testing.T) {
			skipUnderRace(t, sb.raceSkip)
			t.Parallel()
			e := newEnvOn(t, sb.backend)
			c := sb.cluster(t)
			const lease = time.Second
			locks := e.lockNames(1) // contend's
			runs := e.contend(c.Addr, 4, time.Duration(scale())*20*time.Second, nil, func(until int64) int {
				n := 0
				for history.Now() < until-int64(3*lease) {
					for deadline := time.Now().Add(5 * lease); time.Now().Before(deadline) && !e.holding(locks[0]); {
						time.Sleep(10 * time.Millisecond)
					}
					restart, err := c.killLeader()
					if err != nil {
						t.Fatal(err)
					}
					n++
					time.Sleep(lease + time.Duration(e.rng.Int64N(int64(lease))))
					if err := restart(); err != nil {
						t.Fatal(err)
					}
					time.Sleep(lease)
				}
				return n
			})
			e.verify("leader killed in a three-member cluster", runs, expect{})
		})
	}
}
