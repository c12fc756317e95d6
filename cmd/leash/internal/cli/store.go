package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/redisstore"
	"github.com/redis/go-redis/v9"
)

// storeEnv names the environment variable that gives the store URL.
const storeEnv = "LEASH_STORE"

// errStore marks errors about the store URL or connection (exit status exitStore).
var errStore = errors.New("store")

// conn is an open store: the leash Store and what must be closed after it.
type conn struct {
	store leash.Store
	rdb   redis.UniversalClient
	desc  string // for messages: the URL without its password
}

func (c *conn) Close() {
	if c.rdb != nil {
		c.rdb.Close()
	}
}

// openStore connects to the store at rawURL and checks that it answers.
func openStore(ctx context.Context, rawURL string) (*conn, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("%w: no store given: pass --store URL or set %s, such as redis://127.0.0.1:6379/0", errStore, storeEnv)
	}
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch scheme {
	case "redis", "rediss":
	default:
		return nil, fmt.Errorf("%w: unsupported store URL scheme %q in %q: use redis:// or rediss://", errStore, scheme, redact(rawURL))
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: bad store URL %q: %v", errStore, redact(rawURL), err)
	}
	opt.DialTimeout = 3 * time.Second
	rdb := redis.NewClient(opt)
	c := &conn{rdb: rdb, store: redisstore.New(rdb, nil), desc: redact(rawURL)}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%w: cannot reach %s: %v", errStore, c.desc, err)
	}
	return c, nil
}

// redact hides the password of a URL for messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return raw
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return raw
}

func storeURLFromEnv() string { return os.Getenv(storeEnv) }
