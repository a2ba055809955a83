package main

// Runtime signals for serverlab's side file (-signals-file): the runtime's own figures
// from runtime/metrics, written as JSON lines, one object per sample, so that a GC pause
// can be laid over the load's timeline without asking the server over HTTP (a starved
// server could not answer).

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"os"
	"runtime/metrics"
	"time"
)

const signalsInterval = 100 * time.Millisecond

// The metrics read each interval (all in the standard runtime/metrics set).
const (
	metricPauses    = "/sched/pauses/total/gc:seconds"
	metricLatencies = "/sched/latencies:seconds"
	metricHeap      = "/memory/classes/heap/objects:bytes"
	metricGoal      = "/gc/heap/goal:bytes"
	metricCycles    = "/gc/cycles/total:gc-cycles"
	metricRoutines  = "/sched/goroutines:goroutines"
)

// signalLine is one line of the side file: t in Unix seconds, kind, value, and extra figures.
type signalLine map[string]any

// signalSampler turns cumulative runtime/metrics histograms into per-interval lines.
type signalSampler struct {
	samples []metrics.Sample
	last    map[string][]uint64 // histogram counts at the previous read
}

func newSignalSampler() *signalSampler {
	names := []string{metricPauses, metricLatencies, metricHeap, metricGoal, metricCycles, metricRoutines}
	s := &signalSampler{last: map[string][]uint64{}}
	for _, name := range names {
		s.samples = append(s.samples, metrics.Sample{Name: name})
	}
	return s
}

// read returns this interval's lines: each new GC pause (by histogram bucket), the worst
// scheduling latency (Go's counterpart of an event loop's delay), and the heap.
func (s *signalSampler) read(now time.Time) []signalLine {
	metrics.Read(s.samples)
	t := float64(now.UnixNano()) / 1e9
	var lines []signalLine
	byName := map[string]metrics.Value{}
	for _, sample := range s.samples {
		byName[sample.Name] = sample.Value
	}
	for _, pause := range s.newInBuckets(metricPauses, byName[metricPauses]) {
		lines = append(lines, signalLine{"t": t, "kind": "gc_pause", "value": pause.ms, "count": pause.count})
	}
	if worst := s.newInBuckets(metricLatencies, byName[metricLatencies]); len(worst) > 0 {
		lines = append(lines, signalLine{"t": t, "kind": "sched_latency", "value": worst[len(worst)-1].ms})
	}
	lines = append(lines, signalLine{
		"t": t, "kind": "heap_used", "value": uint64Of(byName[metricHeap]),
		"goal": uint64Of(byName[metricGoal]), "gc_cycles": uint64Of(byName[metricCycles]),
		"goroutines": uint64Of(byName[metricRoutines]),
	})
	return lines
}

type bucketCount struct {
	ms    float64
	count uint64
}

// newInBuckets is what a cumulative histogram gained since the last read, bucket by bucket
// in rising order, each bucket's value its upper bound in ms (its lower one if unbounded).
func (s *signalSampler) newInBuckets(name string, value metrics.Value) []bucketCount {
	if value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	h := value.Float64Histogram()
	previous := s.last[name]
	var gained []bucketCount
	for i, count := range h.Counts {
		before := uint64(0)
		if i < len(previous) {
			before = previous[i]
		}
		if count > before {
			gained = append(gained, bucketCount{ms: bucketMs(h.Buckets[i], h.Buckets[i+1]), count: count - before})
		}
	}
	s.last[name] = append([]uint64(nil), h.Counts...)
	return gained
}

func bucketMs(low, high float64) float64 {
	if math.IsInf(high, 1) {
		return low * 1000
	}
	return high * 1000
}

func uint64Of(value metrics.Value) uint64 {
	if value.Kind() != metrics.KindUint64 {
		return 0
	}
	return value.Uint64()
}

// writeSignals samples every interval until stop is closed, flushing each batch.
func writeSignals(out io.Writer, sampler *signalSampler, interval time.Duration, stop <-chan struct{}) {
	buffered := bufio.NewWriter(out)
	encoder := json.NewEncoder(buffered)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	sampler.read(time.Now()) // the baseline: pauses before now are not this run's
	for {
		select {
		case <-stop:
			return
		case now := <-ticker.C:
			for _, line := range sampler.read(now) {
				_ = encoder.Encode(line)
			}
			_ = buffered.Flush()
		}
	}
}

// startSignals opens the side file and samples into it in the background; "" = off.
func startSignals(path string) error {
	if path == "" {
		return nil
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	go writeSignals(file, newSignalSampler(), signalsInterval, nil)
	return nil
}
