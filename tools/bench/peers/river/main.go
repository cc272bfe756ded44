// og_peer_river: the same cancels as ordergate-consumer, claimed through River on the same
// database, for a side-by-side lateness and drain measurement (tools/bench/peers/README.md).
//
// It reads the orders named by a prefix (ordergate.orders, order_no LIKE prefix || '%') with their
// expire_at, and at each order's expire_at inserts a River job for it (state available: River's
// scheduled-job path moves jobs every 5 s, so inserting at the due time is River's best case). Its
// workers claim through ordergate.claim_cancel, the gate SQL the consumer calls, either coalesced
// in-process into calls of up to 500 order numbers (-mode coalesced, the fastest open-source
// configuration) or one call per job (-mode single, as River documents a worker). With -burst, every
// job is inserted at once before the client starts (at -start-at, epoch milliseconds, when given),
// for the drain measurement. It exits when every order of the prefix came back cancelled from its
// claims (counted in-process: no query polls the database) or after -timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type cancelArgs struct {
	OrderNo string `json:"o"`
}

func (cancelArgs) Kind() string { return "ordergate_cancel" }

// claimer is the gate call, coalesced or not.
type claimer interface {
	claim(ctx context.Context, orderNo string) error
}

// won counts the orders that came back cancelled: the program is done when it reaches the
// orders loaded.
var won atomic.Int64

const claimSQL = "SELECT count(*) FILTER (WHERE outcome = 'cancelled'), " +
	"count(*) FILTER (WHERE outcome IN ('busy', 'not_due')) " +
	"FROM ordergate.claim_cancel($1::text[], 'timeout_consumer')"

// claimCall is one claim_cancel call; an order that came back busy or not_due is not cancelled,
// and the error has River retry its job.
func claimCall(ctx context.Context, pool *pgxpool.Pool, nos []string) error {
	var w, again int64
	if err := pool.QueryRow(ctx, claimSQL, nos).Scan(&w, &again); err != nil {
		return err
	}
	won.Add(w)
	if again > 0 {
		return fmt.Errorf("%d orders busy or not due", again)
	}
	return nil
}

type singleClaimer struct{ pool *pgxpool.Pool }

func (s *singleClaimer) claim(ctx context.Context, orderNo string) error {
	return claimCall(ctx, s.pool, []string{orderNo})
}

// coalescer: each flusher (-flushers, one database session each) takes everything pending (up to 500) into one call and
// answers every job of it: a claim starts as soon as a flusher is free, never waits for company.
type coalescer struct {
	pool    *pgxpool.Pool
	mu      sync.Mutex
	cond    *sync.Cond
	pending []pendingClaim
}

type pendingClaim struct {
	orderNo string
	done    chan error
}

func newCoalescer(pool *pgxpool.Pool, flushers int) *coalescer {
	c := &coalescer{pool: pool}
	c.cond = sync.NewCond(&c.mu)
	for i := 0; i < flushers; i++ {
		go c.flusher()
	}
	return c
}

func (c *coalescer) claim(ctx context.Context, orderNo string) error {
	p := pendingClaim{orderNo, make(chan error, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, p)
	c.cond.Signal()
	c.mu.Unlock()
	return <-p.done
}

func (c *coalescer) flusher() {
	for {
		c.mu.Lock()
		for len(c.pending) == 0 {
			c.cond.Wait()
		}
		n := len(c.pending)
		if n > 500 {
			n = 500
		}
		batch := append([]pendingClaim(nil), c.pending[:n]...)
		c.pending = c.pending[n:]
		c.mu.Unlock()
		nos := make([]string, len(batch))
		for i, p := range batch {
			nos[i] = p.orderNo
		}
		err := claimCall(context.Background(), c.pool, nos)
		for _, p := range batch {
			p.done <- err
		}
	}
}

type cancelWorker struct {
	river.WorkerDefaults[cancelArgs]
	c claimer
}

func (w *cancelWorker) Work(ctx context.Context, job *river.Job[cancelArgs]) error {
	return w.c.claim(ctx, job.Args.OrderNo)
}

type due struct {
	orderNo string
	at      time.Time
}

func main() {
	prefix := flag.String("prefix", "r", "order_no prefix of the orders to cancel")
	mode := flag.String("mode", "coalesced", "coalesced | single")
	burst := flag.Bool("burst", false, "insert every job at once before starting (drain)")
	startAt := flag.Int64("start-at", 0, "burst: start the client at this time (epoch ms; 0: at once)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	workers := flag.Int("max-workers", 2000, "River MaxWorkers")
	flushers := flag.Int("flushers", 1, "coalesced: claim calls in flight at most (1: one session, as one consumer)")
	flag.Parse()
	ctx := context.Background()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	// The connection comes from the PG* environment, as for psql.
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	mig, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		log.Fatal(err)
	}

	rows, err := pool.Query(ctx, "SELECT order_no, expire_at FROM ordergate.orders "+
		"WHERE order_no LIKE $1 || '%' AND status = 'pending_payment'", *prefix)
	if err != nil {
		log.Fatal(err)
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.orderNo, &d.at); err != nil {
			log.Fatal(err)
		}
		dues = append(dues, d)
	}
	if rows.Err() != nil {
		log.Fatal(rows.Err())
	}
	sort.Slice(dues, func(i, j int) bool { return dues[i].at.Before(dues[j].at) })
	log.Printf("event=loaded orders=%d mode=%s burst=%v", len(dues), *mode, *burst)

	var cl claimer = &singleClaimer{pool}
	if *mode == "coalesced" {
		cl = newCoalescer(pool, *flushers)
	} else if *mode != "single" {
		log.Fatalf("unknown mode %q", *mode)
	}
	w := river.NewWorkers()
	river.AddWorker(w, &cancelWorker{c: cl})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers:           w,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            nil,
	})
	if err != nil {
		log.Fatal(err)
	}
	insert := func(batch []due) {
		params := make([]river.InsertManyParams, len(batch))
		for i, d := range batch {
			params[i] = river.InsertManyParams{Args: cancelArgs{d.orderNo}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			log.Fatal(err)
		}
	}
	start := time.Now()
	if *burst {
		for i := 0; i < len(dues); i += 5000 {
			j := i + 5000
			if j > len(dues) {
				j = len(dues)
			}
			insert(dues[i:j])
		}
		log.Printf("event=inserted jobs=%d", len(dues))
		start = time.Now()
		if *startAt > 0 {
			at := time.UnixMilli(*startAt)
			if start.After(at) {
				log.Fatalf("event=error inserting ended %v past -start-at", start.Sub(at))
			}
			time.Sleep(time.Until(at))
			start = at
		}
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if !*burst {
		// At each due time, the jobs due by then: one insert per millisecond at most.
		go func() {
			i := 0
			for i < len(dues) {
				if wait := time.Until(dues[i].at); wait > 0 {
					time.Sleep(wait)
				}
				now := time.Now()
				j := i
				for j < len(dues) && !dues[j].at.After(now) {
					j++
				}
				insert(dues[i:j])
				i = j
			}
		}()
	}
	deadline := time.Now().Add(*timeout)
	for won.Load() < int64(len(dues)) {
		if time.Now().After(deadline) {
			log.Printf("event=timeout left=%d", int64(len(dues))-won.Load())
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	log.Printf("event=done orders=%d seconds=%.3f", len(dues), time.Since(start).Seconds())
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = client.Stop(stopCtx)
}
