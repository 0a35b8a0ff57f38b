package lock_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func waitClosed(t *testing.T, ch <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s: not within %s", what, within)
	}
}

// One holder at a time; release lets the next owner in at once with a
// greater token; bad arguments are refused and write nothing.
func TestAcquireRelease(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	a, err := lock.TryAcquire(ctx, pool, "maint", lock.Options{Owner: "a", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.TryAcquire(ctx, pool, "maint", lock.Options{Owner: "b", TTL: 5 * time.Second}); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("second TryAcquire: %v; want ErrHeld", err)
	}
	if held, err := a.Held(ctx); err != nil || !held {
		t.Fatalf("Held = %v, %v; want true", held, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, a.Lost(), time.Second, "Lost after Release")
	if held, err := a.Held(ctx); err != nil || held {
		t.Fatalf("Held after release = %v, %v; want false", held, err)
	}
	b, err := lock.TryAcquire(ctx, pool, "maint", lock.Options{Owner: "b", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if b.Token() <= a.Token() {
		t.Fatalf("token after release %d, before %d; want it to grow", b.Token(), a.Token())
	}
	list, err := lock.List(ctx, pool)
	if err != nil || len(list) != 1 || list[0].Owner != "b" || !list[0].Held || list[0].Token != b.Token() {
		t.Fatalf("List = %+v, %v; want maint held by b with token %d", list, err, b.Token())
	}

	for _, bad := range []struct {
		name string
		o    lock.Options
	}{
		{"", lock.Options{}},
		{"has space", lock.Options{}},
		{"ok", lock.Options{TTL: 500 * time.Millisecond}},
		{"ok", lock.Options{Owner: " "}},
		{"ok", lock.Options{Owner: strings.Repeat("x", 257)}},
	} {
		if _, err := lock.TryAcquire(ctx, pool, bad.name, bad.o); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("TryAcquire(%q, %+v): %v; want ErrInvalid", bad.name, bad.o, err)
		}
	}
	if list, _ := lock.List(ctx, pool); len(list) != 1 {
		t.Fatalf("bad requests wrote locks: %+v", list)
	}
}

// A holder that dies (stops renewing) is replaced within the TTL, and the
// old holder learns of the loss at its next renewal.
func TestTakeoverAfterExpiry(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	ttl := 2 * time.Second
	a, err := lock.TryAcquire(ctx, pool, "maint", lock.Options{Owner: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	// Expire a's row as if its process had stopped renewing long ago.
	if _, err := pool.Exec(ctx, `update workq.workq_locks set expires_at = clock_timestamp() - interval '1 second' where name = 'maint'`); err != nil {
		t.Fatal(err)
	}
	b, err := lock.Acquire(ctx, pool, "maint", lock.Options{Owner: "b", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if b.Token() != a.Token()+1 {
		t.Fatalf("takeover token %d; want %d", b.Token(), a.Token()+1)
	}
	waitClosed(t, a.Lost(), ttl, "old holder's Lost after takeover")
	if cause := context.Cause(a.Context()); !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("old holder's cause %v; want ErrLost", cause)
	}
	if held, _ := a.Held(ctx); held {
		t.Fatal("old token still held after takeover")
	}
	// A waiter gets the lock as soon as the holder releases it.
	got := make(chan *lock.Lock, 1)
	go func() {
		c, err := lock.Acquire(ctx, pool, "maint", lock.Options{Owner: "c", TTL: ttl, RetryInterval: 20 * time.Millisecond})
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if c == nil {
		t.FailNow()
	}
	defer c.Release(ctx)
	if c.Token() != b.Token()+1 {
		t.Fatalf("token after release %d; want %d", c.Token(), b.Token()+1)
	}
}

// A holder cut off from the database gives the lock up (Lost) while the
// database still considers it held: no second owner can have it yet.
func TestLostBeforeExpiryWhenCutOff(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t)
	direct, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(cfg.ConnConfig.Host, "/") {
		t.Fatalf("this test cuts a TCP connection; the test server is on a Unix socket (%s): set TEST_DATABASE_URL to a TCP address", cfg.ConnConfig.Host)
	}
	px := testutil.NewProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(px.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	through, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { px.Restore(); through.Close() }() // closing a silenced connection waits for pgxpool's 15s terminate timeout

	ttl := 5 * time.Second
	a, err := lock.TryAcquire(ctx, through, "maint", lock.Options{Owner: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	px.Cut()
	waitClosed(t, a.Lost(), ttl, "Lost of a holder cut off from the database")
	var stillHeld bool
	if err := direct.QueryRow(ctx, `select expires_at > clock_timestamp() from workq.workq_locks where name = 'maint'`).Scan(&stillHeld); err != nil {
		t.Fatal(err)
	}
	if !stillHeld {
		t.Fatal("the holder noticed the loss only after the database let the lock expire")
	}
	if _, err := lock.TryAcquire(ctx, direct, "maint", lock.Options{Owner: "b", TTL: ttl}); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("TryAcquire while the lost lock is not yet expired: %v; want ErrHeld", err)
	}
}

// Fencing: owners take the lock over from each other again and again while
// every holder keeps writing with the fenced statement; the writes that
// land, in database order, never go back to an older token. A holder whose
// lock was taken goes on writing until its renewal tells it (up to TTL/3),
// and none of those writes may land.
func TestFencedWritesNeverInterleave(t *testing.T) {
	ctx := context.Background()
	pool := testdb.PoolWith(t, 12)
	if _, err := pool.Exec(ctx, `create table fenced (seq bigint generated always as identity, token bigint not null)`); err != nil {
		t.Fatal(err)
	}
	const owners, takeovers = 3, 5
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt() // the goroutines end before the pool closes, however the test ends
	for i := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped() {
				l, err := lock.TryAcquire(ctx, pool, "fence", lock.Options{Owner: "o" + strconv.Itoa(i), TTL: 3 * time.Second})
				if errors.Is(err, lock.ErrHeld) {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				for l.Context().Err() == nil && !stopped() {
					_, err := pool.Exec(ctx, `insert into fenced (token)
						select $2 where exists (select 1 from workq.workq_locks where name = $1 and token = $2 and expires_at > clock_timestamp() for share)`,
						"fence", l.Token())
					if err != nil {
						t.Error(err)
						break
					}
				}
				_ = l.Release(ctx)
			}
		}()
	}
	// Force takeovers: expire the lock as soon as its holder has written
	// under its token (awaited, not slept: on a loaded machine a new holder
	// may need longer than any fixed pause to write at all, and then it
	// would not count as a holder). Once every owner believes it holds the
	// lock, the next takeover waits for a renewal to report a loss.
	deadline := time.Now().Add(30 * time.Second)
	for range takeovers {
		for {
			var wrote bool
			if err := pool.QueryRow(ctx, `select exists (select 1 from fenced f join workq.workq_locks l on l.token = f.token
				where l.name = 'fence' and l.expires_at > clock_timestamp())`).Scan(&wrote); err != nil {
				t.Fatal(err)
			}
			if wrote {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no holder wrote under a held lock within 30s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := pool.Exec(ctx, `update workq.workq_locks set expires_at = clock_timestamp() where name = 'fence'`); err != nil {
			t.Fatal(err)
		}
	}
	halt()
	rows, err := pool.Query(ctx, `select token from fenced order by seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last int64
	var n, distinct int
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok < last {
			t.Fatalf("write %d under token %d after a write under token %d", n, tok, last)
		}
		if tok != last {
			distinct++
		}
		last, n = tok, n+1
	}
	if distinct < takeovers {
		t.Fatalf("only %d holders wrote; want every one of the %d expired holders", distinct, takeovers)
	}
}

// Advance raises the holding's token while it holds: renewals, Held and
// Release go on under the new token, and the next holder's token is
// greater still. A holder that lost the lock cannot advance.
func TestAdvance(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	a, err := lock.TryAcquire(ctx, pool, "adv", lock.Options{Owner: "a", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := a.Token()
	if err := a.Advance(ctx, first); err != nil || a.Token() != first {
		t.Fatalf("Advance to the current token: token %d, err %v; want %d, nil", a.Token(), err, first)
	}
	const big = int64(5) << 32 // a token with an epoch in its high bits
	if err := a.Advance(ctx, big); err != nil {
		t.Fatal(err)
	}
	if a.Token() != big {
		t.Fatalf("token after Advance %d; want %d", a.Token(), big)
	}
	if err := a.Advance(ctx, big-1); err != nil || a.Token() != big {
		t.Fatalf("Advance down: token %d, err %v; want %d, nil", a.Token(), err, big)
	}
	// Several renewals (every TTL/3) under the new token.
	select {
	case <-a.Lost():
		t.Fatalf("lost after Advance: %v", context.Cause(a.Context()))
	case <-time.After(1500 * time.Millisecond):
	}
	if held, err := a.Held(ctx); err != nil || !held {
		t.Fatalf("Held after Advance = %v, %v; want true", held, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := lock.TryAcquire(ctx, pool, "adv", lock.Options{Owner: "b", TTL: time.Second})
	if err != nil {
		t.Fatalf("acquire after the advanced holder released: %v", err)
	}
	if b.Token() != big+1 {
		t.Fatalf("next token %d; want %d", b.Token(), big+1)
	}
	// b is taken over behind its back (as after a pause past its TTL): it
	// can no longer advance, and the row keeps the newer holder's token.
	if _, err := pool.Exec(ctx, `update workq.workq_locks set token = token + 1, owner = 'c' where name = 'adv'`); err != nil {
		t.Fatal(err)
	}
	if err := b.Advance(ctx, big+100); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Advance after a takeover: %v; want ErrLost", err)
	}
	waitClosed(t, b.Lost(), time.Second, "Lost after a refused Advance")
	var tok int64
	if err := pool.QueryRow(ctx, `select token from workq.workq_locks where name = 'adv'`).Scan(&tok); err != nil || tok != big+2 {
		t.Fatalf("lock row token %d (err %v); want %d", tok, err, big+2)
	}
	_ = b.Release(ctx)
}
