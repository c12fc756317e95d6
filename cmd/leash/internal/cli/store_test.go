package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/internal/testserver"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestBadInputBeforeAnyNetworkCall: every bad command line is a usage error
// (64) with a clear line, and leash makes no connection for it.
func TestBadInputBeforeAnyNetworkCall(t *testing.T) {
	const secret = "Pa55w0rd-never-printed"
	store, conns := countingListener(t)
	t.Setenv(storeEnv, store)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "missing the lock name"},
		{[]string{"run", "job"}, `missing "--" and the command`},
		{[]string{"run", "job", "--"}, "missing the command"},
		{[]string{"run", "job", "true"}, `missing "--" between the lock name and the command`},
		{[]string{"run", "a", "b", "--", "true"}, "one lock name"},
		{[]string{"run", "--wait", "5", "job", "--", "true"}, "needs a unit"},
		{[]string{"run", "--wait", "soon", "job", "--", "true"}, "not a duration"},
		{[]string{"run", "--lease", "-1s", "job", "--", "true"}, "must not be negative"},
		{[]string{"run", "--wait", "1s", "--no-wait", "job", "--", "true"}, "contradict"},
		{[]string{"run", "--lease", "1ms", "job", "--", "true"}, "--lease 1ms"},
		{[]string{"run", "--max-hold", "0s", "job", "--", "true"}, "--max-hold 0"},
		{[]string{"run", "--bogus", "job", "--", "true"}, "flag provided but not defined"},
		{[]string{"run", "bad\x01name", "--", "true"}, "control"},
		{[]string{"run", "a}b", "--", "true"}, "hash slot"},
		{[]string{"run", strings.Repeat("n", 600), "--", "true"}, "long"},
		{[]string{"run", "--store", "http://x", "job", "--", "true"}, `no store for "http" URLs (registered: ` /* the test-registered schemes may come first */},
		{[]string{"run", "--store", "127.0.0.1:6379", "job", "--", "true"}, "has no scheme"},
		{[]string{"run", "--store", "redis://x:y", "job", "--", "true"}, `URL "redis://x:y": bad port "y"`},
		{[]string{"run", "--store", "redis://u:" + secret + "@x%zz", "job", "--", "true"}, "invalid URL escape"},
		{[]string{"run", "--store", "redis://u:" + secret + "/x@h", "job", "--", "true"}, "cannot tell the password from the host"},
		{[]string{"run", "--store", "redis+sentinel://u:" + secret + "@a:1,[::1]/m?bogus=1", "job", "--", "true"}, "unexpected option: bogus"},
		{[]string{"run", "--store", "redis+cluster://[::1]:1,[::1]:2", "--key-prefix", "{x}", "job", "--", "true"}, "KeyPrefix"},
		{[]string{"run", "--store", "redis+cluster://[::1]:1,[::1]:2?key_prefix=a", "--key-prefix", "b", "job", "--", "true"}, "say the same thing"},
		{[]string{"run", "--store", "redis+sentinel://a:1,::1/m", "job", "--", "true"}, `bad host "::1"`},
		{[]string{"run", "--store", "redis://u:" + secret + "@h?x=1&x=%zz", "job", "--", "true"}, "invalid URL escape"},
		{[]string{"run", "--store", "redis://x:70000", "job", "--", "true"}, "bad port"},
		{[]string{"run", "--store", "redis://h?bogus=1", "job", "--", "true"}, "unexpected option: bogus"},
		{[]string{"run", "--ca-file", garbage, "job", "--", "true"}, "are for TLS"},
		{[]string{"run", "--store", "rediss://h", "--ca-file", filepath.Join(dir, "none.pem"), "job", "--", "true"}, "no such file"},
		{[]string{"run", "--store", "rediss://h", "--ca-file", garbage, "job", "--", "true"}, "no PEM certificate"},
		{[]string{"run", "--store", "rediss://h", "--cert-file", garbage, "job", "--", "true"}, "go together"},
		{[]string{"run", "--store", "rediss://h", "--cert-file", garbage, "--key-file", garbage, "job", "--", "true"}, "cert_file/key_file"},
		{[]string{"run", "--store", "mem://", "--key-prefix", "p", "job", "--", "true"}, "--key-prefix is for Redis stores (the key_prefix URL parameter): mem:// stores take no such flag"},
		{[]string{"run", "--store", "mem://", "--replicas", "1", "job", "--", "true"}, "--replicas is for Redis stores"},
		{[]string{"run", "--store", "redis+cluster://h", "--replicas", "1", "job", "--", "true"}, "replicas is not supported on Redis Cluster"},
		{[]string{"run", "--store", "mem://?x=1", "job", "--", "true"}, "memstore: URL"},
		{[]string{"ls", "--store", "mem://", "--ca-file", garbage}, "--ca-file is for Redis stores"},
		{[]string{"show", "--key-prefix", "a", "--store", "redis://h?key_prefix=b", "job"}, "--key-prefix and the store URL's key_prefix parameter say the same thing"},
		{[]string{"show", "--key-prefix", "{bad}", "job"}, "KeyPrefix"},
		{[]string{"mark-fresh", "--force", "--store", "mem://"}, "memstore has no Redis server"},
		{[]string{"show"}, "one lock name"},
		{[]string{"show", "a", "b"}, "one lock name"},
		{[]string{"show", "a{b"}, "hash tag"},
		{[]string{"ls", "a*", "b*"}, "at most one pattern"},
		{[]string{"unlock", "job"}, "needs --force"},
		{[]string{"unlock", "--force"}, "one lock name"},
		{[]string{"unlock", "--force", ""}, "empty"},
		{[]string{"version", "extra"}, "no arguments"},
		{[]string{"help", "run", "ls"}, "one command or topic"},
	} {
		status, _, stderr := run(t, tc.args...)
		if status != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("leash %q = %d, %q; want %d and %q", tc.args, status, stderr, exitUsage, tc.want)
		}
		if strings.Contains(stderr, secret) {
			t.Errorf("leash %q = %q, which shows the password", tc.args, stderr)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("leash made %d connections for bad command lines, want none", n)
	}
}

func FuzzRunArgs(f *testing.F) {
	f.Add("--wait 5s job -- true")
	f.Add("--no-wait --at-least 1m job -- sh -c x")
	f.Add("--lease 1h30m --max-hold 2h --kill-after 0s j -- x")
	f.Add("-- --")
	f.Add("job --json -- x")
	f.Fuzz(func(t *testing.T, line string) {
		e := &env{stdout: &strings.Builder{}, stderr: &strings.Builder{}}
		r, err := parseRun(e, strings.Fields(line))
		if err != nil {
			if s := statusOf(err); s != exitUsage && !(s == exitOK && err == errHelp) {
				t.Errorf("parseRun(%q) = %v with status %d, want a usage error", line, err, s)
			}
			return
		}
		if r.name == "" || len(r.argv) == 0 || r.lease.d < time.Millisecond {
			t.Errorf("parseRun(%q) accepted %+v", line, r)
		}
	})
}

func TestStoreUnreachable(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	store := "redis://u:secret@127.0.0.1:" + strconv.Itoa(port)
	for _, args := range [][]string{{"run", "job", "--", "true"}, {"ls"}, {"show", "job"}, {"unlock", "--force", "job"}} {
		status, _, stderr := runLeash(t, store, args...)
		if status != exitStore || !strings.Contains(stderr, "cannot reach the store") || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "secret") {
			t.Errorf("leash %s on a closed port = %d, %q; want %d and one line, without the password", args[0], status, stderr, exitStore)
		}
	}
}

func TestACLUsers(t *testing.T) {
	srv := sharedRedis(t)
	rdb := newRDB(t, srv.Addr)
	ctx := ctxFor(t)
	// The user that 'leash help store' recommends, and one that may only PING.
	setUser := append([]any{"ACL", "SETUSER", "leash-ok", "reset", "on", ">right"}, aclRules()...)
	if err := rdb.Do(ctx, setUser...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "ACL", "SETUSER", "leash-weak", "reset", "on", ">weak", "~*", "+ping", "+hello").Err(); err != nil {
		t.Fatal(err)
	}
	name, log := lockName(t), logFile(t)
	good := "redis://leash-ok:right@" + srv.Addr
	if status, _, stderr := runLeash(t, good, runArgs(name, []string{"--at-least", "1m"}, child(log))...); status != 0 {
		t.Fatalf("leash run as the recommended ACL user exited %d: %s", status, stderr)
	}
	if status, out, stderr := runLeash(t, good, "ls", "--json", name); status != 0 || !strings.Contains(out, name) {
		t.Errorf("leash ls as the recommended ACL user = %d, %q, %q", status, out, stderr)
	}
	if status, _, stderr := runLeash(t, good, "unlock", "--force", name); status != 0 {
		t.Errorf("leash unlock --force as the recommended ACL user = %d, %q", status, stderr)
	}
	for _, tc := range []struct{ store, want string }{
		{"redis://leash-ok:wrong@" + srv.Addr, "refused the credentials: WRONGPASS"},
		{"redis://nobody:x@" + srv.Addr, "refused the credentials"},
		{"redis://leash-weak:weak@" + srv.Addr, "denied a command to this user"},
	} {
		status, _, stderr := runLeash(t, tc.store, runArgs(name, nil, child(log, "-id", "denied"))...)
		if status != exitAuth || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("leash run on %s = %d, %q; want %d and one line with %q", tc.store, status, stderr, exitAuth, tc.want)
		}
	}
	for _, l := range readLog(log) {
		if strings.Contains(l, "denied") {
			t.Errorf("the command ran for a user the store refused: %q", l)
		}
	}
}

// aclRules returns the rules of the example in 'leash help store'.
func aclRules() []any {
	i := strings.Index(aclHelp, "ACL SETUSER leash on >PASSWORD ")
	line := aclHelp[i+len("ACL SETUSER leash on >PASSWORD "):]
	line = line[:strings.Index(line, "\n\n")]
	var rules []any
	for _, f := range strings.Fields(strings.ReplaceAll(line, "\\", "")) {
		rules = append(rules, f)
	}
	return rules
}

func TestTLS(t *testing.T) {
	pki := newPKI(t)
	tlsPort, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.NewRedis(t, testserver.RedisOptions{Args: []string{
		"--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey,
		"--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "optional",
	}})
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	mtlsPort, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	testserver.NewRedis(t, testserver.RedisOptions{Args: []string{
		"--tls-port", strconv.Itoa(mtlsPort), "--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey,
		"--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "yes",
	}})
	mtlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(mtlsPort))
	log := logFile(t)
	for _, tc := range []struct {
		name   string
		store  string
		flags  []string
		status int
		want   string
	}{
		{"verified with --ca-file", "rediss://" + tlsAddr, []string{"--ca-file", pki.ca}, 0, ""},
		{"by host name", "rediss://localhost:" + strconv.Itoa(tlsPort), []string{"--ca-file", pki.ca}, 0, ""},
		{"client certificate", "rediss://" + mtlsAddr, []string{"--ca-file", pki.ca, "--cert-file", pki.clientCert, "--key-file", pki.clientKey}, 0, ""},
		{"unknown CA", "rediss://" + tlsAddr, nil, exitAuth, "cannot verify the TLS certificate"},
		{"no client certificate", "rediss://" + mtlsAddr, []string{"--ca-file", pki.ca}, exitAuth, "--cert-file"},
		{"TLS to a plain port", "rediss://" + srv.Addr + "?dial_timeout=300ms", []string{"--ca-file", pki.ca}, exitStore, "use redis://"},
		{"plain to a TLS port", "redis://" + tlsAddr, nil, exitStore, "cannot reach the store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			args := append(tc.flags, name, "--")
			args = append([]string{"run"}, append(args, child(log, "-id", tc.name)...)...)
			status, _, stderr := runLeash(t, tc.store, args...)
			if status != tc.status || !strings.Contains(stderr, tc.want) || tc.status != 0 && strings.Count(stderr, "\n") != 1 {
				t.Errorf("leash run on %s = %d, %q; want %d and %q", tc.store, status, stderr, tc.status, tc.want)
			}
		})
	}
}

// pki is a CA and the certificates the TLS tests use, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	template := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		}
	}
	caKey := newKey()
	caTmpl := template("leash test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(cn string, usage x509.ExtKeyUsage, certName, keyName string) (string, string) {
		k := newKey()
		tmpl := template(cn)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(certName, "CERTIFICATE", der), write(keyName, "PRIVATE KEY", kder)
	}
	p := pki{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf("redis", x509.ExtKeyUsageServerAuth, "server.pem", "server-key.pem")
	p.clientCert, p.clientKey = leaf("leash", x509.ExtKeyUsageClientAuth, "client.pem", "client-key.pem")
	return p
}

func TestSentinel(t *testing.T) {
	master := testserver.NewRedis(t, testserver.RedisOptions{})
	sentinel := startSentinel(t, master)
	name, log := lockName(t), logFile(t)
	status, _, stderr := runLeash(t, "redis+sentinel://"+sentinel+"/leash-master", runArgs(name, nil, child(log))...)
	if status != 0 {
		t.Fatalf("leash run through Sentinel exited %d: %s", status, stderr)
	}
	if fence := field(waitLog(t, log, "start ", 0), "fence"); fence == "" {
		t.Error("no fencing token through Sentinel")
	}
	status, _, stderr = runLeash(t, "redis+sentinel://"+sentinel+"/no-such-master", "show", name)
	if status != exitStore || strings.Count(stderr, "\n") != 1 {
		t.Errorf("leash show with an unknown master = %d, %q; want %d and one line", status, stderr, exitStore)
	}
}

// startSentinel starts a Sentinel that monitors master as "leash-master",
// and returns its address once it knows the master.
func startSentinel(t *testing.T, master *testserver.Redis) string {
	t.Helper()
	addr := testserver.NewSentinel(t, master, "leash-master").Addr
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	eventually(t, 15*time.Second, "Sentinel knows the master", func() bool {
		a, err := sc.GetMasterAddrByName(ctxFor(t), "leash-master").Result()
		return err == nil && len(a) == 2 && a[1] == strconv.Itoa(master.Port)
	})
	return addr
}

func TestCluster(t *testing.T) {
	srv := testserver.NewCluster(t, 1)[0]
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}})
	defer fresh.Close()
	if err := redisstore.New(fresh, nil).MarkFresh(ctxFor(t)); err != nil { // a new cluster: no restart grace
		t.Fatal(err)
	}
	store := "redis+cluster://" + srv.Addr
	name, log := lockName(t), logFile(t)
	if status, _, stderr := runLeash(t, store, runArgs(name, nil, child(log))...); status != 0 {
		t.Fatalf("leash run on a Cluster exited %d: %s", status, stderr)
	}
	// A lock held through a ClusterClient is found by ls, which walks every master.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}})
	defer cc.Close()
	c, err := leash.New(redisstore.New(cc, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Mutex("{orders}:42").Lock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unlock(ctxFor(t))
	status, out, stderr := runLeash(t, store, "ls", "--json")
	if status != 0 || !strings.Contains(out, `"name": "{orders}:42"`) {
		t.Errorf("leash ls on a Cluster = %d, %q, %q; want the held lock", status, out, stderr)
	}
	if _, err := redisstore.New(cc, nil).List(ctxFor(t), "*"); err != nil {
		t.Errorf("List on a Cluster: %v", err)
	}
}

// TestRunReplicas: with --replicas 1 the command runs once the replica has
// acknowledged the grant, and does not run at all (status 69, one line that
// names the replicas) when the replica does not acknowledge; the flag is a
// usage error on Cluster and when negative.
func TestRunReplicas(t *testing.T) {
	primary := testserver.NewRedis(t, testserver.RedisOptions{})
	replica := testserver.NewReplica(t, primary.Addr)
	store, name, log := "redis://"+primary.Addr, lockName(t), logFile(t)
	guard := []string{"--replicas", "1"}
	if status, _, stderr := runLeash(t, store, runArgs(name, guard, child(log, "-id", "acknowledged"))...); status != 0 {
		t.Fatalf("run --replicas 1 with the replica in sync exited %d: %s", status, stderr)
	}
	// A read timeout below the default WAIT timeout shortens the WAIT.
	if status, _, stderr := runLeash(t, store+"/0?read_timeout=400ms", runArgs(name, guard, child(log, "-id", "quick"))...); status != 0 {
		t.Fatalf("run --replicas 1 with ?read_timeout=400ms exited %d: %s", status, stderr)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer replica.Resume()
	status, _, stderr := runLeash(t, store, runArgs(name, guard, child(log, "-id", "unacknowledged"))...)
	if status != exitStore || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "did not replicate the lock in time") {
		t.Errorf("run --replicas 1 with the replica paused = %d, %q; want %d and one line saying the lock was not replicated", status, stderr, exitStore)
	}
	if lines := strings.Join(readLog(log), "\n"); !strings.Contains(lines, " acknowledged ") || !strings.Contains(lines, " quick ") || strings.Contains(lines, "unacknowledged") {
		t.Errorf("commands that ran:\n%s\nwant only the two acknowledged ones", lines)
	}
	for _, tc := range []struct{ url, replicas, want string }{
		{"redis+cluster://127.0.0.1:1", "1", "replicas is not supported on Redis Cluster"},
		{store, "-1", "--replicas -1: must be 0 (off) or more"},
	} {
		status, _, stderr := runLeash(t, tc.url, runArgs(name, []string{"--replicas", tc.replicas}, child(log))...)
		if status != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("run --replicas %s on %s = %d, %q; want %d and %q", tc.replicas, tc.url, status, stderr, exitUsage, tc.want)
		}
	}
}
