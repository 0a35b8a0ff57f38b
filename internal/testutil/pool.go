package testutil

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ProxiedPool opens a pool on the database of url through a Proxy the
// test can cut or slow, failing the test when url is not a TCP address.
// The proxy is restored before the pool closes when the test ends: closing
// a connection the proxy holds silent waits for pgxpool's terminate
// timeout.
func ProxiedPool(t testing.TB, url string) (*pgxpool.Pool, *Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(cfg.ConnConfig.Host, "/") {
		t.Fatalf("this test cuts a TCP connection; the test server is on a Unix socket (%s): set TEST_DATABASE_URL to a TCP address", cfg.ConnConfig.Host)
	}
	px := NewProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(px.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Restore(); pool.Close() })
	return pool, px
}
