package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/publish"
)

func TestMain(m *testing.M) { testdb.MainOwnCluster(m) }

const secret = "test-secret"

// delivery is one outbox message as the webhook receiver got it.
type delivery struct {
	Topic, MessageID, Key string
	Event                 OrderEvent
}

// receiver is the consumer of the service's webhooks: a real HTTP server
// that checks each signature and keeps the first delivery of every message
// id (delivery is at least once), in arrival order.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]bool
	got  []delivery
	bad  []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{seen: map[string]bool{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{Topic: r.Header.Get(publish.HeaderTopic), MessageID: r.Header.Get(publish.HeaderMessageID),
			Key: r.Header.Get(publish.HeaderPartitionKey)}
		err := publish.VerifyWebhook(secret, r.Header, body, time.Minute, time.Now())
		if err == nil {
			err = json.Unmarshal(body, &d.Event)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil {
			rc.bad = append(rc.bad, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if !rc.seen[d.MessageID] {
			rc.seen[d.MessageID] = true
			rc.got = append(rc.got, d)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// all returns every delivery so far.
func (rc *receiver) all() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// deliveries returns the deliveries of topic so far, and any bad requests.
func (rc *receiver) deliveries(topic string) ([]delivery, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []delivery
	for _, d := range rc.got {
		if d.Topic == topic {
			out = append(out, d)
		}
	}
	return out, slices.Clone(rc.bad)
}

// startService runs the service in-process on a loopback port and returns
// its base URL and a function that stops it and checks it stopped cleanly.
func startService(t *testing.T, s settings, logs *testutil.Buffer) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, s, log, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("service returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("service still running 30s after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 30 * time.Second} // the first request waits for start-up
	resp, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: answer is not JSON: %v", url, err)
	}
	return resp.StatusCode, out
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last error: %v)", what, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type orderRow struct {
	status   string
	timerID  int64
	reminded bool
}

func getOrder(t *testing.T, pool *pgxpool.Pool, id int64) orderRow {
	t.Helper()
	var o orderRow
	if err := pool.QueryRow(context.Background(), "select status, reminder_timer_id, reminded_at is not null from shop_orders where id = $1", id).
		Scan(&o.status, &o.timerID, &o.reminded); err != nil {
		t.Fatalf("order %d: %v", id, err)
	}
	return o
}

func timerState(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	info, err := admin.Get(context.Background(), pool, lease.Timers, id)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// TestOrderFlow runs the service three times on one database, each start
// with the settings that make one part of the flow happen deterministically
// (the reminder delay and the expiry age are the only clocks):
//  1. long reminders and expiry: orders, payments (with a redelivery and a
//     conflict), ordered relay, the schedule's expiry job (expires nothing);
//  2. short reminders: an unpaid order gets its reminder;
//  3. short expiry: every unpaid order expires, its reminder cancelled.
func TestOrderFlow(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rc := newReceiver(t)
	logs := &testutil.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	base := settings{DatabaseURL: url, WebhookURL: rc.srv.URL + "/events", WebhookSecret: secret,
		ReminderAfter: time.Hour, ExpireAfter: time.Hour, ExpireEvery: time.Second, Poll: 100 * time.Millisecond}

	// 1. Orders and payments.
	svc, stop := startService(t, base, logs)
	for _, bad := range []any{map[string]any{"total_cents": 100}, map[string]any{"customer_id": "c1", "total_cents": 0}, []int{1}} {
		if code, _ := post(t, svc+"/orders", bad); code != http.StatusBadRequest {
			t.Errorf("POST /orders %v: %d, want 400", bad, code)
		}
	}
	placed := map[string][]int64{} // customer -> order ids, in the order placed
	var ids []int64
	for i, c := range []string{"c1", "c2", "c1", "c2", "c1"} {
		code, o := post(t, svc+"/orders", map[string]any{"customer_id": c, "total_cents": 100 * (i + 1)})
		if code != http.StatusCreated {
			t.Fatalf("POST /orders: %d %v", code, o)
		}
		id := int64(o["id"].(float64))
		placed[c] = append(placed[c], id)
		ids = append(ids, id)
	}
	var n int
	if err := pool.QueryRow(ctx, "select count(*) from shop_orders").Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d orders (%v), want 5: bad requests must write nothing", n, err)
	}
	paid := ids[0] // c1's first order, 100 cents
	pay := map[string]any{"id": "evt_1", "type": "payment.succeeded", "order_id": paid, "amount_cents": 100}
	if code, r := post(t, svc+"/payments", pay); code != http.StatusAccepted || r["duplicate"] != false {
		t.Fatalf("first delivery: %d %v, want 202 new", code, r)
	}
	if code, r := post(t, svc+"/payments", pay); code != http.StatusOK || r["duplicate"] != true {
		t.Fatalf("redelivery: %d %v, want 200 duplicate", code, r)
	}
	conflicting := map[string]any{"id": "evt_1", "type": "payment.succeeded", "order_id": paid, "amount_cents": 999}
	if code, r := post(t, svc+"/payments", conflicting); code != http.StatusConflict {
		t.Fatalf("same event id, other body: %d %v, want 409", code, r)
	}
	if code, r := post(t, svc+"/payments", map[string]any{"type": "payment.succeeded"}); code != http.StatusBadRequest {
		t.Fatalf("event without id: %d %v, want 400", code, r)
	}
	waitFor(t, "the paid order's payment processed", 20*time.Second, func() (bool, error) {
		var processed bool
		err := pool.QueryRow(ctx, "select status = 2 from workq.inbox where source = 'psp' and message_id = 'evt_1'").Scan(&processed)
		return processed, err
	})
	o := getOrder(t, pool, paid)
	if o.status != "paid" {
		t.Errorf("paid order is %q", o.status)
	}
	if st := timerState(t, pool, o.timerID); st != "cancelled" {
		t.Errorf("paid order's reminder timer is %s, want cancelled", st)
	}
	var received, attempts int
	if err := pool.QueryRow(ctx, `select count(*), (select count(*) from workq.runs where work_table = 'inbox')
		from workq.inbox where source = 'psp'`).Scan(&received, &attempts); err != nil {
		t.Fatal(err)
	}
	if received != 1 || attempts != 1 {
		t.Errorf("%d inbox rows and %d processing attempts for one event delivered twice, want 1 and 1", received, attempts)
	}
	for _, id := range ids[1:] {
		if st := timerState(t, pool, getOrder(t, pool, id).timerID); st != "ready" {
			t.Errorf("order %d (unpaid) has its reminder %s, want ready", id, st)
		}
	}

	// The relay: every order.placed in per-customer order, order.paid after
	// its customer's earlier events.
	waitFor(t, "5 order.placed and 1 order.paid delivered", 20*time.Second, func() (bool, error) {
		p, bad := rc.deliveries(topicPlaced)
		q, _ := rc.deliveries(topicPaid)
		if len(bad) > 0 {
			return false, fmt.Errorf("bad webhook requests: %v", bad)
		}
		return len(p) == 5 && len(q) == 1, nil
	})
	perCustomer := map[string][]int64{}
	for _, d := range rc.all() {
		if d.Key != d.Event.CustomerID {
			t.Errorf("message %s has partition key %q, want the customer %q", d.MessageID, d.Key, d.Event.CustomerID)
		}
		if d.Topic == topicPlaced {
			perCustomer[d.Key] = append(perCustomer[d.Key], d.Event.OrderID)
		}
	}
	for c, want := range placed {
		if !slices.Equal(perCustomer[c], want) {
			t.Errorf("customer %s: order.placed delivered for orders %v, want %v (write order)", c, perCustomer[c], want)
		}
	}
	var c1 []string
	for _, d := range rc.all() {
		if d.Key == "c1" {
			c1 = append(c1, fmt.Sprintf("%s:%d", d.Topic, d.Event.OrderID))
		}
	}
	if want := fmt.Sprintf("order.placed:%d order.placed:%d order.placed:%d order.paid:%d", ids[0], ids[2], ids[4], paid); strings.Join(c1, " ") != want {
		t.Errorf("customer c1 got %q, want %q", strings.Join(c1, " "), want)
	}

	// The schedule made orders.expire job runs that ran (expiring nothing
	// yet: no order is an hour old).
	waitFor(t, "an orders.expire job run done", 20*time.Second, func() (bool, error) {
		var done int
		err := pool.QueryRow(ctx, "select count(*) from workq.job_runs_all where kind = 'orders.expire' and status = 2").Scan(&done)
		return done >= 1, err
	})
	if err := pool.QueryRow(ctx, "select count(*) from shop_orders where status = 'expired'").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d orders expired (%v), want none yet", n, err)
	}
	stop()

	// 2. Restart with short reminders: the schedule is not created twice, and
	// a new unpaid order gets its reminder.
	fast := base
	fast.ReminderAfter = 300 * time.Millisecond
	svc, stop = startService(t, fast, logs)
	code, r := post(t, svc+"/orders", map[string]any{"customer_id": "c3", "total_cents": 700})
	if code != http.StatusCreated {
		t.Fatalf("POST /orders: %d %v", code, r)
	}
	late := int64(r["id"].(float64))
	waitFor(t, "order.reminder delivered", 20*time.Second, func() (bool, error) {
		rem, _ := rc.deliveries(topicReminder)
		return len(rem) == 1 && rem[0].Event.OrderID == late && rem[0].Key == "c3", nil
	})
	waitFor(t, "the reminder timer done", 20*time.Second, func() (bool, error) {
		return timerState(t, pool, getOrder(t, pool, late).timerID) == "done", nil
	})
	if o := getOrder(t, pool, late); o.status != "placed" || !o.reminded {
		t.Errorf("reminded order: %+v, want placed and reminded", o)
	}
	scheds, err := schedule.NewStore(schedule.StoreOptions{}).List(ctx, pool)
	if err != nil || len(scheds) != 1 || scheds[0].Name != scheduleName || scheds[0].Cron != "@every 1s" {
		t.Errorf("schedules after a restart: %+v (%v), want the one orders.expire @every 1s", scheds, err)
	}
	stop()

	// 3. Restart with a short expiry: every unpaid order expires with its
	// reminder cancelled (or, for the reminded one, left done); the paid one
	// stays paid. A payment arriving after expiry changes nothing.
	expiring := base
	expiring.ExpireAfter = time.Millisecond
	svc, stop = startService(t, expiring, logs)
	unpaid := append(slices.Clone(ids[1:]), late)
	waitFor(t, "order.expired delivered for every unpaid order", 20*time.Second, func() (bool, error) {
		exp, _ := rc.deliveries(topicExpired)
		var got []int64
		for _, d := range exp {
			got = append(got, d.Event.OrderID)
		}
		slices.Sort(got)
		return slices.Equal(got, unpaid), nil
	})
	for _, id := range unpaid {
		o := getOrder(t, pool, id)
		want := "cancelled"
		if id == late {
			want = "done"
		}
		if st := timerState(t, pool, o.timerID); o.status != "expired" || st != want {
			t.Errorf("order %d: %s with reminder %s, want expired with reminder %s", id, o.status, st, want)
		}
	}
	if o := getOrder(t, pool, paid); o.status != "paid" {
		t.Errorf("paid order became %s", o.status)
	}
	if code, r := post(t, svc+"/payments", map[string]any{"id": "evt_2", "type": "payment.succeeded", "order_id": ids[1], "amount_cents": 200}); code != http.StatusAccepted {
		t.Fatalf("payment after expiry: %d %v", code, r)
	}
	waitFor(t, "the late payment processed", 20*time.Second, func() (bool, error) {
		st, err := inboxStatus(ctx, pool, "evt_2")
		return st == "processed", err
	})
	if o := getOrder(t, pool, ids[1]); o.status != "expired" {
		t.Errorf("a payment after expiry made the order %s", o.status)
	}
	stop()
	if rem, _ := rc.deliveries(topicReminder); len(rem) != 1 {
		t.Errorf("%d reminders sent, want 1 (only the unpaid order of step 2)", len(rem))
	}
	if !strings.Contains(logs.String(), "shutting down") || !strings.Contains(logs.String(), "worker stopped") {
		t.Errorf("no graceful shutdown in the log")
	}
}

func inboxStatus(ctx context.Context, pool *pgxpool.Pool, id string) (string, error) {
	var inboxID int64
	if err := pool.QueryRow(ctx, "select id from workq.inbox where source = 'psp' and message_id = $1", id).Scan(&inboxID); err != nil {
		return "", err
	}
	m, err := admin.Get(ctx, pool, lease.Inbox, inboxID)
	if err != nil {
		return "", err
	}
	return m.State, nil
}

func TestParseSettings(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	db := map[string]string{"DATABASE_URL": "postgres://x/y"}
	s, err := parseSettings(nil, env(db))
	if err != nil || s.DatabaseURL != "postgres://x/y" || s.Addr != "127.0.0.1:8080" || s.ExpireEvery != 10*time.Second {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no database", nil, nil, "DATABASE_URL"},
		{"webhook without secret", []string{"-webhook-url", "http://h/x"}, db, "-webhook-secret"},
		{"fractional schedule", []string{"-expire-every", "1500ms"}, db, "whole seconds"},
		{"schedule under a second", []string{"-expire-every", "0s"}, db, "whole seconds"},
		{"negative reminder", []string{"-reminder-after", "-1s"}, db, "positive"},
		{"stray argument", []string{"now"}, db, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSettings(tc.args, env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := parseSettings([]string{"-no-such-flag"}, env(db)); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Errorf("unknown flag: %v", err)
	}
}
