package zkstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/zkstore"
)

func TestParseURL(t *testing.T) {
	servers, opts, digest, err := zkstore.ParseURL("zk://alice:s3cret@h1:2181,h2:2182/app/locks?session_timeout=10s")
	if err != nil || !slices.Equal(servers, []string{"h1:2181", "h2:2182"}) || opts.Root != "/app/locks" ||
		opts.SessionTimeout != 10*time.Second || digest != "alice:s3cret" {
		t.Errorf("ParseURL = %q, %+v, %q, %v", servers, opts, digest, err)
	}
	if _, opts, _, err := zkstore.ParseURL("ZK://h:2181"); err != nil || opts.Root != "" {
		t.Errorf("ParseURL without a root = %+v, %v; want the default root", opts, err)
	}
	const secret = "Pa55w0rd-never-printed"
	for name, u := range map[string]string{
		"no server":         "zk://u:" + secret + "@/root",
		"no port":           "zk://u:" + secret + "@h/root",
		"unknown parameter": "zk://u:" + secret + "@h:1/?ttl=1s",
		"repeated":          "zk://u:" + secret + "@h:1/?session_timeout=1s&session_timeout=2s",
		"bad duration":      "zk://u:" + secret + "@h:1/?session_timeout=soon",
		"bad root":          "zk://u:" + secret + "@h:1/a//b",
		"dot root":          "zk://u:" + secret + "@h:1/a/..",
		"other scheme":      "zookeeper://u:" + secret + "@h:1",
	} {
		_, _, _, err := zkstore.ParseURL(u)
		if !errors.Is(err, driver.ErrBadURL) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: ParseURL(%q) = %v; want ErrBadURL without the password", name, u, err)
		}
	}
}

// TestOpenURL opens a zk:// URL with digest credentials through
// driver.Open and takes a lock on it.
func TestOpenURL(t *testing.T) {
	s, err := driver.Open(context.Background(), "zk://alice:s3cret@"+shared.ZooKeeper(t).Addr+"/url-test?session_timeout=20s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := driver.Request{Name: "x", Owner: "00000000-0000-4000-8000-000000000001:1", Lease: 10 * time.Second}
	if g, err := s.Acquire(bg(t), r); err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if got := s.(*zkstore.Store).SessionTimeout(); got != 20*time.Second {
		t.Errorf("SessionTimeout = %v, want the 20s the URL asked for", got)
	}
	r.Lease = 30 * time.Second
	if _, err := s.Acquire(bg(t), r); !errors.Is(err, driver.ErrUnsupported) || !strings.Contains(err.Error(), "session timeout") {
		t.Errorf("Acquire with a lease longer than the session timeout = %v, want a refusal saying so", err)
	}
}

// FuzzParseURL: ParseURL never panics; it either refuses with ErrBadURL or
// returns at least one server and a usable root.
func FuzzParseURL(f *testing.F) {
	for _, u := range []string{"zk://h:1", "zk://u:p@h1:1,h2:2/a/b?session_timeout=3s", "zk://h:1/?x=1", "zk://@/", "zk://[::1]:2181/r"} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, u string) {
		servers, opts, _, err := zkstore.ParseURL(u)
		if err != nil {
			if !errors.Is(err, driver.ErrBadURL) {
				t.Fatalf("ParseURL(%q) = %v, not ErrBadURL", u, err)
			}
			return
		}
		if len(servers) == 0 {
			t.Fatalf("ParseURL(%q) = no server and no error", u)
		}
		if opts.Root != "" && (!strings.HasPrefix(opts.Root, "/") || opts.Root == "/" || strings.Contains(opts.Root, "//")) {
			t.Fatalf("ParseURL(%q) = root %q, not an absolute path other than \"/\"", u, opts.Root)
		}
	})
}
