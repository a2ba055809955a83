package main

import (
	"encoding/json"
	"testing"
	"time"
)

// writeLate makes sub's queued delivery after wait, as its connection's goroutine would when
// it comes round to writing it, and returns its timings and the moment it was made.
func writeLate(t *testing.T, sub *subscriber, wait time.Duration) (timings struct{ Duration, Sent, Created int64 }, made int64) {
	t.Helper()
	time.Sleep(wait)
	items, _ := sub.out.take()
	made = time.Now().UnixMilli()
	var delivery struct {
		Response struct {
			Event struct {
				Timings struct{ Duration, Sent, Created int64 }
			}
		}
	}
	if err := json.Unmarshal(items[0].bytes(2), &delivery); err != nil {
		t.Fatal(err)
	}
	return delivery.Response.Event.Timings, made
}

// A delivery's `sent` is the moment its connection's goroutine makes its bytes to write
// them (spec §6), not the moment the emit cycle queued it; the cycle's emit duration in
// /stats runs to the latest such stamp, counted once per cycle.
func TestSentIsTakenWhenTheDeliveryIsWrittenNotWhenItIsQueued(t *testing.T) {
	hub := newPushHub(newStats())
	var subs []*subscriber
	for range 2 {
		sub := newSubscriber(comet, []byte(`{"type":"comet","events":["e"]}`), newOutbox())
		hub.subscribe(sub, []string{"e"}, nil)
		subs = append(subs, sub)
	}
	hub.publish("e", []byte("null"))
	queued := time.Now().UnixMilli()
	if report := hub.report()["e"]; report.MaxEmitDurationMS != 0 || report.Deliveries != 2 {
		t.Fatalf("queued, none written: %+v", report)
	}
	first, _ := writeLate(t, subs[0], 30*time.Millisecond)
	last, made := writeLate(t, subs[1], 30*time.Millisecond)
	if first.Sent < queued+30 || last.Sent < made || last.Sent < first.Sent+30 ||
		last.Duration != last.Sent-last.Created {
		t.Fatalf("queued at %d, then sent %+v and %+v (made at %d)", queued, first, last, made)
	}
	report := hub.report()["e"]
	if report.LastEmitDurationMS != last.Duration || report.MaxEmitDurationMS != last.Duration ||
		report.TotalEmitDurationMS != last.Duration {
		t.Fatalf("emit durations %+v, the cycle's last delivery %d", report, last.Duration)
	}
}
