// Command eos is an exactly-once ETL on franz-go's GroupTransactSession, run by
// tests/ecosystem/test_franz_go.py against a pybroker.
//
// It consumes -in as a member of -group (read_committed), writes one record per
// input record to -out (the value prefixed with "etl:", key and headers kept),
// and commits the consumed offsets inside the same transaction (KIP-447: the
// group's generation travels with TxnOffsetCommit, so a fenced or rebalanced
// member's transaction aborts instead of committing). Several instances with
// distinct -txn-id share the input partitions; killed ones may be restarted
// with their -txn-id, whose InitProducerId aborts what they left open.
//
// Stdout carries one line per event the test may read: "ASSIGNED", "COMMITTED n",
// "ABORTED n", "RESTARTED" (a failed session replaced). It runs until SIGTERM/SIGINT,
// then leaves its group cleanly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "seed brokers, comma separated")
	group := flag.String("group", "eos", "consumer group")
	in := flag.String("in", "eos-in", "input topic")
	out := flag.String("out", "eos-out", "output topic")
	txnID := flag.String("txn-id", "eos-0", "transactional id of this instance")
	batch := flag.Int("batch", 50, "most records per transaction")
	pause := flag.Duration("pause", 0, "sleep inside each transaction (widens the window a kill lands in)")
	debug := flag.Bool("debug", false, "log kgo's debug lines to stderr")
	flag.Parse()

	level := kgo.LogLevelWarn
	if *debug {
		level = kgo.LogLevelDebug
	}

	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)),
		kgo.TransactionalID(*txnID),
		kgo.TransactionTimeout(10 * time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*in),
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			fmt.Println("ASSIGNED")
		}),
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// An error from Begin or End is not retryable (franz-go's doc of End): the session is closed and a new
	// one made on the same transactional id, whose InitProducerId fences and aborts what the last one left.
	for ctx.Err() == nil {
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "eos: new session: %v\n", err)
			os.Exit(2)
		}
		err = run(ctx, sess, *out, *batch, *pause)
		sess.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "eos: session failed, starting another: %v\n", err)
			fmt.Println("RESTARTED")
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// run is one session's loop: poll, transform, produce and commit in one transaction. It returns nil when
// ctx ends, or the error that makes the session unusable.
func run(ctx context.Context, sess *kgo.GroupTransactSession, out string, batch int, pause time.Duration) error {
	for ctx.Err() == nil {
		fetches := sess.PollRecords(ctx, batch)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			fmt.Fprintf(os.Stderr, "eos: fetch %s[%d]: %v\n", topic, partition, err)
		})
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if err := produce(ctx, sess, out, records); err != nil {
			fmt.Fprintf(os.Stderr, "eos: produce: %v\n", err)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
		// End commits only if every produce succeeded and the group did not move on; otherwise it aborts,
		// and the records come again (to this member or another) from the last committed offsets
		committed, err := sess.End(ctx, kgo.TryCommit)
		switch {
		case err != nil && errors.Is(err, context.Canceled):
			return nil
		case err != nil:
			fmt.Printf("ABORTED %d\n", len(records))
			return fmt.Errorf("end: %w", err)
		case committed:
			fmt.Printf("COMMITTED %d\n", len(records))
		default:
			fmt.Printf("ABORTED %d\n", len(records))
		}
	}
	return nil
}

// produce writes the transformed records and waits for all of them; the first error is returned (End then
// aborts: a failed produce fails the whole transaction).
func produce(ctx context.Context, sess *kgo.GroupTransactSession, out string, records []*kgo.Record) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, r := range records {
		value := append([]byte("etl:"), r.Value...)
		wg.Add(1)
		sess.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: value, Headers: r.Headers},
			func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			})
	}
	wg.Wait()
	return first
}
