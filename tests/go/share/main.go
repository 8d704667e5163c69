// Command share runs franz-go's share consumer (kgo.ShareGroup, KIP-932) through the scenario of
// tests/conformance/test_share_franz.py and prints one JSON object a line of what happened to each
// record. The topic, its records r0..r<total-1> and the group's configs
// (share.auto.offset.reset=earliest, share.record.lock.duration.ms) are set up by the test.
//
// Phase 1: consumers "a" and "b" share the records, at most 50 a fetch, releasing values ending
// in 3 at their first delivery and rejecting those ending in 7; every other record is accepted.
// "b" then leaves the group. Phase 2: 20 new records are produced; "a" polls once, gets some and
// stops: no acknowledgement, no further poll (a poll would accept them) and no fetch (it pauses
// the topic; franz-go otherwise fetches ahead of the poll and would take the records again when
// their locks expire). A new consumer "c" joins and gets them once their acquisition locks expire.
//
// Usage: share <bootstrap> <topic> <group> <total> <lock ms>
// FRANZ_DEBUG=1 logs the clients' requests on stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(v map[string]any) {
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(v)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// consumer joins the share group as client id share-<who>; acknowledgement results are printed
// as they come (an error there is a broker refusing an acknowledgement).
func consumer(bootstrap, topic, group, who string) *kgo.Client {
	opts := []kgo.Opt{}
	if os.Getenv("FRANZ_DEBUG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug,
			func() string { return time.Now().Format("15:04:05.000 ") + who + " " })))
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("franz-"+who),
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic),
		// at most 50 records a fetch, splitting batches (ShareFetch's record_limit acquire mode):
		// the 300 records come as one batch, and a consumer taking them all leaves nothing to share
		kgo.ShareMaxRecords(50), kgo.ShareMaxRecordsStrict(),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			for _, r := range rs {
				if r.Err != nil {
					emit(map[string]any{"ack_error": r.Err.Error(), "consumer": who})
				}
			}
		}),
	)...)
	if err != nil {
		fail("%s: %v", who, err)
	}
	return cl
}

func value(r *kgo.Record) int {
	v, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "r"))
	if err != nil {
		fail("value %q: %v", r.Value, err)
	}
	return v
}

// decide is what a consumer of phase 1 does with a record: release 3s once, reject 7s, accept.
func decide(v int, delivery int32) kgo.AckStatus {
	switch {
	case v%10 == 7:
		return kgo.AckReject
	case v%10 == 3 && delivery == 1:
		return kgo.AckRelease
	}
	return kgo.AckAccept
}

func record(who string, phase int, r *kgo.Record, action string, started time.Time) {
	emit(map[string]any{"consumer": who, "phase": phase, "offset": r.Offset,
		"value": string(r.Value), "delivery": r.DeliveryCount(), "action": action,
		"ms": time.Since(started).Milliseconds()})
}

// poll waits at most wait for records; a timeout is no records, any other error ends the run.
func poll(cl *kgo.Client, wait time.Duration) []*kgo.Record {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fetches := cl.PollRecords(ctx, 0)
	fetches.EachError(func(t string, p int32, err error) {
		if ctx.Err() == nil {
			fail("poll %s-%d: %v", t, p, err)
		}
	})
	return fetches.Records()
}

func flush(cl *kgo.Client, who string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.FlushAcks(ctx); err != nil {
		fail("%s: FlushAcks: %v", who, err)
	}
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: share <bootstrap> <topic> <group> <total> <lock ms>")
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	total, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("total: %v", err)
	}
	lockMs, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fail("lock ms: %v", err)
	}

	// phase 1: both consume until every record is accepted or rejected
	started := time.Now()
	var finished atomic.Int64
	var done atomic.Bool
	clients := map[string]*kgo.Client{}
	var wg sync.WaitGroup
	for _, who := range []string{"a", "b"} {
		cl := consumer(bootstrap, topic, group, who)
		clients[who] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(60 * time.Second)
			for !done.Load() && time.Now().Before(deadline) {
				for _, r := range poll(cl, 200*time.Millisecond) {
					action := decide(value(r), r.DeliveryCount())
					r.Ack(action)
					record(who, 1, r, action.String(), started)
					if action != kgo.AckRelease && finished.Add(1) >= int64(total) {
						done.Store(true)
					}
				}
				flush(cl, who)
			}
		}()
	}
	wg.Wait()
	emit(map[string]any{"phase1": finished.Load(), "ms": time.Since(started).Milliseconds()})
	if finished.Load() < int64(total) {
		fail("phase 1: %d of %d records settled in 60 s", finished.Load(), total)
	}
	clients["b"].Close() // leaves the group: its share session closes, it holds nothing
	emit(map[string]any{"left": "b"})

	// phase 2: "a" takes some of 20 new records and stops polling; "c" gets them later
	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("franz-producer"),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		fail("producer: %v", err)
	}
	var fresh []*kgo.Record
	for i := total; i < total+20; i++ {
		fresh = append(fresh, &kgo.Record{Value: []byte(fmt.Sprintf("r%d", i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := producer.ProduceSync(ctx, fresh...).FirstErr(); err != nil {
		fail("produce: %v", err)
	}
	cancel()
	producer.Close()
	phase2 := time.Now()
	a := clients["a"]
	held := 0
	for deadline := phase2.Add(30 * time.Second); held == 0 && time.Now().Before(deadline); {
		for _, r := range poll(a, 200*time.Millisecond) {
			record("a", 2, r, "none", phase2)
			held++
		}
	}
	// a stops: no poll (a poll would accept what it holds) and no fetch (franz-go fetches ahead
	// of the poll while its buffer is empty, and would take the records back when their locks
	// expire); it stays in the group, heartbeating
	a.PauseFetchTopics(topic)
	emit(map[string]any{"held": held})
	c := consumer(bootstrap, topic, group, "c")
	got := 0
	for deadline := time.Now().Add(time.Duration(lockMs)*time.Millisecond + 30*time.Second); got < 20 && time.Now().Before(deadline); {
		for _, r := range poll(c, 200*time.Millisecond) {
			r.Ack(kgo.AckAccept)
			record("c", 2, r, "accept", phase2)
			got++
		}
		flush(c, "c")
	}
	emit(map[string]any{"phase2": got, "ms": time.Since(phase2).Milliseconds()})
	c.Close()
	a.Close()
	emit(map[string]any{"closed": true})
}
