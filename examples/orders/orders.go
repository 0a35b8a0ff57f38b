package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// The service's own table. workq's tables live in the same database, which
// is what lets an order, its outbox message and its timer commit together.
const schema = `
create table if not exists shop_orders (
    id                bigint generated always as identity primary key,
    customer_id       text not null,
    total_cents       bigint not null check (total_cents > 0),
    status            text not null default 'placed' check (status in ('placed', 'paid', 'expired')),
    reminder_timer_id bigint,
    created_at        timestamptz not null default now(),
    paid_at           timestamptz,
    reminded_at       timestamptz
);
create index if not exists shop_orders_unpaid on shop_orders (created_at) where status = 'placed'`

// expireBatch bounds one expiry sweep; the next tick takes the rest.
const expireBatch = 500

type service struct {
	pool   *pgxpool.Pool
	s      settings
	log    *slog.Logger
	client *workq.Client // set before it starts
}

func newService(pool *pgxpool.Pool, s settings, log *slog.Logger) *service {
	return &service{pool: pool, s: s, log: log}
}

// Order is an order as the API shows it; OrderEvent is the payload of every
// outbox message about one.
type Order struct {
	ID              int64      `json:"id"`
	CustomerID      string     `json:"customer_id"`
	TotalCents      int64      `json:"total_cents"`
	Status          string     `json:"status"` // placed, paid or expired
	ReminderTimerID int64      `json:"reminder_timer_id"`
	CreatedAt       time.Time  `json:"created_at"`
	PaidAt          *time.Time `json:"paid_at,omitempty"`
	RemindedAt      *time.Time `json:"reminded_at,omitempty"`
}

type OrderEvent struct {
	OrderID    int64  `json:"order_id"`
	CustomerID string `json:"customer_id"`
	TotalCents int64  `json:"total_cents"`
}

// PSPEvent is the payment provider's webhook body.
type PSPEvent struct {
	ID          string `json:"id"`   // the provider's event id: the inbox message id
	Type        string `json:"type"` // e.g. payment.succeeded: the inbox topic
	OrderID     int64  `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.handlePlace)
	mux.HandleFunc("GET /orders/{id}", s.handleGet)
	mux.HandleFunc("POST /payments", s.handlePayment)
	return mux
}

func (s *service) handlePlace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CustomerID string `json:"customer_id"`
		TotalCents int64  `json:"total_cents"`
	}
	if _, err := readJSON(w, r, &req); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	// The customer id is the outbox partition key: at most 256 bytes.
	if req.CustomerID == "" || len(req.CustomerID) > 256 || !utf8.ValidString(req.CustomerID) || req.TotalCents <= 0 {
		httpError(w, http.StatusBadRequest, errors.New("customer_id (1-256 bytes of UTF-8) and a positive total_cents are required"))
		return
	}
	o, err := s.placeOrder(r.Context(), req.CustomerID, req.TotalCents)
	if err != nil {
		s.log.Error("place order", "err", err)
		httpError(w, http.StatusInternalServerError, errors.New("could not place the order"))
		return
	}
	s.log.Info("order placed", "order_id", o.ID, "customer", o.CustomerID, "reminder_timer", o.ReminderTimerID)
	writeJSON(w, http.StatusCreated, o)
}

// placeOrder writes the order, its reminder timer and its order.placed
// message in one transaction: all three exist, or none.
func (s *service) placeOrder(ctx context.Context, customer string, cents int64) (Order, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Order{}, err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	o := Order{CustomerID: customer, TotalCents: cents, Status: "placed"}
	if err := tx.QueryRow(ctx, "insert into shop_orders (customer_id, total_cents) values ($1, $2) returning id, created_at",
		customer, cents).Scan(&o.ID, &o.CreatedAt); err != nil {
		return Order{}, fmt.Errorf("insert order: %w", err)
	}
	t, err := s.client.ScheduleTimerTx(ctx, tx, timers.Timer{Queue: queue, Topic: timerReminder, Delay: s.s.ReminderAfter,
		Payload: OrderEvent{OrderID: o.ID, CustomerID: customer, TotalCents: cents}})
	if err != nil {
		return Order{}, err
	}
	o.ReminderTimerID = t.ID
	if _, err := tx.Exec(ctx, "update shop_orders set reminder_timer_id = $2 where id = $1", o.ID, t.ID); err != nil {
		return Order{}, err
	}
	// Keyed by customer: each customer's events reach consumers in order.
	if _, err := s.client.SendTx(ctx, tx, outbox.Message{Queue: queue, Topic: topicPlaced, PartitionKey: customer,
		Payload: OrderEvent{OrderID: o.ID, CustomerID: customer, TotalCents: cents}}); err != nil {
		return Order{}, err
	}
	return o, tx.Commit(ctx)
}

func (s *service) handleGet(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		httpError(w, http.StatusBadRequest, errors.New("order id must be a number"))
		return
	}
	var o Order
	err = s.pool.QueryRow(r.Context(), `select id, customer_id, total_cents, status, coalesce(reminder_timer_id, 0),
		created_at, paid_at, reminded_at from shop_orders where id = $1`, id).
		Scan(&o.ID, &o.CustomerID, &o.TotalCents, &o.Status, &o.ReminderTimerID, &o.CreatedAt, &o.PaidAt, &o.RemindedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		httpError(w, http.StatusNotFound, fmt.Errorf("no order %d", id))
	case err != nil:
		s.log.Error("get order", "err", err)
		httpError(w, http.StatusInternalServerError, errors.New("could not read the order"))
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

// handlePayment records the provider's event in the inbox and answers 2xx
// only after that commits; the provider retries anything else. A
// redelivery is a duplicate and is never processed twice.
func (s *service) handlePayment(w http.ResponseWriter, r *http.Request) {
	var ev PSPEvent
	body, err := readJSON(w, r, &ev)
	if err == nil && (ev.ID == "" || ev.Type == "") {
		err = errors.New("id and type are required")
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	tx, err := s.pool.Begin(r.Context())
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, errors.New("try again"))
		return
	}
	defer tx.Rollback(r.Context())
	// In a transaction so that anything else this request records (an audit
	// row, say) commits together with the receipt, or not at all.
	got, err := s.client.ReceiveTx(r.Context(), tx, inbox.Message{Queue: queue, Source: pspSource, MessageID: ev.ID,
		Topic: ev.Type, Payload: body})
	switch {
	case errors.Is(err, inbox.ErrConflict):
		httpError(w, http.StatusConflict, fmt.Errorf("event %s was received before with another body", ev.ID))
		return
	case errors.Is(err, workq.ErrInvalid):
		httpError(w, http.StatusBadRequest, err)
		return
	case err != nil:
		s.log.Error("receive payment event", "err", err)
		httpError(w, http.StatusServiceUnavailable, errors.New("try again"))
		return
	}
	if err := tx.Commit(r.Context()); err != nil {
		httpError(w, http.StatusServiceUnavailable, errors.New("try again"))
		return
	}
	s.log.Info("payment event received", "event", ev.ID, "duplicate", got.Duplicate, "inbox_id", got.ID)
	status := http.StatusAccepted
	if got.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, got)
}

// markPaid is the inbox handler of payment.succeeded: the order becomes
// paid, its reminder is cancelled and order.paid is sent, in one
// transaction. It may run again after a lost acknowledgement, so it does
// nothing to an order that is no longer placed.
func (s *service) markPaid(ctx context.Context, m *workq.Message[PSPEvent]) error {
	ev := m.Payload
	log := m.Logger().With("order_id", ev.OrderID, "event", ev.ID)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var o OrderEvent
	var status string
	var timerID *int64
	// The row lock orders this against the reminder and the expiry sweep.
	err = tx.QueryRow(ctx, "select customer_id, total_cents, status, reminder_timer_id from shop_orders where id = $1 for update",
		ev.OrderID).Scan(&o.CustomerID, &o.TotalCents, &status, &timerID)
	if errors.Is(err, pgx.ErrNoRows) {
		// Dead at once: an operator looks into it (`workq inbox revive`).
		return workq.Permanent(fmt.Errorf("payment %s for unknown order %d", ev.ID, ev.OrderID))
	}
	if err != nil {
		return err
	}
	if status != "placed" {
		log.Warn("payment for an order that is not awaiting payment; nothing changed", "status", status)
		return nil
	}
	if ev.AmountCents != o.TotalCents {
		return workq.Permanent(fmt.Errorf("payment %s of %d cents for order %d of %d cents", ev.ID, ev.AmountCents, ev.OrderID, o.TotalCents))
	}
	if _, err := tx.Exec(ctx, "update shop_orders set status = 'paid', paid_at = now() where id = $1", ev.OrderID); err != nil {
		return err
	}
	if err := s.cancelReminder(ctx, tx, log, timerID); err != nil {
		return err
	}
	o.OrderID = ev.OrderID
	if _, err := s.client.SendTx(ctx, tx, outbox.Message{Queue: queue, Topic: topicPaid, PartitionKey: o.CustomerID, Payload: o}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	log.Info("order paid")
	return nil
}

// cancelReminder cancels an order's reminder timer in tx. A reminder that
// is running (ErrClaimed) or ran (ErrFinished) needs nothing more: its
// handler locks the order row, so it either finished before this
// transaction took the lock, or it will see the order no longer placed.
func (s *service) cancelReminder(ctx context.Context, tx pgx.Tx, log *slog.Logger, timerID *int64) error {
	if timerID == nil {
		return nil
	}
	err := s.client.CancelTimerTx(ctx, tx, *timerID)
	switch {
	case err == nil:
		log.Info("payment reminder cancelled", "timer", *timerID)
	case errors.Is(err, timers.ErrClaimed), errors.Is(err, timers.ErrFinished), errors.Is(err, timers.ErrNotFound):
		// ErrNotFound: retention deleted it long after it finished.
		log.Info("payment reminder not cancelled", "timer", *timerID, "reason", err)
	default:
		return err
	}
	return nil
}

// remind is the reminder timer's handler: it sends order.reminder only if
// the order is still awaiting payment, and at most once.
func (s *service) remind(ctx context.Context, m *workq.Message[OrderEvent]) error {
	ev := m.Payload
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var status string
	var reminded bool
	err = tx.QueryRow(ctx, "select status, reminded_at is not null from shop_orders where id = $1 for update", ev.OrderID).Scan(&status, &reminded)
	if errors.Is(err, pgx.ErrNoRows) {
		return workq.Permanent(fmt.Errorf("reminder for unknown order %d", ev.OrderID))
	}
	if err != nil {
		return err
	}
	if status != "placed" || reminded {
		m.Logger().Info("no reminder needed", "order_id", ev.OrderID, "status", status, "reminded", reminded)
		return nil
	}
	if _, err := s.client.SendTx(ctx, tx, outbox.Message{Queue: queue, Topic: topicReminder, PartitionKey: ev.CustomerID, Payload: ev}); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "update shop_orders set reminded_at = now() where id = $1", ev.OrderID); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	m.Logger().Info("payment reminder sent", "order_id", ev.OrderID)
	return nil
}

// expire is the orders.expire job (made by the schedule): it expires
// orders unpaid for longer than -expire-after, cancels their reminders and
// sends order.expired, one batch per run. Orders locked by a payment in
// progress are skipped (the payment decides them).
func (s *service) expire(ctx context.Context, job *workq.Job[ExpireArgs]) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `
		update shop_orders set status = 'expired'
		where id in (select id from shop_orders
		             where status = 'placed' and created_at < now() - $1::bigint * interval '1 microsecond'
		             order by created_at limit $2 for update skip locked)
		returning id, customer_id, total_cents, reminder_timer_id`, s.s.ExpireAfter.Microseconds(), expireBatch)
	if err != nil {
		return err
	}
	var msgs []outbox.Message
	var reminders []*int64
	for rows.Next() {
		var ev OrderEvent
		var timerID *int64
		if err := rows.Scan(&ev.OrderID, &ev.CustomerID, &ev.TotalCents, &timerID); err != nil {
			rows.Close()
			return err
		}
		msgs = append(msgs, outbox.Message{Queue: queue, Topic: topicExpired, PartitionKey: ev.CustomerID, Payload: ev})
		reminders = append(reminders, timerID)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	log := job.Logger()
	for _, id := range reminders {
		if err := s.cancelReminder(ctx, tx, log, id); err != nil {
			return err
		}
	}
	if len(msgs) > 0 {
		if _, err := s.client.SendManyTx(ctx, tx, msgs); err != nil { // one statement
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	log.Info("expiry sweep", "expired", len(msgs))
	return nil
}

// readJSON decodes a JSON object body of at most 64 KiB into v and returns
// the raw bytes.
func readJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("body is not the expected JSON object: %w", err)
	}
	return body, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
